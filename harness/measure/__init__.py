"""Inside one cell's process: `worker` is the entry point (`python -m harness.measure.worker
REQUEST.json`, the request and answer typed in `protocol`); in its `phases`, each timed by its
`phase_clock`, it prepares the backend, checks `correctness` against eager, runs the `passes`
(kernels, `memory`, profiler), the `timing` of the device, LoadGen through `loadgen` and its
system under test `sut`, and judges the figures (`trust`, with `activity` and `gpu_state` saying
what ran beside them). `roofline` measures the device's peaks. The only package besides models/
that may import torch and LoadGen, and it does so inside functions.
"""
