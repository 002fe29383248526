"""The parent process of a run: `runner` expands a scenario into cells and runs each in a worker
process through `isolation` (time and memory limits, process groups); `preflight`, `resumable`,
`skips`, `executors`, `slots` and `ray_executor` decide what runs where; `probe` and `system`
describe the machine (with `machine_noise`, how steady it is), `summary` prints the console tables,
`rounds` runs further rounds, the cells of a setting taking turns, and `gpu_check` is the end-to-end check of a GPU
machine. Running in a container is harness/container/'s job.
"""
