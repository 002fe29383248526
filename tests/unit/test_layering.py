"""The parent process stays light: the harness's modules never import torch (or a backend's
library) at module level, and loading a backend class for its name imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

PARENT_MODULES = ["harness.cli", "harness.runner", "harness.config", "harness.scenario_file", "harness.bundle",
                  "harness.cells", "harness.isolation", "harness.summary", "harness.system", "harness.probe",
                  "harness.worker", "harness.loadgen", "harness.passes", "harness.memory", "harness.zoo",
                  "harness.artifact_cache", "harness.options", "harness.fusion", "harness.bundle_load",
                  "harness.validate", "harness.compare", "harness.report", "harness.pack", "harness.manifest",
                  "harness.bundle_schema", "harness.bundle_commands", "harness.container",
                  "harness.extra_models", "harness.op_mapping", "harness.roofline"]


def test_no_heavy_imports_at_module_level() -> None:
    code = (
        "import sys\n"
        f"for m in {PARENT_MODULES!r}: __import__(m)\n"
        "from harness import registry\n"
        "for name in registry.names(): registry.load(name)\n"
        "heavy = sorted(m for m in ('torch', 'torchvision', 'onnxruntime', 'tvm', 'tensorrt', 'mlperf_loadgen', 'numpy') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported at module level: {done.stdout.strip()}"
