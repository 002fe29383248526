"""Cells as tasks on a Ray cluster (`fusionbench run FILE --executor ray [--address ADDR]`).

Each cell becomes one Ray task that reserves what the cell needs: one GPU (and one CPU) for a
cuda cell, `cpus_per_cell` CPUs for a CPU cell. On its node the task claims that many cores no
other cell holds (harness/run/slots.py), binds the worker to them, and runs the same worker entry
point under the same isolation, time and memory limits as a local run (harness/run/isolation.py),
in a scratch folder of its own; it sends back the worker's outcome, every file the worker wrote
and where it ran (hostname, Ray node, GPUs, the node's CPU and GPUs). The driver writes them into
the bundle as tasks finish, so the bundle is the same as a local run's.

A task whose Ray worker dies (a node lost, a process killed) is run once more by Ray
(`max_retries=1`); a second loss fails the cell with the reason, never loses it. Ctrl-C cancels
every task. Ray is an optional extra (`pip install .[ray]`); nodes need FusionBench installed
and the scenario's input folder and cache at the same paths.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from harness.errors import ConfigError
from harness.run.executors import CellTask, Finished, OnPhase, node_info
from harness.run.isolation import WorkerOutcome, run_worker
from harness.run.scratch import scratch_dir
from harness.run.slots import Slot, claimed

RETRIES = 1
WAIT_S = 0.5
HOW_TO_GET_RAY = "Ray is not installed: `pip install .[ray]` adds it (./run.sh installs it with the rest)"


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray: {HOW_TO_GET_RAY}") from None
    return ray


def run_on_node(task: CellTask, cpus: int) -> dict[str, Any]:
    """On the node: the cell's worker in a scratch folder, on cores of its own; what came of it."""
    with scratch_dir("fusionbench-ray-cell-") as scratch:
        request = replace(task.request, artifact_dir=str(scratch))
        with claimed(cpus) as slot:
            outcome = run_worker(request, timeout_s=task.timeout_s, log_path=scratch / "worker.log",
                                 memory_limit_bytes=task.memory_limit_bytes, env_names=task.env_names,
                                 scratch_env=task.scratch_env, slot=slot)
        files = {p.relative_to(scratch).as_posix(): p.read_bytes() for p in sorted(scratch.rglob("*")) if p.is_file()}
        return {"outcome": outcome, "files": files, "node": _node(slot)}


def _node(slot: Slot) -> dict[str, Any]:
    import os

    import ray

    return {**node_info(slot, "ray"), "ray_node_id": ray.get_runtime_context().get_node_id(),
            "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


class RayExecutor:
    def __init__(self, address: str | None, cpus_per_cell: int = 1) -> None:
        if cpus_per_cell < 1:
            raise ConfigError(f"--cpus-per-cell {cpus_per_cell}: give 1 or more")
        self.address = address
        self.cpus_per_cell = cpus_per_cell
        self.ray = ray_module()

    def record(self) -> dict[str, Any]:
        return {"name": "ray", "address": self.address, "cpus_per_cell": self.cpus_per_cell}

    def resources(self, task: CellTask) -> dict[str, Any]:
        if task.device == "cuda":
            return {"num_cpus": 1, "num_gpus": 1}
        return {"num_cpus": self.cpus_per_cell, "num_gpus": 0}

    def run(self, tasks: list[CellTask], on_phase: OnPhase) -> Iterator[Finished]:
        ray = self.ray
        if not ray.is_initialized():
            # Ray's core worker installs its own SIGTERM and SIGINT handlers, which end the process;
            # keep the run's own, which leave the bundle interrupted and resumable.
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            for sig, handler in handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
        remote = ray.remote(run_on_node)
        pending: dict[Any, CellTask] = {}
        for task in tasks:
            need = self.resources(task)
            ref = remote.options(**need, max_retries=RETRIES, retry_exceptions=False).remote(task, max(1, need["num_cpus"]))
            pending[ref] = task
            on_phase(task, "start")
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    task = pending.pop(ref)
                    yield self._finished(task, ref)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    def _finished(self, task: CellTask, ref: Any) -> Finished:
        ray = self.ray
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as exc:
            why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            return Finished(task, None, {"executor": "ray"},
                            failure=f"the Ray task running it was lost {RETRIES + 1} times ({type(exc).__name__}: {why})")
        for rel, data in result["files"].items():
            path = task.artifacts / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        outcome: WorkerOutcome = result["outcome"]
        return Finished(task, outcome, result["node"])
