"""DRAM bytes per inference from the GPU's hardware counters: a pass of its own in a cell's worker.

Fusion's point is memory traffic: an unfused chain writes each intermediate tensor to DRAM and reads
it back. The roofline's compulsory bytes (harness/measure/roofline.py) are what no implementation
can avoid; this pass measures what one moved.

Nsight Compute (`ncu`) reads the counters, and it must start the process it profiles. So the worker,
after its own passes and with its prepared model closed, starts this module as a child under `ncu`
with the cell's request. The child builds and prepares the model again (its compiled artefacts from
the cache the worker's prepare filled), calls it `WARMUP_CALLS` times unprofiled, then makes
`passes.traffic_iters` synchronised calls between cudaProfilerStart and cudaProfilerStop. `ncu`
profiles only the kernels launched between them (`--profile-from-start off`), replays each with
the caches flushed before it (`--cache-control all`: each kernel reads its inputs from DRAM, so
what it keeps on chip is what fusion keeps there) and leaves the clocks alone (`--clock-control
none`; bytes do not depend on them). The log's per-launch DRAM read and write bytes
(harness/bundle/ncu_log.py), summed and divided by the calls, are the cell's figures; the log is
kept in the cell's folder (`ncu_log.KEPT_AS`), and validate reads the figures from it again
(harness/bundle/traffic_check.py).

Where no counters are read (a CPU cell, the pass turned off, no `ncu` on the machine, a driver or
sandbox that refuses counter access, a child that fails), the record says why and holds no figure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.bundle import ncu_log
from harness.bundle.ncu_log import CounterLogError, Launch
from harness.killed_wait import wait_until_ended
from harness.measure.protocol import WorkerRequest

WARMUP_CALLS = 2
# The child builds, prepares (from the cache) and runs the model under ncu's kernel replay.
CHILD_TIMEOUT_S = 900.0
# The child ends this long before the cell's time limit, and does not start with less than MIN_CHILD_S.
LIMIT_MARGIN_S = 20.0
MIN_CHILD_S = 30.0
VERSION_TIMEOUT_S = 60.0
# Where ncu lies when it is not on the PATH: CUDA's and Nsight Compute's own install folders.
NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
NCU_FLAGS = ("--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(ncu_log.METRICS),
             "--profile-from-start", "off", "--target-processes", "application-only", "--cache-control", "all",
             "--clock-control", "none")
METHOD = ("Nsight Compute's dram__bytes_read.sum and dram__bytes_write.sum per kernel launch, each kernel replayed "
          "with the caches flushed before it (--cache-control all), summed over the profiled inferences and divided "
          "by them")


def absent(reason: str) -> dict[str, Any]:
    """The record of a cell whose counters were not read, with the reason."""
    return {"method": METHOD, "absent": reason}


def find_ncu() -> str | None:
    """`ncu`: FUSIONBENCH_NCU if set, else on the PATH, else in CUDA's or Nsight Compute's folder."""
    named = os.environ.get("FUSIONBENCH_NCU")
    if named:
        return named
    found = shutil.which("ncu")
    if found:
        return found
    for place in NCU_PLACES:
        for candidate in sorted(glob.glob(place), reverse=True):  # the newest Nsight Compute first
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def measure(request: WorkerRequest, workdir: Path, seconds_left: float | None = None) -> dict[str, Any]:
    """The cell's `metrics.memory_traffic` record: the bytes read from the counters, or why not.
    `seconds_left`: what the cell's time limit leaves; the child must end before it, so that the
    cell keeps everything else it measured."""
    cell = request.cell
    if cell.device != "cuda":
        return absent("DRAM counters are read on CUDA devices only; this cell ran on the CPU")
    iters = cell.passes.traffic_iters
    if iters == 0:
        return absent("turned off by the scenario (passes.traffic_iters: 0)")
    timeout_s = CHILD_TIMEOUT_S if seconds_left is None else min(CHILD_TIMEOUT_S, seconds_left - LIMIT_MARGIN_S)
    if timeout_s < MIN_CHILD_S:
        return absent(f"the cell's time limit leaves {max(seconds_left or 0.0, 0.0):.0f} s, too little for the profiled "
                      f"child, which prepares the model again (raise limits.cell_timeout_s)")
    ncu = find_ncu()
    if ncu is None:
        return absent("Nsight Compute (ncu) is not on this machine: not on the PATH, not in "
                      f"{' or '.join(NCU_PLACES)}, FUSIONBENCH_NCU not set")
    try:
        version = ncu_log.tool_version(_run([ncu, "--version"], None, VERSION_TIMEOUT_S).stdout)
    except (OSError, subprocess.SubprocessError, CounterLogError) as exc:
        return absent(f"{ncu} --version failed: {exc}")
    folder = workdir / "memory-traffic"
    folder.mkdir(parents=True, exist_ok=True)
    child_request = dataclasses.replace(request, cache_dir=request.cache_dir or str(workdir / "cache"))
    (folder / "request.json").write_text(child_request.to_json())
    log = folder / "ncu.csv"
    argv = [ncu, *NCU_FLAGS, "--log-file", str(log),
            sys.executable, "-m", "harness.measure.memory_traffic", str(folder / "request.json"), str(iters)]
    return read_counters(argv, folder, log, iters, f"Nsight Compute {version}", timeout_s,
                         keep=Path(request.artifact_dir))


def read_counters(argv: list[str], folder: Path, log: Path, iters: int, tool: str, timeout_s: float,
                  keep: Path | None = None) -> dict[str, Any]:
    """Run `argv` (ncu and the child) in `folder`, then read `log`: the record, or why it is absent.
    With `keep` (the cell's folder), the log it read goes there as `ncu_log.KEPT_AS`."""
    try:
        done = _run(argv, folder, timeout_s)
    except subprocess.TimeoutExpired:
        return absent(f"the profiled child did not finish within {timeout_s:.0f} s")
    except OSError as exc:
        return absent(f"ncu could not start: {exc}")
    said = log.read_text(errors="replace") if log.exists() else ""
    if f'"{ncu_log.KERNEL_NAME}"' not in said:  # ncu printed its table to the terminal instead
        said += "\n" + done.stdout
    try:
        found = ncu_log.launches(said)
    except CounterLogError as exc:
        tail = _last_line(done.stderr)
        return absent(f"{exc}{f'; the child said: {tail}' if tail and done.returncode else ''}")
    if done.returncode != 0:
        return absent(f"the profiled child failed (exit {done.returncode}): {_last_line(done.stderr) or 'no message'}")
    if keep is not None:
        kept = keep / ncu_log.KEPT_AS
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(said)
    return summary(found, iters, tool)


def summary(found: list[Launch], iters: int, tool: str) -> dict[str, Any]:
    """The record of `iters` profiled inferences' launches: per inference, and how they were read."""
    return {**ncu_log.per_inference(found, iters), "tool": tool, "caches_flushed": True, "method": METHOD}


def _run(argv: list[str], cwd: Path | None, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """`argv` in the worker's process group, so the parent's kill of the worker's group
    (harness/run/isolation.py) takes it too; past `timeout_s` it goes with everything it started
    (ncu and the program it profiles, which would otherwise hold the GPU on), then TimeoutExpired."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, errors="replace")
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _kill_tree(pid: int) -> None:
    """SIGKILL process `pid` and every descendant it has, and wait (bounded) until each has ended:
    the profiled program's pipes close before its GPU context and memory are freed, and the worker's
    next steps, then the next cell, would find them still held."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [*root.children(recursive=True), root]
    except psutil.Error:
        return  # gone already
    for process in tree:
        with contextlib.suppress(psutil.Error):
            process.kill()

    def running(process: psutil.Process) -> bool:
        try:  # a zombie has freed all it held; only its parent's wait is left
            return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False

    wait_until_ended(lambda: any(running(process) for process in tree))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def profiled_child(request: WorkerRequest, iters: int) -> None:
    """What ncu profiles: the cell's model prepared again, warmed up, then `iters` inferences
    between cudaProfilerStart and cudaProfilerStop."""
    import torch

    from harness import precision, registry
    from harness.measure import cell_model

    cell = request.cell
    torch.set_grad_enabled(False)
    precision.set_torch_math("fp32")
    backend = registry.load(cell.backend)()
    model, _, example = cell_model.model_and_samples(cell, request)
    precision.set_torch_math(cell.dtype)
    arguments = cell_model.backend_arguments(cell, request, backend, Path.cwd())
    backend.tune(model, example, **arguments)
    prepared = backend.prepare(model, example, **arguments)
    try:
        for _ in range(WARMUP_CALLS):
            prepared(example)
            prepared.synchronize()
        torch.cuda.profiler.start()
        for _ in range(iters):
            prepared(example)
            prepared.synchronize()
        torch.cuda.profiler.stop()
    finally:
        prepared.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    request = WorkerRequest.from_json(Path(argv[0]).read_text())
    profiled_child(request, int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
