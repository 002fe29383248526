"""The parent process of a run: `runner` expands a scenario into cells and runs each in a worker
process through `isolation` (time and memory limits, process groups), in a `container` when asked;
`probe` and `system` describe the machine (with `machine_noise`, how steady it is), `summary`
prints the console tables, `engine` starts and stops a Docker engine of the project's own (reading
the host through `host_processes`, `host_network` and `host_folders`), and `gpu_check` is the
end-to-end check of a GPU machine.
"""
