"""The probe's process (`python -m harness.run.probe`) answers without building the bundle's record
models, which only the parent reads its answer into (harness/run/probe_answer.py): about 0.4 CPU-s
of every run's start on the 2-core VM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
