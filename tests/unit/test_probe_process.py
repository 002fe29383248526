"""The probe's process (`python -m harness.run.probe`) answers without building the bundle's record
models, which only the parent reads its answer into (harness/run/probe_answer.py): about 0.4 CPU-s
of every run's start on the 2-core VM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.run.probe import ProbeRequest
from harness.run.probe_answer import ProbeAnswer

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_probe_answers_without_importing_the_bundles_record_models() -> None:
    request = ProbeRequest(device="cpu", backends=["null"], with_system=False, noise_s=None).model_dump_json()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness.run.probe", request],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = ProbeAnswer.model_validate(json.loads(done.stdout.strip().splitlines()[-1]))
    assert answer.device == "cpu" and answer.available("null")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported  # the record of what was imported is read right
    records = {f"harness.bundle.{name}" for name in (
        "header_record", "cell_record", "timing_record", "loadgen_record", "passes_record", "record_base")}
    assert not records & imported


def test_a_probe_that_dies_or_hangs_is_the_environments_fault_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was exit 1, which says a cell failed or was invalid."""
    from harness.errors import ConfigError
    from harness.run import probe

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 139, "", ""))
    with pytest.raises(ConfigError, match=r"the system probe failed \(exit 139\): no output") as info:
        probe.run_probe("cpu", ["null"], with_system=False)
    assert info.value.exit_code == 2


#: A probe whose one backend writes to standard output from Python and from C (as a library's
#: banner does), then ends the process with sys.exit(0): its answer was cut into by the writes
#: (a pydantic traceback) or never written (IndexError), and `backends`, `run` and `run --dry-run`
#: ended in a traceback.
_NOISY_PROBE = """
import os, sys
from harness import registry
from harness.contract import Availability, Backend
from harness.run import probe

class Noisy(Backend):
    name = "noisy"
    def availability(self, device):
        sys.stdout.write("noisy: loading...")
        sys.stdout.flush()
        os.write(1, b"libnoisy banner")
        return Availability.yes()
    def versions(self):
        sys.exit(0)
    def prepare(self, *args, **kwargs):
        raise AssertionError

registry.load = lambda name: Noisy
sys.argv = ["probe", sys.argv[1]]
probe.main()
"""


@pytest.mark.slow
def test_a_backend_that_prints_or_calls_sys_exit_leaves_the_probes_answer_whole() -> None:
    request = ProbeRequest(device="cpu", backends=["noisy"], with_system=False, noise_s=None).model_dump_json()
    done = subprocess.run([sys.executable, "-c", _NOISY_PROBE, request], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = ProbeAnswer.model_validate_json(done.stdout)
    report = answer.backends["noisy"]
    assert not report.available
    assert report.reason is not None and report.reason.startswith("backend 'noisy' Noisy.versions() raised SystemExit: 0")
    assert "noisy: loading...libnoisy banner" in done.stderr


def test_a_probe_that_ends_without_an_answer_is_exit_2_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's os._exit(0) ends the probe with exit 0 and nothing on its standard output."""
    from harness.errors import ConfigError
    from harness.run import probe

    for stdout in ("", "libnoisy banner{\"device\""):
        monkeypatch.setattr(subprocess, "run", lambda *a, _out=stdout, **k: subprocess.CompletedProcess(a, 0, _out, ""))
        with pytest.raises(ConfigError, match=r"^the system probe gave no answer \(exit 0\): ") as info:
            probe.run_probe("cpu", ["null"], with_system=False)
        assert info.value.exit_code == 2


def test_a_probe_that_hangs_or_dies_in_a_backend_names_the_backend_and_method(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's availability() that never returned held `backends` and `run` for 300 s, then said
    only that the probe did not answer, naming no backend."""
    from harness.errors import ConfigError
    from harness.run import probe

    asked = (f"{probe.ASKING}backend 'eager' EagerBackend.versions()\n"
             f"{probe.ASKING}backend 'slow' Slow.availability()\n")

    def hangs(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(args[0], probe.PROBE_TIMEOUT_S, output=b"", stderr=asked.encode())

    monkeypatch.setattr(subprocess, "run", hangs)
    with pytest.raises(ConfigError, match=r"^the system probe did not answer within 300 s while asking backend 'slow' "
                                          r"Slow\.availability\(\), which had not returned") as info:
        probe.run_probe("cpu", ["eager", "slow"], with_system=False)
    assert info.value.exit_code == 2
    died = subprocess.CompletedProcess([], -11, "", asked + "Fatal Python error: Segmentation fault\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: died)
    with pytest.raises(ConfigError, match=r"^the system probe failed \(exit -11\) while asking backend 'slow' "
                                          r"Slow\.availability\(\): Fatal Python error: Segmentation fault$"):
        probe.run_probe("cpu", ["eager", "slow"], with_system=False)
    # past the backends (the system's description), nothing is said of them
    answered = f"{probe.ASKING}{probe.ANSWERED}\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess([], 1, "", asked + answered))
    with pytest.raises(ConfigError, match=r"^the system probe failed \(exit 1\): no output$"):
        probe.run_probe("cpu", ["eager", "slow"], with_system=False)


def test_a_backend_write_without_a_newline_leaves_the_hung_method_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's availability() that wrote `loading...` with no newline (its standard output is the
    probe's standard error) put the next asking line behind it, and a versions() that then hung was
    said as availability(), the method before it."""
    from harness.errors import ConfigError
    from harness.run import probe

    asked = (f"{probe.ASKING}backend 'hang' Hang.availability()\n"
             f"hangplug: loading...{probe.ASKING}backend 'hang' Hang.versions()\n")

    def hangs(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(args[0], probe.PROBE_TIMEOUT_S, output=b"", stderr=asked.encode())

    monkeypatch.setattr(subprocess, "run", hangs)
    with pytest.raises(ConfigError, match=r"while asking backend 'hang' Hang\.versions\(\), which had not returned"):
        probe.run_probe("cpu", ["hang"], with_system=False)
    died = subprocess.CompletedProcess([], -11, "", asked)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: died)
    with pytest.raises(ConfigError, match=r"^the system probe failed \(exit -11\) while asking backend 'hang' "
                                          r"Hang\.versions\(\): hangplug: loading\.\.\.$"):
        probe.run_probe("cpu", ["hang"], with_system=False)
