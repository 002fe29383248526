"""The CPU image, built and run for real through `fusionbench container`, where a Docker engine
answers; skipped with the reason elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docker_engine import engine_reason

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(engine_reason() is not None, reason=engine_reason() or "")
def test_the_cpu_image_builds_and_runs_a_scenario(tmp_path: Path) -> None:
    scenario = REPO / "scenarios" / "smoke.yaml"
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "container", "cpu", str(scenario), "--device", "cpu",
                           "--only", "backend=eager,scenario=Offline", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=7200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    container = json.loads((bundle / "bundle.json").read_text())["system"]["container"]
    assert container["in_container"] and container["image"].startswith("fusionbench-cpu:")
    assert container["image_id"].startswith("sha256:") and container["base"]
    assert container["layers"] and all(layer.startswith("sha256:") for layer in container["layers"])
    check = subprocess.run([sys.executable, "-m", "harness.cli", "validate", str(bundle)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
