"""What a worker imports before its memory baseline: here, a backend's `preload` that fails."""

from __future__ import annotations

import importlib
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
    only, which is deleted with it; and the backend's own import in the worker, whose error becomes
    the cell's reason, ran it once more and failed with that second error too."""
    (tmp_path / "fb_failing_kernels.py").write_text(_FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(start_imports, "_FAILED", {}, raising=False)  # none from earlier tests
    monkeypatch.delitem(sys.modules, "fb_kernel_registry", raising=False)
    monkeypatch.setattr(sys, "preload_runs", 0, raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # the refusal of the failed module, undone after
    start_imports.import_preload("plugin", ("fb_failing_kernels",))  # the preloaded parent
    first = "backend 'plugin' not fully preloaded: fb_failing_kernels: ImportError: libcudnn.so.9: cannot open shared object file"
    assert capfd.readouterr().err.strip() == first
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the cell's worker, as the parent forks it
        try:
            start_imports.import_preload("plugin", ("fb_failing_kernels",))
            try:  # the backend's own import, whose error is the cell's reason
                importlib.import_module("fb_failing_kernels")
                backends = "imported"
            except Exception as exc:  # noqa: BLE001 - whatever it raised is the cell's reason
                backends = f"{type(exc).__name__}: {exc}"
            os.write(write, f"{sys.preload_runs}\n{backends}".encode())  # type: ignore[attr-defined]
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    runs, backends = os.read(read, 4096).decode().split("\n", 1)
    os.close(read)
    said = capfd.readouterr().err
    assert runs == "1", f"the module's code ran {runs} times"
    assert "libcudnn.so.9: cannot open shared object file" in backends and "already registered" not in backends, backends
    assert said.startswith(first + " (its first import's error") and "already registered" not in said, said
    sys.modules.pop("fb_kernel_registry", None)
