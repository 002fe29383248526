"""Reading bundles someone else wrote: strict JSON, a manifest that cannot point outside the
bundle, and schema versions checked and upgraded by explicit steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.bundle.migrations import SCHEMA_VERSION, upgraded_cell, upgraded_header
from harness.bundle.reader import load
from harness.bundle.safe_json import MAX_JSON_BYTES, parse_json
from harness.bundle.snapshot import Snapshot
from harness.errors import BundleError, SchemaVersionError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"a": 1e999}', "out of range"),
        ('{"a": NaN}', "non-finite"),
        ('{"a": -Infinity}', "non-finite"),
        ('{"a": ' + "9" * 5000 + "}", "digits is out of range"),
        ('{"a": 1, "a": 2}', "appears twice"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("[" * 70 + "]" * 70, "nested too deeply"),
        ('{"a": 1', "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_hostile_json_is_refused_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(BundleError, match=words) as raised:
        parse_json(text, "cells/x.json")
    assert str(raised.value).startswith("cells/x.json: ")


def test_sane_json_is_read() -> None:
    assert parse_json('{"seed": 18446744073709551615, "x": [1.5, -2]}', "f") == {"seed": 2**64 - 1, "x": [1.5, -2]}


def test_files_that_are_not_plain_utf8_json_are_refused(tmp_path: Path) -> None:
    def load(name: str, max_bytes: int = MAX_JSON_BYTES) -> object:  # as the reader reads a bundle's JSON
        return parse_json(Snapshot(tmp_path).text(name, max_bytes=max_bytes), name)

    (tmp_path / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(BundleError, match="not UTF-8"):
        load("latin1.json")
    (tmp_path / "big.json").write_text("[" + "0," * 1000 + "0]")
    with pytest.raises(BundleError, match="over the 100-byte limit"):
        load("big.json", max_bytes=100)
    (tmp_path / "link.json").symlink_to("/etc/hostname")
    with pytest.raises(BundleError, match="symbolic link"):
        load("link.json")
    with pytest.raises(BundleError, match="missing"):
        load("absent.json")


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../outside.txt", "'..' component"),
        ("cells/../../etc/passwd", "'..' component"),
        ("/etc/passwd", "absolute path"),
        ("cells\\x.json", "backslash"),
        ("cells//x.json", "empty"),
        ("cells/\x1bx.json", "control character"),
    ],
)
def test_manifest_paths_outside_the_bundle_are_refused(path: str, words: str) -> None:
    with pytest.raises(BundleError, match=words):
        manifest.parse(f"{'0' * 64}  {path}\n")


def test_manifest_lines_must_be_digest_and_path() -> None:
    with pytest.raises(BundleError, match="MANIFEST.sha256:2: not '<sha256>  <path>'"):
        manifest.parse(f"{'a' * 64}  bundle.json\nnot a line\n")
    with pytest.raises(BundleError, match="listed twice"):
        manifest.parse(f"{'a' * 64}  x\n{'b' * 64}  x\n")


def test_manifest_problems_name_edited_missing_added_and_linked_files(tmp_path: Path) -> None:
    root = tmp_path / "b"
    (root / "cells").mkdir(parents=True)
    (root / "bundle.json").write_text("{}")
    (root / "cells" / "a.json").write_text("{}")
    (root / "cells" / "gone.json").write_text("{}")
    manifest.write(root)
    assert manifest.problems(Snapshot(root)) == []
    (root / "bundle.json").write_text('{"x": 1}')
    (root / "cells" / "gone.json").unlink()
    (root / "cells" / "new.json").write_text("{}")
    (root / "cells" / "escape").symlink_to(tmp_path)
    assert sorted(manifest.problems(Snapshot(root))) == [
        "bundle.json: edited (its SHA-256 differs from MANIFEST.sha256)",
        "cells/escape: a symbolic link or special file; a bundle holds regular files only",
        "cells/gone.json: listed in MANIFEST.sha256 but missing",
        "cells/new.json: added (not in MANIFEST.sha256)",
    ]


def test_v1_records_upgrade_by_explicit_steps_without_changing_the_input() -> None:
    header = {"schema_version": 1, "cells": []}
    cell = {"schema_version": 1, "metrics": {"kernels": {"kernels_per_inference": 3}}}
    up_header, up_cell = upgraded_header(header), upgraded_cell(cell, "c")
    assert up_header == {"schema_version": SCHEMA_VERSION, "cells": [], "artifact_cache": None, "state": "unrecorded"}
    assert up_cell["metrics"]["kernels"]["backend_figures"] == {} and up_cell["schema_version"] == SCHEMA_VERSION
    assert header == {"schema_version": 1, "cells": []} and "backend_figures" not in cell["metrics"]["kernels"]


@pytest.mark.parametrize(("device", "dtype", "math"), [
    ("cpu", "fp32", "ieee"), ("cpu", "bf16", "bf16"), ("cuda", "fp16", "fp16"), ("cuda", "fp32", "unrecorded"),
])
def test_v2_cells_gain_the_math_mode_known_of_them(device: str, dtype: str, math: str) -> None:
    cell = {"schema_version": 2, "config": {"device": device, "dtype": dtype}, "metrics": {"correctness": {"ok": True}}}
    upgraded = upgraded_cell(cell, "c")
    assert upgraded["metrics"]["math_mode"]["effective"] == math and "inferred" in upgraded["metrics"]["math_mode"]["note"]
    skipped = upgraded_cell({"schema_version": 2, "config": {"device": device, "dtype": dtype}, "metrics": {}}, "c")
    assert "math_mode" not in skipped["metrics"], "a cell that measured nothing has no math mode"


@pytest.mark.parametrize(("version", "error", "words"), [
    (SCHEMA_VERSION + 1, SchemaVersionError, "newer than this harness reads"),
    (0, BundleError, "unknown schema version 0"),
    ("2", BundleError, "no integer schema_version"),
    (True, BundleError, "no integer schema_version"),
    (None, BundleError, "no integer schema_version"),
])
def test_schema_versions_this_harness_cannot_read_are_refused(version, error, words) -> None:
    with pytest.raises(error, match=words):
        upgraded_header({"schema_version": version})


def _newer(root: Path, rel: str) -> str:
    """The record `rel` of the bundle at `root` as a harness of the next schema version writes it,
    the manifest re-hashed (so that only its version is refused); what the refusal then says."""
    record = json.loads((root / rel).read_text())
    (root / rel).write_text(json.dumps({**record, "schema_version": SCHEMA_VERSION + 1}))
    manifest.write(root)
    return f"{root}: {rel}: schema version {SCHEMA_VERSION + 1} is newer than this harness reads ({SCHEMA_VERSION})"


def test_a_newer_record_is_refused_naming_its_bundle_and_its_file(tmp_path: Path) -> None:
    """`bundle.json: schema version 13 is newer ...` named no bundle, and a command reads several."""
    header, cell = tmp_path / "header", tmp_path / "cell"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", header)
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", cell)
    for root, rel in ((header, "bundle.json"), (cell, f"cells/{sorted((cell / 'cells').glob('*.json'))[0].name}")):
        said = _newer(root, rel)
        with pytest.raises(SchemaVersionError) as refused:
            load(root)
        assert str(refused.value).startswith(said), refused.value


@pytest.mark.slow
def test_compare_and_findings_say_which_of_their_bundles_is_newer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`compare A NEW` and `findings A B NEW` exited 2 with `bundle.json: schema version 13 is newer
    than this harness reads (12)`: the user could not tell which bundle."""
    from harness.cli.main import main

    newer = tmp_path / "newer"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", newer)
    said = _newer(newer, "bundle.json")
    older = [str(GOLDEN / f"v{SCHEMA_VERSION - 1}"), str(GOLDEN / f"v{SCHEMA_VERSION - 2}")]
    for argv in (["compare", older[0], str(newer)], ["findings", *older, str(newer), "--out", str(tmp_path / "found")]):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"fusionbench: error: {said}; upgrade FusionBench\n"


def test_golden_bundles_of_every_version_load_as_the_current_version() -> None:
    for version in range(1, SCHEMA_VERSION + 1):
        loaded = load(GOLDEN / f"v{version}")
        assert loaded.version == version
        assert loaded.header["schema_version"] == SCHEMA_VERSION and loaded.header["state"]
        assert len(loaded.cells) == (14 if version >= 7 else 10) and not loaded.missing  # v7 on: TVM's pair added
        # to v10 the ONNX Runtime cells asking for CUDA on a CPU failed; from v11 they are skipped
        assert {c["status"] for c in loaded.cells} >= {"valid", "failed" if version <= 10 else "skipped"}


def test_cell_ids_from_bundle_json_cannot_name_other_files(tmp_path: Path) -> None:
    root = tmp_path / "b"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    header = json.loads((root / "bundle.json").read_text())
    header["cells"][0]["id"] = "../../../etc/passwd"
    (root / "bundle.json").write_text(json.dumps(header))
    with pytest.raises(BundleError, match="is not 16 hex digits"):
        load(root)
