"""docs/cli.md's table of exit codes, held command by command: each code a command can give, given
by the command in this process, with no traceback. Codes that need a real run (run's 0, 1, 3,
130 and 143) are held by the integration tests the table names."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.cli.main import main
from tests.bundle_edits import without_backend

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _copy(tmp: Path, name: str = "v3") -> Path:
    root = tmp / f"bundle-{name}"
    if not root.exists():
        shutil.copytree(GOLDEN / name, root)
    return root


def _damaged(tmp: Path) -> Path:
    root = _copy(tmp)
    (root / "stray.txt").write_text("not in the manifest")
    return root


def _one_cell_fewer(tmp: Path) -> Path:
    """A valid bundle lacking the golden one's eager cells, as a run with `--only` leaves it: compare
    cannot pair them."""
    root = tmp / "fewer"
    shutil.copytree(GOLDEN / "v3", root)
    without_backend(root, "eager", ["inductor", "null"])
    return root


def _duplicate_key(tmp: Path) -> Path:
    path = tmp / "info.json"
    path.write_text('{"cooling": "air", "cooling": "water"}')
    return path


def _accuracy_forged(tmp: Path) -> Path:
    """The MLPerf bundle with a top-1 its accuracy log does not give, the manifest re-hashed."""
    root = _copy(tmp, "mlperf")
    path = next((root / "cells").glob("*.json"))
    record = json.loads(path.read_text())
    record["metrics"]["accuracy"].update(top1_percent=76.5, good=783)
    path.write_text(json.dumps(record))
    manifest.write(root)
    return root


def _scenario(tmp: Path, text: str) -> Path:
    path = tmp / "scenario.yaml"
    path.write_text(text)
    return path


_NULL = "models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream]\ndevice: cpu\n"


def _stored_scenario_broken(tmp: Path) -> Path:
    """A copy of golden v3 whose stored scenario's `limits` is a string, its hash and manifest redone."""
    from harness.scenario.loading import sha256

    root = _copy(tmp)
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["limits"] = "x"
    header["scenario_sha256"] = sha256(header["scenario"])
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    return root


def _bad_scenario(tmp: Path) -> Path:
    path = tmp / "bad.yaml"
    path.write_text("models: [resnet18]\nbackends: [{name: eager}]\nscenarios: [Sometimes]\n")
    return path


#: (command, expected code, argv built in a temporary directory)
CASES: list[tuple[str, int, Callable[[Path], list[str]]]] = [
    ("validate", 0, lambda t: ["validate", str(_copy(t))]),
    ("validate", 1, lambda t: ["validate", str(_damaged(t))]),
    ("validate", 2, lambda t: ["validate", str(t)]),
    ("compare", 0, lambda t: ["compare", str(_copy(t)), str(_copy(t, "v2")), "--allow-missing"]),
    ("compare", 1, lambda t: ["compare", str(_copy(t)), str(_one_cell_fewer(t))]),
    ("compare", 2, lambda t: ["compare", str(_copy(t)), str(_damaged(t / "x"))]),
    ("report", 0, lambda t: ["report", str(_copy(t)), "--out", str(t / "report")]),
    ("report", 2, lambda t: ["report", str(_damaged(t))]),
    ("findings", 0, lambda t: ["findings", str(_copy(t)), str(_copy(t, "v2")), "--out", str(t / "findings")]),
    ("findings", 2, lambda t: ["findings", str(_damaged(t)), "--out", str(t / "findings")]),
    ("findings", 2, lambda t: ["findings", str(_copy(t)), "--out", str(_copy(t) / "findings")]),
    ("pack", 0, lambda t: ["pack", str(_copy(t, "mlperf")), "--org", "Acme", "--out", str(t / "tree")]),
    ("pack", 2, lambda t: ["pack", str(_copy(t, "mlperf")), "--org", "../Acme", "--out", str(t / "tree")]),
    ("pack", 2, lambda t: ["pack", str(_copy(t, "mlperf")), "--org", "Acme", "--out", str(_copy(t, "mlperf") / "tree")]),
    ("pack", 2, lambda t: ["pack", str(_copy(t, "mlperf")), "--org", "Acme", "--out", str(t / "tree"),
                           "--system-info", str(_duplicate_key(t))]),
    ("compare", 2, lambda t: ["compare", str(_copy(t)), str(_copy(t, "v2")), "--out", str(_copy(t) / "bundle.json")]),
    ("validate", 1, lambda t: ["validate", str(_accuracy_forged(t))]),
    ("schema", 0, lambda t: ["schema", "--out", str(t / "schema.json")]),
    ("schema", 2, lambda t: ["schema", "--out", str(t)]),
    ("models", 0, lambda t: ["models"]),
    ("models", 2, lambda t: ["models", "--family", "nope"]),
    ("backends", 2, lambda t: ["backends", "--device", "tpu"]),
    ("run", 2, lambda t: ["run", str(_bad_scenario(t)), "--out", str(t / "results")]),
    ("run", 2, lambda t: ["run", str(_scenario(t, "models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\n"
                                                  "models: [vgg11]\n")), "--out", str(t / "results")]),
    ("run", 2, lambda t: ["run", str(_scenario(t, "models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\n"
                                                  "env: [OMP_NUM_THREADS=1, OMP_NUM_THREADS=2]\n")),
                          "--out", str(t / "results")]),
    ("run", 2, lambda t: ["run", str(_scenario(t, "models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\n"
                                                  "baseline: inductor\n")), "--out", str(t / "results")]),
    ("run", 2, lambda t: ["run", "--resume", str(_damaged(t))]),
    ("run", 2, lambda t: ["run", "--resume", str(_stored_scenario_broken(t))]),
    ("run", 2, lambda t: ["run", str(_scenario(t, _NULL)), "--out", str(t / "results"), "--executor", "ray", "--address", ""]),
    ("run", 2, lambda t: ["run", str(_scenario(t, _NULL)), "--out", str(t / "results"), "--executor", "ray",
                          "--ray-connect-timeout-s", "0"]),
    ("run", 2, lambda t: ["run", str(_scenario(t, _NULL)), "--out", str(t / "results"), "--ray-connect-timeout-s", "5"]),
    ("gpu-check", 2, lambda t: ["gpu-check", "--budget-s", "-1"]),
    ("gpu-check", 2, lambda t: ["gpu-check", "--budget-s", "nan"]),
    ("gpu-check", 2, lambda t: ["gpu-check", "--budget-s", "inf"]),
    ("container", 2, lambda t: ["container", "cpu"]),
    ("(none)", 2, lambda t: ["frobnicate"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "code", "argv"), CASES, ids=[f"{c}-{code}-{i}" for i, (c, code, _) in enumerate(CASES)])
def test_each_command_gives_the_code_the_table_gives(command: str, code: int, argv: Callable[[Path], list[str]],
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        got = main(argv(tmp_path))
    except SystemExit as exc:  # argparse: an unknown command or choice
        got = exc.code if isinstance(exc.code, int) else 2
    printed = capsys.readouterr()
    assert got == code, printed.out[-1000:] + printed.err[-1000:]
    assert "Traceback" not in printed.err
    if code == 2:
        assert printed.err.strip(), "an exit 2 says why on standard error"
    if command == "run":
        assert not (tmp_path / "results").exists(), "a refused run writes nothing"


def test_the_table_names_every_command_and_only_these_codes() -> None:
    text = DOCS.read_text()
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", text, flags=re.M)}
    assert codes == {0, 1, 2, 3, 4, 130, 141, 143}
    for command in ("run", "gpu-check", "validate", "compare", "report", "findings", "pack", "schema", "backends",
                    "models", "container"):
        assert f"`{command}`" in text
    held = {command for command, _, _ in CASES}
    assert held >= {"validate", "compare", "report", "findings", "pack", "schema", "models", "backends", "run", "gpu-check",
                    "container"}


def test_the_other_pages_that_give_a_runs_exit_code_say_a_run_that_measured_nothing_exits_4() -> None:
    """The table's 0 is every cell valid or skipped, one at least valid; the README's list of codes,
    the backend guide (a plugin that fails to load) and gpu-check's help said 0 for a run whose every
    cell was skipped after code 4 was added."""
    root = DOCS.parents[1]
    readme = " ".join((root / "README.md").read_text().split())
    assert "The exit code is 0 when every cell is valid or skipped, one at least valid;" in readme
    assert ("4 when every cell was skipped, or `--budget-s` was spent before any cell had a result (nothing "
            "measured: not a pass)") in readme
    guide = " ".join((root / "docs" / "adding_a_backend.md").read_text().split())
    assert "4 (nothing measured) where every cell was skipped" in guide and "the run exits 0" not in guide
    from harness.run import gpu_check

    assert "4 when no cell was measured" in " ".join((gpu_check.__doc__ or "").split())
