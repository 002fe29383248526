"""What the commands write, and how a failure to write it is said: standard output that fails
(`> /dev/full`) is said as standard output's, not as `--out`'s, and a run goes on past it; a closed
standard output (`>&-`) is no traceback; a report's two pages are both written or neither, a
failure named by the page, never by its temporary file; `--out` of a file command (`compare`,
`schema`) is a device or pipe written as named (`/dev/stdout`), never a folder's path (`cmp/`), a
`~` the shell did not expand, or someone else's file; an option that takes one value is refused
when given twice; an optional positional may follow the options; no command is a mistake."""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli import standard_output
from harness.cli.main import _parser, main
from harness.files.atomic import write_files_atomic
from harness.reporting.report import REPORT_HTML, REPORT_MD

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}"


def _cli(*args: str, **popen: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env, text=True, timeout=120,
                          stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]


def _two_copies(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(GOLDEN, a)
    shutil.copytree(GOLDEN, b)
    return a, b


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_standard_output_is_said_as_such_and_the_files_written_are_whole(tmp_path: Path) -> None:
    """`report A --out R > /dev/full` said `--out R: No space left on device` with both pages written."""
    out = tmp_path / "pages"
    with open("/dev/full", "w") as full:
        done = _cli("report", str(GOLDEN), "--out", str(out), stdout=full)
    assert done.returncode == 2, done.stderr
    assert "fusionbench: error: standard output: No space left on device" in done.stderr, done.stderr
    assert "--out" not in done.stderr and "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert (out / REPORT_MD).read_text().startswith("# ") and (out / REPORT_HTML).stat().st_size > 0


def test_a_closed_standard_output_is_no_traceback(tmp_path: Path) -> None:
    """`compare A B >&-` and `schema >&-` raised AttributeError on sys.stdout None; compare then exited 1."""
    a, b = _two_copies(tmp_path)
    for args in (("compare", str(a), str(b)), ("schema",)):
        done = _cli(*args, preexec_fn=lambda: os.close(1))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_a_run_goes_on_past_a_failed_standard_output_and_says_so_once(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run's output discarded, not its bundle left `running`; any other command stops (exit 2)."""
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    discarded = []
    monkeypatch.setattr(standard_output, "discard", lambda: discarded.append(True))
    going = standard_output._Guarded(Full(), keep_going=True)
    assert going.write("cell 1\n") == 7 and going.write("cell 2\n") == 7
    said = capsys.readouterr().err
    assert said.count("standard output: No space left on device; the run goes on") == 1, said
    assert discarded == [True]
    with pytest.raises(standard_output.Failed, match="standard output: No space left on device"):
        standard_output._Guarded(Full(), keep_going=False).write("table\n")


def test_a_page_that_cannot_be_written_leaves_the_other_as_it_was_and_is_named(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A folder named report.html in `--out`: report.md was written, and the error named
    `.report.html.<random>.tmp`, a file the user never named and which was gone."""
    out = tmp_path / "pages"
    (out / REPORT_HTML).mkdir(parents=True)
    assert main(["report", str(GOLDEN), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / REPORT_HTML}: Is a directory" in err and ".tmp" not in err, err
    assert sorted(p.name for p in out.iterdir()) == [REPORT_HTML]


def test_a_full_disk_at_the_second_file_replaces_neither(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first.md", tmp_path / "second.html"
    first.write_text("old first")
    real_fsync = os.fsync
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the second file's data
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as raised:
        write_files_atomic({first: b"new first", second: b"new second"})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(second)
    assert first.read_text() == "old first" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.md"]  # no temporary file left


def test_compare_writes_to_standard_output_named_as_its_out(tmp_path: Path) -> None:
    """`--out /dev/stdout` into a pipe: the path resolved to /proc/PID/fd/pipe:[N], which no open finds."""
    a, b = _two_copies(tmp_path)
    done = _cli("compare", str(a), str(b), "--out", "/dev/stdout", stdout=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("# FusionBench comparison") == 2  # the file, then standard output


@pytest.mark.parametrize("given, said", [
    ("cmp/", "'cmp/' ends in /, which names a folder; give the path of the file to write"),
    ("~/cmp.md", "'~/cmp.md' begins with a ~ the shell did not expand"),
])
def test_an_out_that_is_a_folders_or_an_unexpanded_home_is_refused(given: str, said: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`compare --out cmp/` wrote a file named cmp; `--out=~/x` made a folder named `~`."""
    monkeypatch.chdir(tmp_path)
    for argv in (["compare", str(GOLDEN), str(GOLDEN), "--out", given], ["schema", "--out", given]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_schema_replaces_its_own_file_and_no_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`schema --out mine.yaml` replaced a scenario file without a word, as compare once did."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("models: [resnet18]\n")
    assert main(["schema", "--out", str(mine)]) == 2
    assert "a file schema did not write is there, and would be replaced" in capsys.readouterr().err
    assert mine.read_text() == "models: [resnet18]\n"
    schema = tmp_path / "cell.json"
    assert main(["schema", "--out", str(schema)]) == 0
    assert main(["schema", "--file", "cell", "--out", str(schema)]) == 0  # its own: written again
    assert '"title": "CellRecord"' in schema.read_text()


@pytest.mark.parametrize("threshold", ["-0.0", "-0", "-0.1", "1", "nan"])
def test_compare_refuses_a_negative_threshold_negative_zero_among_them(threshold: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--threshold -0.0` passed `0 <= t` and compared, writing `beyond -0%` and `"threshold": -0.0`."""
    assert main(["compare", str(GOLDEN), str(tmp_path), f"--threshold={threshold}"]) == 2
    err = capsys.readouterr().err
    assert f"--threshold {float(threshold)}: give a fraction in [0, 1), e.g. 0.05" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [
    ["pack", str(GOLDEN), "--org", "Acme", "--org", "Other"],
    ["compare", str(GOLDEN), str(GOLDEN), "--threshold", "0.5", "--threshold=0.01"],
    ["models", "--family", "resnet", "--family", "vgg"],
])
def test_an_option_of_one_value_given_twice_is_refused(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """argparse kept the last value without a word: `pack --org Acme --org Other` packed as Other."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    option = next(a for a in reversed(argv) if a.startswith("--")).split("=")[0]
    assert f"argument {option}: given twice" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_pack_refuses_an_empty_system_name_and_names_its_default_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`--system-name ''` (an unset variable) fell back to the default name; a pack run from inside
    the bundle with no --out said `--out NAME is inside the bundle .`, an --out never given."""
    bundle = tmp_path / "bundle"
    shutil.copytree(GOLDEN, bundle)
    monkeypatch.chdir(bundle)
    assert main(["pack", ".", "--org", "Acme", "--system-name", ""]) == 2
    assert "--system-name '': use 1-64 letters" in capsys.readouterr().err
    assert main(["pack", ".", "--org", "Acme"]) == 2
    err = capsys.readouterr().err
    assert "the default --out " in err and "is inside the bundle" in err, err


def test_no_command_is_a_mistake(capsys: pytest.CaptureFixture[str]) -> None:
    """`fusionbench $CMD` with CMD unset printed the help and exited 0: a script's pass."""
    assert main([]) == 2
    assert "fusionbench: error: no command given; `fusionbench --help` lists them" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_dry_run_stops_at_a_full_standard_output() -> None:
    """A dry run's list is all it gives: it went on as a run does, and exited 0 having printed nothing."""
    with open("/dev/full", "w") as full:
        done = _cli("run", "scenarios/smoke.yaml", "--dry-run", "--device", "cpu", stdout=full)
    assert done.returncode == 2 and "standard output: No space left on device" in done.stderr, done.stderr


def test_a_file_there_already_is_written_as_itself(tmp_path: Path) -> None:
    """`compare --out` over its own earlier file: renamed over, it lost its mode and its hard links."""
    a, b = _two_copies(tmp_path)
    out = tmp_path / "cmp.md"
    out.write_text("# FusionBench comparison\nearlier\n")
    out.chmod(0o600)
    link = tmp_path / "linked.md"
    os.link(out, link)
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert out.stat().st_mode & 0o777 == 0o600 and link.read_text() == out.read_text() != "# FusionBench comparison\nearlier\n"


def test_an_option_is_named_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--ou X` was taken for --out, except by the container launcher, which rewrites --out by its name."""
    with pytest.raises(SystemExit) as exited:
        main(["compare", str(GOLDEN), str(GOLDEN), "--ou", str(tmp_path / "x.md")])
    assert exited.value.code == 2
    assert "unrecognized arguments: --ou" in capsys.readouterr().err and not (tmp_path / "x.md").exists()


@pytest.mark.parametrize(("argv", "kind"), [
    (["image", "build", "--no-cache", "cpu"], "cpu"),
    (["image", "build", "cuda", "--no-cache"], "cuda"),
    (["image", "verify", "--source", "debian", "cpu"], "cpu"),
])
def test_an_optional_positional_may_follow_the_options(argv: list[str], kind: str) -> None:
    """`image build --no-cache cpu` was refused as `unrecognized arguments: cpu`: argparse gives the
    optional kind nothing once the action has its word and an option follows."""
    parsed = _parser().parse_args(argv)
    assert (parsed.action, parsed.kind) == (argv[1], kind)


@pytest.mark.parametrize(("argv", "said"), [
    (["image", "build", "--no-cache", "gpu"], "argument kind: invalid choice: 'gpu'"),
    (["image", "build", "--no-cache", "cpu", "extra"], "unrecognized arguments: extra"),
    (["image", "build", "--bogus", "cpu"], "unrecognized arguments: --bogus cpu"),
])
def test_a_late_positional_is_still_checked(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(argv)
    assert exited.value.code == 2
    assert f"fusionbench image: error: {said}" in capsys.readouterr().err


def test_image_prune_states_the_limits_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """`--keep-days 1e5` was refused as not "a number of 0 or more", which it is."""
    assert main(["image", "prune", "--keep-days", "1e5"]) == 2
    assert "--keep-days a number of days from 0 to under 100000" in capsys.readouterr().err
