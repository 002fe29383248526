"""Which executor runs a run's cells (harness/run/executors.py): with `--executor ray` the cluster,
reached before the machine is probed; otherwise the local one, one cell at a time or `--jobs`
slots of cores and GPUs, its workers forked from preloaded parents unless `--fresh-workers`. Also
the share of the machine each gives a cell, as its record says it (`machine_share`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING

from harness import cgroup_limits
from harness.bundle.writer import Bundle
from harness.reporting.run_facts import share
from harness.run import slots
from harness.run.executors import Executor, LocalPool, Serial
from harness.run.preloaded_parents import PreloadedParents
from harness.run.probe_answer import ProbeAnswer
from harness.run.run_request import RunRequest

if TYPE_CHECKING:
    from harness.run.ray_executor import RayExecutor


def reach_ray(request: RunRequest, bundle: Bundle | None, device: str, all_finished: bool) -> RayExecutor | None:
    """With `--executor ray`, its executor, once the cluster has answered and could run the cells
    (when the device is known yet): checked before the machine is probed and before the bundle is
    made, so a cluster that cannot run them costs seconds and leaves nothing behind."""
    if request.executor != "ray":
        return None
    from harness.run.ray_executor import RayExecutor

    executor = RayExecutor(request.address, request.cpus_per_cell, request.ray_connect_timeout_s)
    if not all_finished:  # nothing to run: the cluster is not needed
        executor.reach(bundle.device if bundle is not None else device)
    return executor


def local_executor(request: RunRequest, device: str, probe: ProbeAnswer, backends: list[str],
                   closing: ExitStack) -> Executor:
    """The executor on this machine: one cell at a time, or `--jobs` slots; each worker forked from a
    preloaded parent that imports what `backends` name (closed with `closing`), unless `--fresh-workers`."""
    parents = None
    if not request.fresh_workers:
        parents = PreloadedParents(backends)
        closing.callback(parents.close)
    if request.jobs == 1:
        return Serial(parents)
    return LocalPool(local_slots(request, device, probe), parents)


def local_slots(request: RunRequest, device: str, probe: ProbeAnswer) -> list[slots.Slot]:
    """The `--jobs` slots of this machine (ConfigError where it cannot cut them)."""
    return slots.plan(request.jobs, device, slots.usable_cores(), slot_gpus(probe, device, os.environ),
                      quota=cgroup_limits.cpu_quota(), gpu_order=slot_gpu_order(os.environ))


def check_thread_counts(request: RunRequest, device: str, env: list[str], cut: list[slots.Slot]) -> None:
    """ConfigError where the scenario's `env:` asks for more threads than a cell's cores run: the
    smallest of the `--jobs` slots `cut` (a hybrid CPU's differ), or the cores a Ray task claims."""
    if cut and cut[0].cpus:
        slots.check_thread_counts(min(slot.threads or len(slot.cpus) for slot in cut), env, f"--jobs {request.jobs}",
                                  os.environ)
    elif request.executor == "ray":  # a CPU cell's claimed cores, a GPU cell's one
        slots.check_thread_counts(ray_cores(device, request), env, "--executor ray (a GPU cell claims one core)"
                                  if device == "cuda" else f"--cpus-per-cell {request.cpus_per_cell}", os.environ)


def ray_cores(device: str, request: RunRequest) -> int:
    """The cores a Ray task claims for a cell: `--cpus-per-cell`, one beside a GPU."""
    from harness.run.ray_executor import cell_needs

    return cell_needs(device, request.cpus_per_cell)[0]


def shares_given(executor: Executor | None, request: RunRequest, device: str, with_quota: bool) -> set[str]:
    """The shares of the machine the cells of this start get, as a cell's record says one
    (`machine_share`): each `--jobs` slot's cores (equal in physical cores, not always in logical
    CPUs), Ray's claimed cores, or the whole machine, or the CPUs this process is bound to where
    they are fewer, under its cgroup's CPU quota where that is less and `with_quota` (its cells'
    workers inherit both). `executor` is None only for Ray's, which is the option's alone."""
    if request.executor == "ray" and not isinstance(executor, LocalPool):
        return {share(ray_cores(device, request))}
    return slots.shares_offered(executor.slots if isinstance(executor, LocalPool) else [], with_quota)


def slot_gpus(probe: ProbeAnswer, device: str, environ: Mapping[str, str]) -> list[str]:
    """The GPUs `--jobs` hands out, one to a slot, as CUDA_VISIBLE_DEVICES takes them: the ones this
    process was given where CUDA_VISIBLE_DEVICES restricts it (a slot's value replaces it), else
    those the system description lists, else as many as torch counted (a resume has no system
    description: it counted them as one)."""
    given = _given_gpus(environ)
    if given:
        return given
    gpus = probe.gpu_indices() or [str(index) for index in range(probe.cuda_devices)]
    if device == "cuda" and not gpus:
        return ["0"]  # nothing asked of the machine: a resume with nothing left to run
    return gpus


def slot_gpu_order(environ: Mapping[str, str]) -> str | None:
    """The CUDA_DEVICE_ORDER the indices of `slot_gpus` are in: PCI_BUS_ID where they are NVML's
    (the system description's, which NVML numbers by PCI address; CUDA numbers the fastest first by
    default, so on a machine of mixed GPUs a slot ran on another GPU than the one recorded), None
    where they are the ones this process was given (read in its own CUDA_DEVICE_ORDER)."""
    return None if _given_gpus(environ) else "PCI_BUS_ID"


def _given_gpus(environ: Mapping[str, str]) -> list[str]:
    return [part.strip() for part in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
