"""The folders a refused run made for `--out` and `--cache-dir` are removed again, if still empty,
and nothing that was there before the run ever is (harness/run/preflight.py `MadeFolders`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.run.preflight import MadeFolders, writable


class Flags:
    """What os.statvfs gives, as far as the noexec check reads it."""

    def __init__(self, flags: int) -> None:
        self.f_flag = flags


def made(*paths: Path) -> MadeFolders:
    """The folders `writable` made for `paths`, as a run's --out and --cache-dir."""
    folders = MadeFolders()
    for path in paths:
        writable(path, made=folders)
    return folders


def test_what_was_made_and_left_empty_goes_and_what_was_there_stays(tmp_path: Path) -> None:
    (tmp_path / "yours").mkdir()  # empty, and the user's: never removed
    folders = made(tmp_path / "yours" / "results" / "today", tmp_path / "cache" / "fb")
    folders.remove_left_empty()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["yours"]


def test_a_folder_with_anything_in_it_stays_with_the_folders_above_it(tmp_path: Path) -> None:
    folders = made(tmp_path / "results" / "today")
    (tmp_path / "results" / "today" / "a-bundle").mkdir()  # another run's, say
    folders.remove_left_empty()
    assert (tmp_path / "results" / "today" / "a-bundle").is_dir()


def test_a_path_through_dot_dot_is_taken_as_the_folders_it_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folders = made(Path("a") / ".." / "b" / "c")
    assert (tmp_path / "b" / "c").is_dir() and (tmp_path / "a").is_dir()  # mkdir made a, then b
    folders.remove_left_empty()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_exists_or_is_a_link_is_not_noted(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "gone", tmp_path / "dangling")  # a link to nothing: mkdir would fail on it, not make it
    folders = made(tmp_path / "target")
    folders.note(tmp_path / "dangling")
    folders.remove_left_empty()
    assert (tmp_path / "target").is_dir() and (tmp_path / "dangling").is_symlink()


def test_a_folder_never_made_does_not_keep_the_ones_above_it(tmp_path: Path) -> None:
    folders = MadeFolders()
    folders.note(tmp_path / "results" / "today")
    (tmp_path / "results").mkdir()  # the mkdir of `today` failed after its parent was made
    folders.remove_left_empty()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_one_path_keeps_stops_the_removal_on_that_path_only(tmp_path: Path) -> None:
    """The run's probe writes its compiled loop into a new --cache-dir: that folder stays, and the
    empty --out folders noted after it went too (they stayed, with the cache noted first)."""
    folders = made(tmp_path / "cache" / "fb", tmp_path / "results" / "today")
    (tmp_path / "cache" / "fb" / "machine").mkdir()
    folders.remove_left_empty()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "cache", "cache/fb", "cache/fb/machine"]




def test_what_the_run_put_in_a_folder_it_made_goes_with_it_and_never_what_was_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fills`: the noise probe's loop in a --cache-dir the run made went with a refusal. Through
    `new/..` with no `new`, a cache that was there read as made, and went, the user's loop with it."""
    folders = made(tmp_path / "cache" / "fb")
    folders.fills(tmp_path / "cache" / "fb" / "machine")
    (tmp_path / "cache" / "fb" / "machine").mkdir()
    (tmp_path / "cache" / "fb" / "machine" / "loop.so").write_bytes(b"built by the probe")
    folders.remove_left_empty()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine" / "machine").mkdir(parents=True)
    (tmp_path / "mine" / "machine" / "loop.so").write_bytes(b"the user's")
    through = Path("new") / ".." / "mine"
    folders = made(through)
    folders.fills(through / "machine")
    assert (tmp_path / "new").is_dir()  # mkdir made it on its way
    folders.remove_left_empty()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "mine", "mine/machine", "mine/machine/loop.so"]



def test_a_build_folder_a_compiler_cannot_use_is_refused_before_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hardened host's noexec TMPDIR failed every Inductor cell (`failed to map segment from shared
    object`) and tuned TVM with no candidate that ran; a TMPDIR with a space failed every Inductor
    cell (its C++ build splits its command at spaces)."""
    from harness.errors import ConfigError
    from harness.run.preflight import build_folders

    build_folders(["eager", "inductor", "tvm"], tmp_path, tmp_path)  # an ordinary folder: nothing said
    build_folders(["eager", "onnxruntime"], None, tmp_path / "a b")  # no backend that builds a library
    with pytest.raises(ConfigError, match=r"\(TMPDIR\) .*a b has a space in its path, and Inductor's C\+\+ build"):
        build_folders(["inductor"], None, tmp_path / "a b")
    build_folders(["tvm"], None, tmp_path / "a b")  # TVM quotes its paths

    real = os.statvfs
    noexec = tmp_path / "noexec"
    noexec.mkdir()

    monkeypatch.setattr(os, "statvfs", lambda path: Flags(os.ST_NOEXEC) if Path(path) == noexec
                        else Flags(real(path).f_flag))
    with pytest.raises(ConfigError, match=rf"the temporary folder \(TMPDIR\) {noexec}/not-yet is on a file system "
                                          rf"mounted noexec \({noexec}\): inductor, tvm build shared libraries there"):
        build_folders(["eager", "inductor", "tvm"], None, noexec / "not-yet")
    with pytest.raises(ConfigError, match="--cache-dir .* mounted noexec .*give a --cache-dir on a file system mounted"):
        build_folders(["tvm"], noexec, tmp_path)
    build_folders(["eager"], noexec, noexec)  # eager builds nothing


@pytest.fixture
def noexec_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs mounted noexec (root only): the kernel refuses to map a file there executable,
    as a security policy (SELinux) refuses it where the mount allows it."""
    folder = tmp_path / "noexec-tmpfs"
    folder.mkdir()
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None or subprocess.run(
            [mount, "-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_folder_where_a_file_cannot_be_mapped_executable_is_refused_though_its_mount_allows_it(
        noexec_tmpfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SELinux refuses to map a temporary file executable on a mount whose flags allow it: statvfs says
    nothing, and every Inductor cell failed loading its kernels. The refusal here is the kernel's own
    (a noexec tmpfs); only the mount's flags are read as if it allowed exec."""
    from harness.errors import ConfigError
    from harness.run.preflight import build_folders, executable_mapping_refused

    assert executable_mapping_refused(tmp_path) is None
    assert executable_mapping_refused(tmp_path / "not" / "yet") is None  # tried in the nearest folder there is
    assert executable_mapping_refused(noexec_tmpfs / "not-yet") == "Operation not permitted"
    real = os.statvfs

    monkeypatch.setattr(os, "statvfs", lambda path: Flags(real(path).f_flag & ~os.ST_NOEXEC))
    with pytest.raises(ConfigError, match=rf"the temporary folder \(TMPDIR\) {noexec_tmpfs}: a file there cannot be mapped "
                                          r"executable \(Operation not permitted\), though its file system is not mounted "
                                          r"noexec: a security policy .* inductor build shared libraries there"):
        build_folders(["inductor"], None, noexec_tmpfs)
    with pytest.raises(ConfigError, match=r"--cache-dir .*cannot be mapped executable.*give a --cache-dir where the policy"):
        build_folders(["tvm"], noexec_tmpfs / "cache", tmp_path)
    build_folders(["eager", "onnxruntime"], noexec_tmpfs, noexec_tmpfs)  # neither builds a library
