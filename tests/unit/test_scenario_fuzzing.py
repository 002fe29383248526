"""Scenario files generated to be malformed or hostile (hypothesis): wrong types, unknown keys,
huge numbers, deep nesting, alias bombs, binary junk, non-UTF-8. Each must give exactly one
error line and exit code 2 from `fusionbench run`: no traceback, no hang, nothing written.

The examples run through the CLI's `main` in this process (a subprocess each would take minutes);
a generated file that turned out valid would reach the system probe, which is replaced here by
a failure. A handful of the same inputs also go through the real command line.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli.main import main
from harness.run import runner
from harness.scenario.loading import MAX_PROBLEMS

REPO = Path(__file__).resolve().parents[2]
VALID: dict[str, Any] = {
    "models": [{"name": "resnet18", "input_size": 32}],
    "backends": ["eager", {"name": "inductor", "fusion": ["on", "off"], "options": {"mode": "default"}}],
    "scenarios": ["SingleStream", "Offline"],
    "batch_sizes": {"cpu": [4], "cuda": [8]},
    "inputs": {"source": "synthetic", "seed": 0, "samples": 16},
    "loadgen": {"min_duration_s": 0.5, "target_qps": "auto"},
    "timing": {"warmup_iters": 2, "min_iters": 10, "min_time_s": 0.2},
    "limits": {"cell_timeout_s": 60},
}
FUZZ = settings(max_examples=150, deadline=3000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def no_real_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a generated scenario file was valid and reached the system probe")

    monkeypatch.setattr(runner, "run_probe", refuse)


def run_cli(data: bytes) -> None:
    """`fusionbench run` on `data`: exit 2, a line a problem on stderr (as many as the first says, at
    most MAX_PROBLEMS), nothing on stdout, nothing written."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "fuzz.yaml", Path(tmp) / "results"
        path.write_bytes(data)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["run", str(path), "--out", str(out), "--device", "cpu"])
        lines = stderr.getvalue().splitlines()
        assert code == 2, (code, stderr.getvalue()[-2000:], data[:300])
        said = re.search(r"\(and (\d+) more problems?\)$", lines[0]) if lines else None
        more = int(said.group(1)) if said else 0
        assert len(lines) == 1 + min(more, MAX_PROBLEMS), (lines, data[:300])  # a problem a line, as many as said
        assert all(line.startswith(f"fusionbench: error: {path}") for line in lines), (lines, data[:300])
        assert stdout.getvalue() == "" and not out.exists()


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**25), 10**25), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.binary(max_size=16),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                      max_leaves=12)
SECTIONS = ("models", "backends", "scenarios", "batch_sizes", "inputs", "loadgen", "timing", "limits", "dtypes",
            "device", "passes", "name", "description")


def _dump(document: Any) -> bytes:
    return yaml.safe_dump(document, allow_unicode=True).encode("utf-8", "surrogatepass")


@FUZZ
@given(section=st.sampled_from(SECTIONS), key=st.text(min_size=1, max_size=12), value=values,
       replaced=st.dictionaries(st.sampled_from(SECTIONS), values, max_size=3))
@pytest.mark.slow
def test_unknown_keys_anywhere_with_random_values_elsewhere(section: str, key: str, value: Any, replaced: dict) -> None:
    document = {**VALID, **replaced}
    target = document.get(section)
    unknown = f"zz_{key}"  # no field starts with zz_: always unknown
    if isinstance(target, dict):
        document[section] = {**target, unknown: value}
    else:
        document[unknown] = value
    run_cli(_dump(document))


# Values no field of its section accepts, so each document is invalid whatever else it holds.
NEVER_VALID = {
    "models": st.one_of(st.integers(), st.floats(), st.booleans(), st.just([]), st.lists(st.integers(), min_size=1)),
    "backends": st.one_of(st.integers(), st.floats(), st.just([]), st.lists(st.integers(), min_size=1)),
    "scenarios": st.one_of(st.integers(), st.just([]), st.text(max_size=10).filter(
        lambda s: s not in ("SingleStream", "MultiStream", "Server", "Offline"))),
    "batch_sizes": st.one_of(st.integers(), st.text(max_size=5), st.fixed_dictionaries({"cpu": st.integers(max_value=0)})),
    "loadgen": st.one_of(st.integers(), st.fixed_dictionaries({"min_duration_s": st.one_of(
        st.floats(max_value=-0.001), st.floats(min_value=86400.5), st.text(max_size=5))})),
    "timing": st.fixed_dictionaries({"min_iters": st.one_of(st.integers(max_value=0), st.integers(min_value=10**9))}),
    "limits": st.fixed_dictionaries({"cell_timeout_s": st.one_of(st.floats(max_value=0), st.just(float("inf")))}),
    "device": st.text(max_size=10).filter(lambda s: s not in ("auto", "cpu", "cuda")),
    "dtypes": st.one_of(st.integers(), st.just([]), st.text(max_size=6).filter(lambda s: s not in ("fp32", "fp16", "bf16"))),
}


@pytest.mark.slow
@FUZZ
@given(section=st.sampled_from(sorted(NEVER_VALID)), data=st.data())
def test_wrong_types_and_out_of_range_values(section: str, data: st.DataObject) -> None:
    document = {**VALID, section: data.draw(NEVER_VALID[section])}
    run_cli(_dump(document))


@FUZZ
@given(junk=st.one_of(
    st.binary(max_size=400),
    st.binary(min_size=1, max_size=40).map(lambda b: b"\xff\xfe" + b + _dump(VALID)),  # not UTF-8
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
))
@pytest.mark.slow
def test_binary_junk_and_text_that_is_no_scenario(junk: bytes) -> None:
    run_cli(junk)


@FUZZ
@given(kind=st.sampled_from(["bomb", "deep", "bignum", "bigtext", "recursive"]), width=st.integers(2, 12),
       depth=st.integers(3, 9), digits=st.integers(21, 6000), place=st.sampled_from(["models", "loadgen", "zz"]))
@pytest.mark.slow
def test_bombs_deep_nesting_and_huge_numbers(kind: str, width: int, depth: int, digits: int, place: str) -> None:
    valid_text = yaml.safe_dump({k: v for k, v in VALID.items() if k != place})
    if kind == "bomb":  # each level refers to the one below `width` times
        lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
        text = "\n".join(lines) + f"\n{place}: *l{depth - 1}\n"
    elif kind == "deep":
        text = f"{place}: " + "[" * (depth * 100) + "]" * (depth * 100) + "\n"
    elif kind == "bignum":
        text = f"{place}: {{min_duration_s: {'9' * digits}}}\n" if place == "loadgen" else f"{place}: [{'9' * digits}]\n"
    elif kind == "bigtext":
        text = f"{place}: [{{name: \"{'x' * (digits * 20)}\"}}]\n"
    else:
        text = f"{place}: &a [*a]\n"
    run_cli((valid_text + text).encode())


@pytest.mark.parametrize("data", [
    b"a: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\n"
    b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d]\nmodels: *e\n",
    b"models: " + b"[" * 20000 + b"]" * 20000,
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"models: [resnet18]\nbackends: [eager]\nscenarios: Offline\nloadgen: {min_duration_s: " + b"9" * 5000 + b"}\n",
    b"models: [{name: \"\xe9t\xe9\"}]\n",
])
@pytest.mark.slow
def test_the_real_command_line_answers_the_same(data: bytes, tmp_path: Path) -> None:
    path, out = tmp_path / "hostile.yaml", tmp_path / "results"
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists()
