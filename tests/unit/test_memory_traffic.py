"""The memory-traffic pass on CPU: Nsight Compute's counter log read into DRAM bytes per inference,
the pass run through a stand-in `ncu`, the record's own rules, and validate's check against the
roofline. The GPU run itself is tests/gpu's.

LOG is written in the layout Nsight Compute's raw page takes with the flags the pass gives it
(`--csv --page raw --print-units base`, two metrics): its own `==PROF==` lines among the rows, a
header, a row of units, one row per launch, values grouped by commas.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.bundle import ncu_log, traffic_check
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.ncu_log import CounterLogError, Launch
from harness.bundle.passes_record import MemoryTraffic
from harness.bundle.record_base import read_as
from harness.bundle.validate import validate
from harness.measure import memory_traffic
from harness.measure.protocol import WorkerRequest
from tests.cell_configs import cell_config

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum"')
UNITS = '"","","","","","","","","","","","byte","byte"'
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}"


def _row(number: int, kernel: str, read: str, write: str) -> str:
    return (f'"{number}","4242","python3.12","127.0.0.1","{kernel}","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0",'
            f'"{read}","{write}"')


LOG = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    '==PROF== Profiling "triton_poi_fused_relu_0": 0%....50%....100% - 1 pass',
    HEADER, UNITS,
    _row(0, "implicit_convolve_sgemm", "9,437,184", "3,211,264"),
    _row(1, "triton_poi_fused_relu_0", "3,211,264", "3,211,264"),
    _row(2, "implicit_convolve_sgemm", "9,437,184", "3,211,264"),
    _row(3, "triton_poi_fused_relu_0", "3,211,264", "3,211,264"),
    "==PROF== Disconnected from process 4242",
])


def test_the_log_gives_each_launch_and_its_bytes() -> None:
    found = ncu_log.launches(LOG)
    assert found[0] == Launch("implicit_convolve_sgemm", 9_437_184, 3_211_264)
    assert [launch.kernel for launch in found] == ["implicit_convolve_sgemm", "triton_poi_fused_relu_0"] * 2


def test_the_programs_own_output_between_the_rows_is_not_read() -> None:
    lines = LOG.split("\n")
    mixed = "\n".join([*lines[:3], "tvm: compiling 12 functions", *lines[3:5], "", "step 1 of 2", *lines[5:]])
    assert ncu_log.launches(mixed) == ncu_log.launches(LOG)


def test_prefixed_units_are_scaled_to_bytes() -> None:
    log = "\n".join([HEADER, UNITS.replace('"byte","byte"', '"Mbyte","Kbyte"'), _row(0, "k", "1.5", "2,048")])
    assert ncu_log.launches(log) == [Launch("k", 1_500_000, 2_048_000)]


@pytest.mark.parametrize(("log", "says"), [
    ("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
     "NVIDIA GPU Performance Counters on the target device 0.\n",
     "ncu: ERR_NVGPUCTRPERM - The user does not have permission"),
    ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n", "ncu: Failed to initialize the profiler"),
    ("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n", "profiled no kernel (No kernels"),
    (f"{HEADER}\n{UNITS}\n", "a header and no launch"),
    (f"{HEADER}\n{_row(0, 'k', '1', '2')}\n", "no row of units"),
    (f"{HEADER}\n\"quoted\",\"output\"\n{_row(0, 'k', '1', '2')}\n", "no row of units"),
    (HEADER.replace(',"dram__bytes_write.sum"', "") + "\n", "lacks dram__bytes_write.sum"),
    ("compiling...\n\"quoted\" output of the program\n", "ncu profiled no kernel"),
    (f"{HEADER}\n{UNITS.replace('byte', 'cycle', 1)}\n{_row(0, 'k', '1', '2')}\n", "not a unit of bytes"),
    (f"{HEADER}\n{UNITS}\n{_row(0, 'k', 'n/a', '2')}\n", "'n/a' where a byte count belongs"),
    (f"{HEADER}\n{UNITS}\n{_row(0, 'k', '1', '2')[:-4]}\n", "has 12 fields, its header 13"),
    (f"{HEADER}\n{UNITS}\n{_row(0, 'k' * 200_000, '1', '2')}\n", "not CSV as ncu writes it"),  # a hostile bundle's
])
def test_a_log_without_counters_says_why(log: str, says: str) -> None:
    with pytest.raises(CounterLogError) as raised:
        ncu_log.launches(log)
    assert says in str(raised.value)


def test_the_tool_version_is_read_from_its_last_line() -> None:
    printed = ("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
               "Version 2025.3.1.0 (build 36398880) (public-release)\n")
    assert ncu_log.tool_version(printed) == "2025.3.1.0"
    with pytest.raises(CounterLogError, match="no version"):
        ncu_log.tool_version("command not found")


def test_the_summary_is_per_inference_and_lists_the_kernels_that_move_most() -> None:
    record = MemoryTraffic.model_validate(
        memory_traffic.summary(ncu_log.launches(LOG), 2, "Nsight Compute 2025.3.1.0"))
    assert record.dram_read_bytes_per_inference == 9_437_184 + 3_211_264
    assert record.dram_write_bytes_per_inference == 2 * 3_211_264
    assert record.dram_bytes_per_inference == 9_437_184 + 3 * 3_211_264
    assert record.kernels_per_inference == 2 and record.profiled_iters == 2 and record.caches_flushed
    assert [(k.name, k.calls_per_inference) for k in record.top_kernels] == [
        ("implicit_convolve_sgemm", 1), ("triton_poi_fused_relu_0", 1)]
    assert record.absent is None and traffic_check.problems({"memory_traffic": record.recorded()}) == []


def test_the_record_is_measured_or_says_why_not() -> None:
    with pytest.raises(ValidationError, match="absent reason needs"):
        MemoryTraffic(method="m", dram_read_bytes_per_inference=1.0)
    with pytest.raises(ValidationError, match="not the read and write bytes together"):
        MemoryTraffic(method="m", dram_read_bytes_per_inference=1.0, dram_write_bytes_per_inference=2.0,
                      dram_bytes_per_inference=30.0)
    with pytest.raises(ValidationError, match="carries its reason and no figure"):
        MemoryTraffic(method="m", absent="no ncu", dram_read_bytes_per_inference=0.0,
                      dram_write_bytes_per_inference=0.0, dram_bytes_per_inference=0.0)
    with pytest.raises(ValidationError, match="carries its reason and no figure"):
        MemoryTraffic(method="m", absent=" ")


def _request(tmp_path: Path, device: str = "cuda", **passes: Any) -> WorkerRequest:
    cell = cell_config(passes=passes or None)
    return WorkerRequest(cell=cell.model_copy(update={"device": device}), artifact_dir=str(tmp_path / "artifacts"))


def test_a_cpu_cell_or_a_pass_turned_off_reads_no_counters(tmp_path: Path) -> None:
    on_cpu = MemoryTraffic.model_validate(memory_traffic.measure(_request(tmp_path, "cpu"), tmp_path))
    assert on_cpu.absent and "CUDA devices only" in on_cpu.absent and on_cpu.dram_bytes_per_inference is None
    off = memory_traffic.measure(_request(tmp_path, traffic_iters=0), tmp_path)
    assert off["absent"] == "turned off by the scenario (passes.traffic_iters: 0)"


def test_no_ncu_on_the_machine_is_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FUSIONBENCH_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(memory_traffic, "NCU_PLACES", (str(tmp_path / "nowhere" / "ncu"),))
    record = memory_traffic.measure(_request(tmp_path), tmp_path)
    assert "Nsight Compute (ncu) is not on this machine" in record["absent"]


def _fake_ncu(tmp_path: Path, behaviour: str) -> Path:
    """An `ncu` that prints its version, or checks the child's request and writes `LOG` (or an error)
    to its --log-file, as the real one does after profiling the child."""
    log_text = {"counts": LOG, "refused": "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                "NVIDIA GPU Performance Counters on the target device 0.\n"}.get(behaviour, "")
    script, body = tmp_path / "ncu", tmp_path / "ncu.py"
    # a shell script that runs the body: a `#!` line holding the interpreter's path is split at a
    # space in it (a checkout under "/my bench/")
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(body))} "$@"\n')
    body.write_text(f"""import json, sys, time
from pathlib import Path
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
log = Path(args[args.index("--log-file") + 1])
child = args[args.index("--log-file") + 2:]
assert child[1:3] == ["-m", "harness.measure.memory_traffic"], child
assert json.loads(Path(child[3]).read_text())["cell"]["device"] == "cuda" and child[4] == "2"
for flag in ("--profile-from-start", "--cache-control", "--clock-control", "--print-units"):
    assert flag in args, flag
if {behaviour!r} == "hangs":
    import os, subprocess
    profiled = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (log.parent / "profiled.pid").write_text(f"{{profiled.pid}} {{os.getpgid(0)}}")
    time.sleep(30)
if {behaviour!r} == "child fails":
    print("Traceback (most recent call last):\\nRuntimeError: CUDA error: out of memory", file=sys.stderr)
    sys.exit(1)
log.write_text({log_text!r})
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize(("behaviour", "absent"), [
    ("counts", None),
    ("refused", "ncu: ERR_NVGPUCTRPERM"),
    ("child fails", "RuntimeError: CUDA error: out of memory"),
])
def test_the_pass_runs_the_child_under_ncu_and_reads_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             behaviour: str, absent: str | None) -> None:
    monkeypatch.setenv("FUSIONBENCH_NCU", str(_fake_ncu(tmp_path, behaviour)))
    record = MemoryTraffic.model_validate(memory_traffic.measure(_request(tmp_path), tmp_path / "work"))
    kept = tmp_path / "artifacts" / ncu_log.KEPT_AS
    if absent is None:
        assert record.absent is None and record.tool == "Nsight Compute 2025.3.1.0"
        assert record.dram_bytes_per_inference == 9_437_184 + 3 * 3_211_264
        assert kept.read_text() == LOG  # the log the figures came from, in the cell's folder for validate
    else:
        assert record.absent is not None and absent in record.absent and record.dram_bytes_per_inference is None
        assert not kept.exists()


def test_the_child_ends_before_the_cells_time_limit_or_does_not_start(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A child still running at the cell's limit would take the whole cell, and what it measured, with it."""
    monkeypatch.setenv("FUSIONBENCH_NCU", str(_fake_ncu(tmp_path, "counts")))
    short = memory_traffic.measure(_request(tmp_path), tmp_path / "work", seconds_left=40.0)
    assert short["absent"].startswith("the cell's time limit leaves 40 s, too little for the profiled child")
    seen: list[float] = []
    monkeypatch.setattr(memory_traffic, "read_counters", lambda *args, **_: seen.append(args[-1]) or {})
    memory_traffic.measure(_request(tmp_path), tmp_path / "work", seconds_left=300.0)
    memory_traffic.measure(_request(tmp_path), tmp_path / "work")
    assert seen == [300.0 - memory_traffic.LIMIT_MARGIN_S, memory_traffic.CHILD_TIMEOUT_S]


def test_a_child_that_does_not_finish_is_the_reason(tmp_path: Path) -> None:
    script = _fake_ncu(tmp_path, "hangs")
    request = tmp_path / "request.json"
    request.write_text(_request(tmp_path).to_json())
    argv = [str(script), *memory_traffic.NCU_FLAGS, "--log-file", str(tmp_path / "ncu.csv"),
            sys.executable, "-m", "harness.measure.memory_traffic", str(request), "2"]
    record = memory_traffic.read_counters(argv, tmp_path, tmp_path / "ncu.csv", 2, "ncu", timeout_s=2)
    assert record["absent"] == "the profiled child did not finish within 2 s"
    profiled, group = (int(n) for n in (tmp_path / "profiled.pid").read_text().split())
    status = Path(f"/proc/{profiled}/status")
    # the program ncu profiles has gone with it by the time the pass goes on (gone, or dead unreaped)
    assert not status.exists() or "\nState:\tZ" in status.read_text()
    assert group == os.getpgid(0)  # in the worker's group, which the parent kills at the cell's time limit


class _EndsLate:
    """A process of the profiled tree that ends a few reads after its SIGKILL, as the kernel delivers a
    kill after `kill` returns (and a program's pipes close before its GPU context is freed)."""

    def __init__(self, *children: _EndsLate) -> None:
        self.below, self.killed, self.reads_left = list(children), False, 5

    def children(self, recursive: bool = False) -> list[_EndsLate]:
        return [deeper for child in self.below for deeper in [child, *child.children(True)]]

    def kill(self) -> None:
        self.killed = True

    def is_running(self) -> bool:
        if self.killed:
            self.reads_left -= 1
        return not self.killed or self.reads_left > 0

    def status(self) -> str:
        return "sleeping"


def test_a_killed_child_has_ended_when_the_pass_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    profiled = _EndsLate()
    ncu = _EndsLate(_EndsLate(profiled))
    monkeypatch.setattr(psutil, "Process", lambda pid: ncu)
    memory_traffic._kill_tree(4_000_000)
    tree = [ncu, *ncu.children(True)]
    assert all(p.killed for p in tree) and profiled in tree
    assert not any(p.is_running() for p in tree), "the next cell would find the GPU still held by the profiled program"


def _checked(read: float, write: float, *, flushed: bool = True, weights: int = 10_000_000,
             batch: int = 600_000) -> list[str]:
    traffic = {"method": "m", "dram_read_bytes_per_inference": read, "dram_write_bytes_per_inference": write,
               "dram_bytes_per_inference": read + write, "caches_flushed": flushed}
    return traffic_check.problems({"memory_traffic": traffic,
                                   "roofline": {"weight_bytes": weights, "input_bytes": batch}})


def test_validate_holds_the_reads_to_the_weights_and_input() -> None:
    assert _checked(11_000_000, 4_000_000) == []
    assert _checked(9_600_000, 0) == []  # a folded batch norm reads a little less than eager's weights
    low = _checked(5_000_000, 40_000_000)
    assert len(low) == 1 and "below the weights and input the model must read, 1.06e+07 bytes" in low[0]
    assert _checked(5_000_000, 0, flushed=False) == []  # warm caches may hold the weights across inferences


def test_validate_bounds_the_listed_kernels_and_the_record_its_total(tmp_path: Path) -> None:
    traffic = {"method": "m", "dram_read_bytes_per_inference": 2e7, "dram_write_bytes_per_inference": 1e7,
               "dram_bytes_per_inference": 3e7,
               "top_kernels": [{"name": "k", "calls_per_inference": 1, "dram_read_bytes_per_inference": 3e7,
                                "dram_write_bytes_per_inference": 1e7}]}
    found = traffic_check.problems({"memory_traffic": traffic})
    assert found == ["memory_traffic: its top kernels move 4e+07 bytes per inference, more than its total 3e+07"]
    assert traffic_check.problems({"memory_traffic": {"method": "m", "absent": "no ncu"}}) == []
    for hostile in (5, "kernels", {"k": 1}, [None, 3]):  # the schema's finding, never a crash here
        assert traffic_check.problems({"memory_traffic": {**traffic, "top_kernels": hostile}}) == []
    # A total that is not the reads and writes, or a measured record without its figures, is the typed
    # record's finding, which validate reports once (bundle/passes_record.py MemoryTraffic).
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN, root)
    measured = next(p for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["status"] == "valid")
    record = json.loads(measured.read_text())
    record["metrics"]["memory_traffic"] = {**traffic, "top_kernels": [], "dram_bytes_per_inference": 3.5e7}
    measured.write_text(json.dumps(record))
    lines = [line for line in validate(root, integrity=False).problems if "memory_traffic" in line]
    assert lines == [f"cells/{measured.stem}.json: metrics/memory_traffic: Value error, dram_bytes_per_inference is "
                     "not the read and write bytes together"]
    assert read_as(MemoryTraffic, {"method": "m", "dram_read_bytes_per_inference": "x"}) is None


def test_validate_reads_the_figures_again_from_the_counter_log_the_cell_keeps(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN, root)
    measured = next(p for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["status"] == "valid")
    record = json.loads(measured.read_text())
    record["metrics"]["memory_traffic"] = memory_traffic.summary(ncu_log.launches(LOG), 2, "Nsight Compute 2025.3.1.0")
    log = root / "cells" / measured.stem / ncu_log.KEPT_AS
    log.parent.mkdir(parents=True)

    def problems(traffic: dict[str, Any], log_text: str = LOG) -> list[str]:
        measured.write_text(json.dumps({**record, "metrics": {**record["metrics"], "memory_traffic": traffic}}))
        log.write_text(log_text)
        return [line for line in validate(root, integrity=False).problems if "ncu.csv" in line]

    honest = record["metrics"]["memory_traffic"]
    assert problems(honest) == []
    where = f"cells/{measured.stem}/{ncu_log.KEPT_AS}"
    # a forger who edits the figures, consistently with each other, disagrees with the log
    forged = {**honest, "dram_read_bytes_per_inference": 1e9, "dram_bytes_per_inference": 1e9 + 6_422_528}
    assert problems(forged) == [
        f"memory_traffic: dram_read_bytes_per_inference is 1000000000.0, its counter log {where} gives 1.26484e+07",
        f"memory_traffic: dram_bytes_per_inference is 1006422528.0, its counter log {where} gives 1.9071e+07"]
    renamed = [{**honest["top_kernels"][0], "name": "fused_everything"}, *honest["top_kernels"][1:]]
    assert problems({**honest, "top_kernels": renamed}) == [
        f"memory_traffic: its top kernels are not the ones its counter log {where} gives"]
    assert problems(honest, LOG.replace("dram__bytes_read.sum", "l2__bytes.sum")) == [
        f"{where}: the counter log's header lacks dram__bytes_read.sum: "
        + HEADER.replace('"', "").replace("dram__bytes_read.sum", "l2__bytes.sum")]
    log.unlink()  # a cell measured before the log was kept: its figures are the record's alone
    measured.write_text(json.dumps(record))
    assert [line for line in validate(root, integrity=False).problems if "counter log" in line] == []


def test_ncu_is_found_where_nsight_compute_installs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FUSIONBENCH_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("2024.1.0", "2025.3.1"):
        tool = tmp_path / "nsight-compute" / version / "ncu"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    monkeypatch.setattr(memory_traffic, "NCU_PLACES", (str(tmp_path / "nsight-compute" / "*" / "ncu"),))
    assert memory_traffic.find_ncu() == str(tmp_path / "nsight-compute" / "2025.3.1" / "ncu")
    assert os.access(memory_traffic.find_ncu() or "", os.X_OK)
