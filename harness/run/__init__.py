"""The parent process of a run: `runner` takes a `run_request` through its steps: `opening` reads
what it starts from, `sweep` runs each cell in a worker process through `isolation` (time and
memory limits, process groups) and writes it into the bundle, and `ending` closes the bundle and
says how the run went; `preflight`, `resumable`, `skips`, `executor_choice`, `executors`, `slots`
and `ray_executor` decide what runs where; `probe` and `system`
describe the machine (with `machine_noise`, how steady it is), `summary` prints the console tables,
`rounds` runs further rounds, the cells of a setting taking turns, and `gpu_check` is the end-to-end check of a GPU
machine. Running in a container is harness/container/'s job.
"""
