from __future__ import annotations

import random

import numpy as np
import pytest

from harness.stats.summary import percentile, summarize_ns


def test_percentile_matches_numpy() -> None:
    rng = random.Random(1)
    values = sorted(rng.randint(1, 10**7) for _ in range(101))
    for q in (0, 1, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_summary_and_noise_flag() -> None:
    steady = summarize_ns([1000, 1010, 990, 1000, 1005])
    assert steady["n"] == 5 and steady["median_ns"] == 1000 and not steady["noisy"]
    assert steady["stdev_ns"] == pytest.approx(float(np.std([1000, 1010, 990, 1000, 1005], ddof=1)))
    noisy = summarize_ns([1000, 3000, 1000, 5000])
    assert noisy["noisy"] and noisy["cv"] > 0.1
    assert summarize_ns([7])["stdev_ns"] == 0.0


def test_errors() -> None:
    with pytest.raises(ValueError):
        summarize_ns([])
    with pytest.raises(ValueError):
        percentile([1.0], 101)
