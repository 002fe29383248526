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
