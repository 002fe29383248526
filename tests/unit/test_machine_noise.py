"""The machine's own noise floor, measured by the probe, and the run's warning about it."""

from __future__ import annotations

import pytest

from harness.run import machine_noise


def test_the_floor_is_two_cvs_and_a_warning_only_when_high(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine_noise, "DURATION_S", 0.1)
    result = machine_noise.measure()
    assert result["compute_cv"] >= 0 and result["memory_cv"] >= 0 and min(result["chunks"]) >= 2
    assert (result["warning"] != "") == (max(result["compute_cv"], result["memory_cv"]) > machine_noise.NOISY_FLOOR)
    monkeypatch.setattr(machine_noise, "NOISY_FLOOR", -1.0)
    assert "no figure measured here can be steadier" in machine_noise.measure()["warning"]
