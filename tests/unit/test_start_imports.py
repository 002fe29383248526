"""What a worker imports before its memory baseline: here, a backend's `preload` that fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.measure import start_imports

# A plugin module that registers a kernel, then fails, as a library whose shared object is missing
# does: run a second time, its registration is refused, an error that says nothing of the first.
_FAILING = """
import sys
sys.preload_runs = getattr(sys, "preload_runs", 0) + 1
kernels = sys.modules.setdefault("fb_kernel_registry", type(sys)("fb_kernel_registry"))
if hasattr(kernels, "fused_conv"):
    raise RuntimeError("kernel 'fused_conv' is already registered")
kernels.fused_conv = True
raise ImportError("libcudnn.so.9: cannot open shared object file")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a preloaded parent forks its workers")
def test_a_preload_that_failed_in_the_parent_is_not_imported_again_in_a_forked_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Python keeps no failed import: each forked worker imported the module again, at its cost, and
    its log said the second run's error (`already registered`), the first being in the parent's log
    only, which is deleted with it."""
    (tmp_path / "fb_failing_kernels.py").write_text(_FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(start_imports, "_FAILED", {}, raising=False)  # none from earlier tests
    monkeypatch.delitem(sys.modules, "fb_kernel_registry", raising=False)
    monkeypatch.setattr(sys, "preload_runs", 0, raising=False)
    start_imports.import_preload("plugin", ("fb_failing_kernels",))  # the preloaded parent
    first = "backend 'plugin' not fully preloaded: fb_failing_kernels: ImportError: libcudnn.so.9: cannot open shared object file"
    assert capfd.readouterr().err.strip() == first
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the cell's worker, as the parent forks it
        try:
            start_imports.import_preload("plugin", ("fb_failing_kernels",))
            os.write(write, str(sys.preload_runs).encode())  # type: ignore[attr-defined]
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    runs = os.read(read, 16).decode()
    os.close(read)
    said = capfd.readouterr().err
    assert runs == "1", f"the module's code ran {runs} times"
    assert said.startswith(first + " (its first import's error") and "already registered" not in said, said
    sys.modules.pop("fb_kernel_registry", None)
