"""Every reader, on a generated corpus of hostile and broken bundles (tests/unit/hostile_bundles.py):
validate, compare both ways, report, pack and --resume each exit 0, 1 or 2, with no traceback, no
raw control or bidirectional character in what they print or write, nothing touched outside the
bundle and the chosen --out, and a --resume that does not refuse leaves a bundle validate accepts.

A sample of the corpus, drawn with a fixed seed, runs on every test run; the whole corpus runs with
`-m corpus` (hours on 2 cores; docs/reliability.md gives its size and the last full count).
"""

from __future__ import annotations

import gzip
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.validate import validate
from harness.cli.main import main
from harness.plain_text import has_unsafe
from tests.unit import hostile_bundles
from tests.unit.hostile_bundles import GOLDEN, Case
from tests.unit.test_validate import tree_digest

SAMPLE, SEED = 20, 20261123
CASE_LIMIT_S = 120  # a reader that blocks (on a FIFO, say) fails its case instead of hanging the suite
_BINARY = (".gz", ".tgz", ".png")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("pristine") / "bundle"
    shutil.copytree(GOLDEN, root)
    before = tree_digest(root)
    yield root
    assert tree_digest(root) == before, "a reader changed the bundle it compared against"


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`fusionbench ARGV` in this process: its exit code and everything it printed."""
    previous = signal.signal(signal.SIGALRM, _alarm), signal.getsignal(signal.SIGTERM)
    signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except _Timeout:
        pytest.fail(f"fusionbench {' '.join(argv)}: still running after {CASE_LIMIT_S} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def check_case(case: Case, work: Path, pristine: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    """Run every reader on `case`; the exit code of each. Fails the test on any broken rule."""
    root = hostile_bundles.make(case, work / "bundle")
    outside = work / hostile_bundles.OUTSIDE
    outside_before = tree_digest(outside) if outside.exists() else None
    out = work / "out"
    out.mkdir()
    commands = {
        "validate": ["validate", str(root)],
        "compare A B": ["compare", str(pristine), str(root), "--out", str(out / "compare.md")],
        "compare B A": ["compare", str(root), str(pristine), "--format", "json", "--out", str(out / "compare.json")],
        "report": ["report", str(root), "--out", str(out / "report")],
        "pack": ["pack", str(root), "--org", "Acme", "--out", str(out / "pack")],
        "resume": ["run", "--resume", str(root), "--no-cache"],
    }
    codes = {}
    for what, argv in commands.items():
        code, printed = _run(argv, capsys)
        codes[what] = code
        # 4: a --resume of a bundle whose every cell was skipped, complete (nothing measured)
        assert code in (0, 1, 2) or (what == "resume" and code == 4), f"{case.name}: {what} exited {code}: {printed[-2000:]}"
        assert "Traceback" not in printed, f"{case.name}: {what}: {printed[-2000:]}"
        assert not has_unsafe(printed), f"{case.name}: {what} printed a raw control character: {printed[-500:]!r}"
        assert hostile_bundles.SENTINEL not in printed, f"{case.name}: {what} read a file outside the bundle"
    if codes["resume"] != 2:  # it resumed: what it leaves must pass validate
        assert validate(root).ok, f"{case.name}: --resume exited {codes['resume']} and left {validate(root).problems[:3]}"
    for path in out.rglob("*"):
        if path.is_file() and not path.name.endswith(_BINARY):
            text = path.read_text(errors="replace")
            assert not has_unsafe(text), f"{case.name}: {path} holds a raw control character"
            assert hostile_bundles.SENTINEL not in text, f"{case.name}: {path} holds a file read from outside the bundle"
        elif path.name.endswith(".gz"):
            assert hostile_bundles.SENTINEL.encode() not in gzip.decompress(path.read_bytes()), f"{case.name}: {path}"
    expected = ["bundle", "out"] + ([hostile_bundles.OUTSIDE] if outside_before is not None else [])
    assert sorted(p.name for p in work.iterdir()) == sorted(expected), f"{case.name}: wrote beside the bundle"
    if outside_before is not None:
        assert tree_digest(outside) == outside_before, f"{case.name}: changed the folder outside the bundle"
    return codes


@pytest.mark.slow
@pytest.mark.parametrize("case", hostile_bundles.sample(SAMPLE, SEED), ids=lambda case: case.name)
def test_a_sample_of_the_corpus(case: Case, tmp_path: Path, pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codes = check_case(case, tmp_path, pristine, capsys)
    assert codes["validate"] in (0, 1)


@pytest.mark.parametrize("case", [*hostile_bundles.escape_cases(), *hostile_bundles.contradiction_cases(),
                                  hostile_bundles.foreign_cell_case()], ids=lambda case: case.name)
@pytest.mark.slow
def test_no_path_a_bundle_names_leads_outside_it(case: Case, tmp_path: Path, pristine: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every escape, contradiction and foreign-cell case in full: validate finds it, pack refuses it,
    and nothing outside the bundle is read into any output or written."""
    codes = check_case(case, tmp_path, pristine, capsys)
    assert codes["validate"] == 1, f"{case.name}: validate accepted it"
    assert codes["pack"] == 2, f"{case.name}: pack did not refuse it"


def test_the_corpus_covers_every_kind_of_damage() -> None:
    cases = hostile_bundles.all_cases()
    changes = {case.change or case.damage for case in cases}
    assert set(hostile_bundles.REPLACEMENTS) | {"remove", "extra-key"} | set(hostile_bundles.FILE_DAMAGE) | {"extra-file"} <= changes
    assert {case.file for case in cases} >= {"bundle.json", "MANIFEST.sha256", "report.md"}
    assert len(cases) > 15_000


@pytest.mark.corpus
def test_the_whole_corpus(tmp_path: Path, pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every case; prints how many each reader accepted (0), judged invalid (1) or refused (2)."""
    tally: dict[str, dict[int, int]] = {}
    cases = hostile_bundles.all_cases()
    for number, case in enumerate(cases):
        work = tmp_path / str(number)
        work.mkdir()
        for what, code in check_case(case, work, pristine, capsys).items():
            tally.setdefault(what, {}).setdefault(code, 0)
            tally[what][code] += 1
        shutil.rmtree(work)
    with capsys.disabled():
        print(f"\n{len(cases)} cases; exit codes per reader: {tally}")
