"""Artifact cache keys follow weights, shapes and settings; builds land atomically or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.artifact_cache import cached_dir, fingerprint

torch = pytest.importorskip("torch")


def _model(seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))


def test_fingerprint_follows_weights_shape_and_settings() -> None:
    x = torch.randn(1, 3, 8, 8)
    base = fingerprint(_model(0), x, lib="1.0")
    assert fingerprint(_model(0), x, lib="1.0") == base
    assert fingerprint(_model(1), x, lib="1.0") != base  # other random weights
    assert fingerprint(_model(0), torch.randn(2, 3, 8, 8), lib="1.0") != base
    assert fingerprint(_model(0), x, lib="1.1") != base
    half = _model(0).to(torch.bfloat16)  # numpy has no bfloat16: hashed by its bytes
    assert fingerprint(half, x.to(torch.bfloat16), lib="1.0") != base
    model = _model(0)
    model[1].running_var.fill_(2.0)  # buffers count, not only parameters
    assert fingerprint(model, x, lib="1.0") != base


def test_cached_dir_builds_once(tmp_path: Path) -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "artifact").write_text("compiled")

    entry = tmp_path / "cache" / "key"
    assert cached_dir(entry, build) is False
    assert cached_dir(entry, build) is True
    assert len(calls) == 1 and (entry / "artifact").read_text() == "compiled"
    assert not calls[0].exists()


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def build(tmp: Path) -> None:
        (tmp / "half-written").write_text("...")
        raise RuntimeError("compiler crashed")

    entry = tmp_path / "cache" / "key"
    with pytest.raises(RuntimeError, match="compiler crashed"):
        cached_dir(entry, build)
    assert not entry.exists()
    assert list((tmp_path / "cache").iterdir()) == []
