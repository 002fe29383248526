"""Artifact cache keys follow weights, shapes and settings; builds land atomically or not at all."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.artifact_cache import cached_dir, fingerprint
from tests.another_user import AS_ROOT, acting_as, root_folder_every_user_may_enter, under_umask

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


def test_fingerprint_follows_the_version_of_the_library_that_defines_the_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from harness import artifact_cache

    torchvision = pytest.importorskip("torchvision")
    model, x = torchvision.models.resnet18(num_classes=4), torch.randn(1, 3, 32, 32)
    assert artifact_cache.defining_library(type(model).__module__) == f"torchvision=={metadata.version('torchvision')}"
    base = artifact_cache.fingerprint(model, x, lib="1.0")
    artifact_cache.defining_library.cache_clear()
    real_version = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.1" if name == "torchvision" else real_version(name))
    try:
        # the same weights, shapes and settings under another torchvision: its forward may differ
        assert artifact_cache.fingerprint(model, x, lib="1.0") != base
    finally:
        artifact_cache.defining_library.cache_clear()
    assert artifact_cache.defining_library("a_script_of_ones_own") == ""


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


def test_a_build_that_another_process_finished_first_is_still_a_build(tmp_path: Path) -> None:
    """Two cells building the same artifact at once: the one whose rename comes second keeps the
    other's entry, but it did build, so its compile is cold (a hit would label it warm)."""
    entry = tmp_path / "cache" / "key"

    def build(tmp: Path) -> None:
        (tmp / "artifact").write_text("mine")
        cached_dir(entry, lambda other: (other / "artifact").write_text("theirs"))  # the other's lands meanwhile

    assert cached_dir(entry, build) is False
    assert (entry / "artifact").read_text() == "theirs"
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key"]  # this call's temporary is gone


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def build(tmp: Path) -> None:
        (tmp / "half-written").write_text("...")
        raise RuntimeError("compiler crashed")

    entry = tmp_path / "cache" / "key"
    with pytest.raises(RuntimeError, match="compiler crashed"):
        cached_dir(entry, build)
    assert not entry.exists()
    assert list((tmp_path / "cache").iterdir()) == []


_KILLED_BUILD = """
import sys, time
from pathlib import Path
from harness.artifact_cache import cached_dir
cached_dir(Path(sys.argv[1]), lambda tmp: ((tmp / "half.so").write_bytes(b"k" * 1000), time.sleep(600)))
"""


def test_what_a_killed_build_left_is_removed_by_the_next_build_and_a_live_one_is_left(tmp_path: Path) -> None:
    """A cell killed mid-build (its time limit, the OOM killer) leaves its `.partial` folder: the
    next build in the folder removes it, but never a build still running."""
    import signal
    import subprocess
    import sys
    import time

    from harness.artifact_cache import remove_orphans

    folder = tmp_path / "cache" / "relax"
    builder = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD, str(folder / "big-key")])
    try:
        deadline = time.monotonic() + 60
        while not list(folder.glob(".big-key.*.partial/half.so")):
            assert builder.poll() is None and time.monotonic() < deadline, "the build never started"
            time.sleep(0.05)
        assert remove_orphans(folder, min_age_s=0) == [], "a live build's folder was removed"
        assert len(list(folder.glob(".big-key.*.partial"))) == 1
    finally:
        builder.send_signal(signal.SIGKILL)
        builder.wait()
    (left,) = folder.glob(".big-key.*.partial")
    broken = folder / ".other-key.abc.broken"  # a repair killed between moving an entry aside and removing it
    broken.mkdir()
    (broken / "x").write_text("damaged")
    fresh = folder / ".new-key.def.partial"  # made a moment ago and not yet locked: too young to be taken
    fresh.mkdir()
    for old in (left, broken):
        os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert cached_dir(folder / "another-key", lambda tmp: (tmp / "lib.so").write_text("built")) is False
    assert sorted(p.name for p in folder.iterdir()) == [fresh.name, "another-key"]


def _counting_build(calls: list[Path]):
    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "model.onnx").write_bytes(b"graph" * 1000)
        (tmp / "lib").mkdir()
        (tmp / "lib" / "kernels.so").write_bytes(b"\x7fELF" + b"k" * 500)
    return build


def _link_to_another_entry(entry: Path) -> None:
    """The entry replaced by a link to an intact entry of another key (a fusion-on library at the
    fusion-off key): its target's seal holds, so only the link gives it away."""
    other = entry.parent.parent / "elsewhere" / "other-key"
    cached_dir(other, lambda tmp: (tmp / "model.onnx").write_bytes(b"another graph"))
    _replace(entry, lambda: entry.symlink_to(other, target_is_directory=True))


def _replace(entry: Path, make: Any) -> None:
    import shutil

    shutil.rmtree(entry)
    make()


@pytest.mark.parametrize(("damage", "words"), [
    (lambda e: (e / "model.onnx").write_bytes((e / "model.onnx").read_bytes()[:100]), "model.onnx differs from when it was built"),
    (lambda e: (e / "lib" / "kernels.so").unlink(), "lib/kernels.so is missing"),
    (lambda e: (e / "stray.bin").write_bytes(b"x"), "stray.bin was added after it was built"),
    (lambda e: (e / ".entry.sha256").unlink(), "written before entries were hashed"),
    (lambda e: (e / ".entry.sha256").write_text("nonsense\n"), "its .entry.sha256 is damaged"),
    (lambda e: (e / "link").symlink_to("/etc/hostname"), "link is a link or special file"),
    (_link_to_another_entry, "it is a link, not a directory of its own"),
    (lambda e: _replace(e, lambda: e.symlink_to(e.parent / "gone")), "it is a link, not a directory of its own"),
    (lambda e: _replace(e, lambda: e.write_text("a file where the entry was")), "it is not a directory"),
])
def test_a_damaged_entry_is_rebuilt_with_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     damage, words: str) -> None:
    """A damaged entry (a truncated model.onnx, a file missing or added) is rebuilt, never loaded as it is."""
    from harness import artifact_cache

    calls: list[Path] = []
    entry = tmp_path / "cache" / "onnx" / "key"
    assert cached_dir(entry, _counting_build(calls)) is False
    assert cached_dir(entry, _counting_build(calls)) is True and len(calls) == 1  # intact: a hit
    damage(entry)
    assert cached_dir(entry, _counting_build(calls)) is False and len(calls) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cache entry {entry} was damaged ({words}): rebuilt it" in err[0], err
    assert any(words in line for line in artifact_cache.repairs())
    assert artifact_cache.damage_of(entry) is None and (entry / "model.onnx").read_bytes() == b"graph" * 1000
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key"]  # the broken entry and temporaries are gone


def test_a_build_that_leaves_a_link_is_refused(tmp_path: Path) -> None:
    from harness.errors import BackendFailed

    def build(tmp: Path) -> None:
        (tmp / "model.onnx").symlink_to("/etc/hostname")

    entry = tmp_path / "cache" / "key"
    with pytest.raises(BackendFailed, match="a link or special file"):
        cached_dir(entry, build)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_damaged_roofline_count_is_rebuilt_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness import artifact_cache
    from harness.measure.roofline import cached_costs

    model, x = _model(0).eval(), torch.randn(1, 3, 8, 8)  # eval: a forward pass leaves its weights as they are
    costs = cached_costs(model, x, tmp_path)
    (path,) = tmp_path.glob("*.json")
    path.write_text('{"flops": "many"')
    assert cached_costs(model, x, tmp_path) == costs
    assert "was damaged" in capsys.readouterr().err
    assert any(str(path) in line for line in artifact_cache.repairs())  # on the cell too, not only in its log
    assert cached_costs(model, x, tmp_path) == costs and capsys.readouterr().err == ""


def test_roofline_costs_are_kept_by_structure_not_weights(tmp_path: Path) -> None:
    """Other weights of one structure share a count (a FLOP count follows shapes, not values); a
    convolution's stride, which its weights' shape does not show, does not."""
    from harness.measure.roofline import cached_costs

    x = torch.randn(1, 3, 8, 8)
    costs = cached_costs(_model(0).eval(), x, tmp_path)
    assert cached_costs(_model(1).eval(), x, tmp_path) == costs and len(list(tmp_path.glob("*.json"))) == 1
    strided = _model(0).eval()
    strided[0].stride = (2, 2)
    assert cached_costs(strided, x, tmp_path).flops < costs.flops
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_a_link_at_an_entry_is_rebuilt_and_what_it_points_to_is_kept(tmp_path: Path) -> None:
    """Another key's entry behind a link is never loaded as this key's artifact, nor deleted."""
    from harness.artifact_cache import damage_of

    calls: list[Path] = []
    entry = tmp_path / "cache" / "onnx" / "key"
    cached_dir(entry, _counting_build(calls))
    _link_to_another_entry(entry)
    other = tmp_path / "cache" / "elsewhere" / "other-key"
    assert cached_dir(entry, _counting_build(calls)) is False and len(calls) == 2
    assert not entry.is_symlink() and (entry / "model.onnx").read_bytes() == b"graph" * 1000
    assert damage_of(other) is None and (other / "model.onnx").read_bytes() == b"another graph"


def test_a_damaged_entry_is_never_loaded_when_it_cannot_be_moved_aside(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """What an earlier repair by a process of the same pid could not delete (a kill in its clean-up,
    a folder it could not read) took the name a repair moved the entry to: the move failed, the
    damaged entry stayed, and it was loaded as rebuilt. Where it cannot be moved at all, the cell
    fails saying so."""
    import os

    from harness import artifact_cache
    from harness.errors import BackendFailed

    calls: list[Path] = []
    entry = tmp_path / "cache" / "onnx" / "key"
    cached_dir(entry, _counting_build(calls))
    left = entry.with_name(f".key.broken-{os.getpid()}")
    left.mkdir()
    (left / "stuck").write_text("what a killed repair left")
    (entry / "model.onnx").write_bytes(b"damaged")
    assert cached_dir(entry, _counting_build(calls)) is False
    assert (entry / "model.onnx").read_bytes() == b"graph" * 1000 and artifact_cache.damage_of(entry) is None

    (entry / "model.onnx").write_bytes(b"damaged")
    rename = os.rename

    def refusing(src: object, dst: object) -> None:
        if Path(str(src)) == entry:
            raise PermissionError(13, "Permission denied")
        rename(src, dst)

    monkeypatch.setattr(artifact_cache.os, "rename", refusing)
    with pytest.raises(BackendFailed, match="could not be moved aside"):
        cached_dir(entry, _counting_build(calls))


def test_an_entry_is_as_readable_as_the_umask_lets_a_plain_folder_be(tmp_path: Path) -> None:
    """Every entry was built in a mkdtemp folder (0700) and renamed into place as it was: private to
    whoever built it, whatever the umask, so a cache shared with another user failed its cells."""
    with under_umask(0o022):
        cached_dir(tmp_path / "cache" / "key", lambda tmp: (tmp / "artifact").write_text("compiled"))
    assert (tmp_path / "cache" / "key").stat().st_mode & 0o777 == 0o755


@AS_ROOT
def test_another_users_cache_is_used_where_readable_and_refused_in_one_line_where_not() -> None:
    """A cache root had used (`--cache-dir` on a shared folder): a non-root user's ONNX Runtime and TVM
    cells failed with a PermissionError traceback, after a warning that the entry was damaged."""

    from harness.errors import BackendFailed

    with root_folder_every_user_may_enter() as outer:
        cache = outer / "cache"
        with under_umask(0o022):
            cached_dir(cache / "shared", lambda tmp: (tmp / "artifact").write_text("compiled"))
        with under_umask(0o077):
            cached_dir(cache / "private", lambda tmp: (tmp / "artifact").write_text("compiled"))
        built: list[Path] = []
        with acting_as():
            assert cached_dir(cache / "shared", built.append) is True and built == []  # a hit
            with pytest.raises(BackendFailed, match=r"cannot be read by this user \(owned by uid 0"):
                cached_dir(cache / "private", built.append)
            with pytest.raises(BackendFailed, match="is not writable by this user"):  # root's 0755 folder
                cached_dir(cache / "new", built.append)
        assert built == [] and (cache / "private" / "artifact").read_text() == "compiled"  # nothing moved aside
