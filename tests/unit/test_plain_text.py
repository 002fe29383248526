"""Text from a bundle or a scenario never reaches a terminal, a Markdown viewer or a browser as a
control character, an escape sequence, a bidirectional override, raw HTML or a link."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from harness.bundle import manifest
from harness.bundle.cell_record import CellRecord
from harness.bundle.migrations import upgraded_cell
from harness.cli.main import main
from harness.plain_text import has_unsafe, one_line, shortened, visible, visible_lines
from harness.reporting.markdown import md_cell

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "v3"
EVIL = "\x1b[2J\x1b]8;;http://x\x07\r<img src=x onerror=alert(1)>[click](javascript:alert(1))\u202egnp.exe"


def test_visible_writes_every_unsafe_character_as_its_code() -> None:
    assert visible("a\x1b[31mb\x07\u202ec\u2066\nd\te\x9b") == "a\\x1b[31mb\\x07\\u202ec\\u2066\\x0ad\\x09e\\x9b"
    assert visible_lines("line\x1b\nnext\tcol\u200f") == "line\\x1b\nnext\tcol\\u200f"
    assert not has_unsafe(visible(EVIL)) and has_unsafe(EVIL)
    assert visible("plain: résumé, 日本, µs") == "plain: résumé, 日本, µs"


PYDANTIC = ("1 validation error for Metrics\nkernels_per_inference\n  Input should be a valid integer "
            "[type=int_type, input_value='many', input_type=str]\r\n\n    For further information visit x")


def test_one_line_joins_a_reasons_lines_and_shows_the_rest_as_codes() -> None:
    assert one_line(PYDANTIC) == ("1 validation error for Metrics / kernels_per_inference / Input should be a valid "
                                  "integer [type=int_type, input_value='many', input_type=str] / For further "
                                  "information visit x")
    assert one_line("a\rb\x1b[2J\u202e\n\tc") == "a\\x0db\\x1b[2J\\u202e / c"  # a lone CR is no line break
    assert one_line("one line") == "one line" and one_line("") == ""


def test_a_reason_over_several_lines_is_shown_on_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell failed by an exception whose message runs over lines (pydantic's, a compiler's): the
    run's cell line, the report and compare show it joined, not as line-break codes."""
    from harness.run.cell_line import line

    root = tmp_path / "a"
    shutil.copytree(GOLDEN, root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["status"] != "valid":
            record["reasons"] = [f"measure: ValidationError: {PYDANTIC}"]
            path.write_text(json.dumps(record))
    manifest.write(root)
    joined = one_line(PYDANTIC)
    assert joined in line("failed", "resnet18 eager", 1.0, 1, 2, [PYDANTIC]).plain
    assert main(["report", str(root), "--out", str(tmp_path / "report")]) == 0
    assert main(["compare", str(root), str(GOLDEN), "--out", str(tmp_path / "cmp.md")]) == 0
    capsys.readouterr()
    for path in (tmp_path / "report" / "report.md", tmp_path / "cmp.md"):
        text = path.read_text()
        assert "\\x0a" not in text and md_cell(joined) in text, path


def test_a_markdown_cell_holds_no_html_link_or_control() -> None:
    cell = md_cell(EVIL)
    assert "<" not in cell and "](" not in cell.replace("\\](", "") and not has_unsafe(cell)
    assert "&lt;img" in cell and "\\[click\\]" in cell and "\\u202e" in cell and "\\x1b" in cell


def _hostile_copy(tmp: Path, name: str, *, labels: bool = False) -> Path:
    """The golden bundle with hostile text in every free-text field a valid bundle may hold (the
    reasons of a cell that did not run, a valid cell's warnings, the scenario file's name),
    re-hashed; with `labels`, in every cell label too (which validate derives from the config)."""
    root = tmp / name
    shutil.copytree(GOLDEN, root)
    header = json.loads((root / "bundle.json").read_text())
    for entry in header["cells"]:
        if labels:
            entry["label"] = f"{entry['label']} {EVIL}"
        path = root / "cells" / f"{entry['id']}.json"
        record = json.loads(path.read_text())
        record["label"] = entry["label"]
        if record["status"] != "valid":
            record["reasons"] = [EVIL]
        else:
            record["warnings"] = [*record.get("warnings", []), EVIL]
        path.write_text(json.dumps(record))
    header["scenario_file"] = EVIL
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    return root


def test_validate_shows_hostile_labels_as_codes_and_rejects_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_hostile_copy(tmp_path, "a", labels=True))]) == 1
    printed = capsys.readouterr()
    assert not has_unsafe(printed.out + printed.err)
    assert "but its config's is" in printed.out and "\\x1b[2J" in printed.out and "\\u202egnp.exe" in printed.out


@pytest.mark.slow
def test_validate_compare_and_report_show_hostile_text_as_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _hostile_copy(tmp_path, "a"), _hostile_copy(tmp_path, "b")
    assert main(["validate", str(a)]) == 0
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp.md")]) == 0
    assert main(["report", str(a), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr()
    assert not has_unsafe(printed.out + printed.err)
    assert "\\\\x1b\\[2J" in printed.out  # compare's Markdown table shows the labels, escapes as (escaped) codes
    for path in (tmp_path / "cmp.md", tmp_path / "report" / "report.md", tmp_path / "report" / "report.html"):
        text = path.read_text()
        assert not has_unsafe(text), path
        assert "<img" not in text, path  # HTML escaped in both
        if path.suffix == ".md":  # and no Markdown link can form
            assert not re.search(r"(?<!\\)\]\(javascript:", text), path
    assert "\\u202egnp.exe" in (tmp_path / "report" / "report.md").read_text()


def test_a_schema_problem_quoting_hostile_text_is_printed_as_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "run"
    shutil.copytree(GOLDEN, root)
    path = next((root / "cells").glob("*.json"))
    record = json.loads(path.read_text())
    record["status"] = EVIL
    path.write_text(json.dumps(record))
    manifest.write(root)
    assert main(["validate", str(root)]) == 1
    printed = capsys.readouterr()
    assert "\\x1b[2J" in printed.out and not has_unsafe(printed.out + printed.err)


def test_the_run_console_shows_labels_and_reasons_as_codes() -> None:
    from harness.run.summary import summary_table

    record = json.loads(next(p for p in sorted(GOLDEN.glob("cells/*.json"))
                             if json.loads(p.read_text())["status"] == "failed").read_text())
    record["config"]["backend"] = EVIL  # a plugin's name: the one free text of a config (a model is the zoo's)
    out = io.StringIO()
    typed = CellRecord.model_validate(upgraded_cell(record, "cell"))
    Console(file=out, width=300, force_terminal=False).print(summary_table([typed]))
    assert not has_unsafe(out.getvalue()) and "\\x1b[2J" in out.getvalue()


def test_a_scenario_string_with_an_escape_or_override_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in ('"\\e[31mkey"', '"name\\u202e"', '"a\\u0007b"'):
        path = tmp_path / "s.yaml"
        path.write_text(f"models: [resnet18]\nbackends:\n  - {{name: 'null', options: {{{text}: 1}}}}\n")
        assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert "holds a control or bidirectional character" in err and ":3:" in err and not has_unsafe(err)
    assert not (tmp_path / "out").exists()


def test_a_path_in_a_command_to_copy_is_one_shell_word() -> None:
    """`complete with --resume /tmp/résultats run/...`: pasted into a shell, the path was two words."""
    import shlex

    from harness.plain_text import shell_word

    assert shell_word("/tmp/run-1/x_y.z") == "/tmp/run-1/x_y.z"  # nothing to quote: as it was
    for path in ("/tmp/résultats run/20261204-smoke", "/tmp/it's here", "/tmp/$HOME;rm"):
        assert shlex.split(shell_word(path)) == [path]
    assert "\\x1b" in shell_word("/tmp/a\x1b[31mred") or "\\u001b" in shell_word("/tmp/a\x1b[31mred")


def test_shortened_keeps_a_text_within_its_limit_and_cuts_a_longer_one_to_it() -> None:
    assert shortened("a" * 60, 60) == "a" * 60
    assert shortened("a" * 61, 60) == "a" * 57 + "..."
    assert len(shortened("b" * 500, 90)) == 90
