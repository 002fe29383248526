"""The memory pass's host figures (harness/measure/memory.py)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.measure import memory


class _Prepared:
    def __call__(self, batch: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None


def test_a_lifetime_peak_the_kernel_kept_below_the_baseline_is_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's high-water marks lag the RSS psutil reads by a few pages: an eager cell's peak
    came out 217 KB below its baseline, and the negative delta failed the cell in its memory pass."""
    baseline = 500 * 2**20
    monkeypatch.setattr(memory, "lifetime_peak_rss_bytes", lambda: baseline - 217088)
    figures = memory.memory_pass(_Prepared(), None, 1, "cpu", baseline, None)  # type: ignore[arg-type]
    assert figures["peak_rss_bytes"] == baseline and figures["peak_rss_delta_bytes"] == 0
    monkeypatch.setattr(memory, "lifetime_peak_rss_bytes", lambda: baseline + 4096)
    figures = memory.memory_pass(_Prepared(), None, 1, "cpu", baseline, None)  # type: ignore[arg-type]
    assert figures["peak_rss_bytes"] == baseline + 4096 and figures["peak_rss_delta_bytes"] == 4096


_FREED_COMPILE = """
import json, sys
import numpy as np
from harness.measure import memory

class Prepared:
    def __call__(self, batch):
        return np.ones(8 * 2**20 // 8)  # 8 MiB an inference: its activations

    def synchronize(self):
        return None

baseline = memory.current_rss_bytes()  # as the worker takes it, before the model is built
compiler = np.ones(256 * 2**20 // 8)  # a compile's passing peak
kept = np.ones(1024)  # something it leaves allocated above that in the heap, as a compile does
del compiler
print(json.dumps(memory.memory_pass(Prepared(), None, 2, "cpu", baseline, None)))
"""


def test_the_inference_peak_leaves_out_what_the_steady_allocator_kept_of_a_compile(tmp_path: Any) -> None:
    """Under the default allocator (`steady`: glibc never unmaps nor trims) the heap a compile freed
    stayed resident, and the high-water mark the pass resets to the RSS of that moment counted it:
    every cell's inference peak equalled its lifetime peak to the byte (resnet18's Inductor cells at
    850-862 MiB, its eager ones 695), whatever the inference needed. The pass hands the freed heap back
    first, so a 256 MiB compile peak is not an inference's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from harness import allocator

    if allocator.record("steady", {allocator.VARIABLE: allocator.STEADY_TUNABLES})["libc"].split()[0] != "glibc":
        pytest.skip("the steady allocator is glibc's tunables")
    env = {**os.environ, allocator.VARIABLE: allocator.STEADY_TUNABLES,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", _FREED_COMPILE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    import json

    figures = json.loads(done.stdout)
    assert figures["peak_rss_delta_bytes"] >= 200 * 2**20, figures  # the compile's peak is the lifetime's
    assert figures["inference_peak_rss_delta_bytes"] < 64 * 2**20, figures
    assert "malloc_trim" in figures["inference_peak_method"]
