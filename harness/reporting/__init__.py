"""Reading bundles for people: `cell_rows` turns a bundle into one row per cell, and `speedups`,
`baseline_speedups`, `fusion_pairs`, `kernels` and `cell_tables` into the analyses and tables a
report shows; `markdown` and `html` render them (with `plots`), `compare` sets two bundles side by
side (pairing by `pairing`, judging by `judging`; `fusion_verdicts`, `system_differences`; written
by `compare_output`), `findings` says what several bundles answer about fusion per model and across
models (rendered by `findings_page`), and `pack` writes a bundle as an MLPerf-style submission tree.
Reads bundles only through harness.bundle; never runs a model.
"""
