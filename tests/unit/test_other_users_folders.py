"""A user who is not root, on a machine where root ran the harness first: another user's folders are
named in one line, with what to do, never a traceback or a file the user never gave."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli.main import main
from harness.errors import ConfigError
from harness.run.preflight import writable
from tests.another_user import AS_ROOT, acting_as, root_folder_every_user_may_enter

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

pytestmark = AS_ROOT


@pytest.fixture
def roots_folder() -> Iterator[Path]:
    """A folder root made under /tmp (0755: every user may enter and read it, only root write)."""
    with root_folder_every_user_may_enter() as folder:
        yield folder


def test_an_out_inside_a_folder_closed_to_this_user_is_named_as_not_writable(roots_folder: Path) -> None:
    """`--out /root/out`: it said `/root/out/bundle.json: Permission denied`, a file the user never
    gave (pathlib's is_file raises where a folder on the way is closed)."""
    closed = roots_folder / "home"
    closed.mkdir(mode=0o700)
    with pytest.raises(ConfigError) as refused, acting_as():
        writable(closed / "out")
    assert str(refused.value) == (f"--out {closed / 'out'}: not writable (Permission denied: a folder on its way is "
                                  "closed to this user); give a folder of your own"), refused.value


def test_a_report_of_another_users_bundle_asks_for_an_out_of_its_own(
        roots_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` of root's bundle: `.report.md.2on39prp.tmp: Permission denied`, a temporary file
    of its own, named as the problem."""
    bundle = roots_folder / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", bundle)
    with acting_as():
        assert main(["report", str(bundle)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bundle}: this user may not write into the bundle (its folder is read-only to this user), where its report goes; give " \
           "--out DIR for a report of its own" in err, err
    assert ".tmp" not in err


@pytest.mark.parametrize("command", ["report", "findings"])
def test_an_out_the_user_may_not_make_is_named_with_what_to_do(
        roots_folder: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`report RUN --out /root/rep` said only `/root/rep: Permission denied`."""
    bundle = roots_folder / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", bundle)
    closed = roots_folder / "home"
    closed.mkdir(mode=0o700)
    assert main([command, str(bundle), "--out", str(tmp_path / "rep")]) == 0  # its lazy imports, from root's Python
    capsys.readouterr()
    with acting_as():
        assert main([command, str(bundle), "--out", str(closed / "rep")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"fusionbench: error: --out {closed / 'rep'}: this user may not write there (Permission denied at "
                   f"{closed / 'rep'}); give a folder of your own"), err


@pytest.mark.parametrize("linked", [False, True], ids=["folder", "link-to-folder"])
@pytest.mark.parametrize("command", ["report", "findings"])
def test_an_out_folder_the_user_may_not_write_into_is_named_with_what_to_do(
        roots_folder: Path, tmp_path: Path, command: str, linked: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """`report RUN --out DIR`, DIR root's: it said `DIR/.report.md.45prots0.tmp: Permission denied`,
    a temporary file of its own, named as the problem; and so it still did where DIR is a link to
    such a folder (the command writes where the link resolves to)."""
    bundle = roots_folder / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", bundle)
    (roots_folder / "shared").mkdir()
    shared = roots_folder / "link" if linked else roots_folder / "shared"
    if linked:
        shared.symlink_to(roots_folder / "shared")
    assert main([command, str(bundle), "--out", str(tmp_path / "rep")]) == 0  # its lazy imports, from root's Python
    capsys.readouterr()
    with acting_as():
        assert main([command, str(bundle), "--out", str(shared)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"fusionbench: error: --out {shared}: this user may not write there (Permission denied at "
                   f"{shared}); give a folder of your own"), err


def test_pack_without_out_in_a_folder_the_user_may_not_write_asks_for_an_out(
        roots_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`pack RUN --org Acme` in root's folder said only '<cwd>/<run>-Acme-submission: Permission
    denied', where `--out` given the same said what to do."""
    bundle = roots_folder / "run"
    shutil.copytree(GOLDEN / "mlperf", bundle)
    assert main(["pack", str(bundle), "--org", "Acme", "--out", str(tmp_path / "tree")]) == 0  # its lazy imports, as root
    capsys.readouterr()
    monkeypatch.chdir(roots_folder)
    with acting_as():
        assert main(["pack", str(bundle), "--org", "Acme"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    out = roots_folder / "20261123-200653-mlperf-Acme-submission"
    assert err == (f"fusionbench: error: the default --out {out}: this user may not write there (Permission denied at "
                   f"{out}); give --out a folder of your own"), err
    assert sorted(p.name for p in roots_folder.iterdir()) == ["run"]
