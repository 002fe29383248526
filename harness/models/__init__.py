"""The models a scenario can name and how each is built. `catalog` lists torchvision's classifiers
without importing torch; `extra_models` adds the fusion-pattern micro-models and the non-vision
models of the literature suites; `zoo` builds a model with its weights, inputs and dtype inside a
cell's process (the only place torch is imported for a model).
"""
