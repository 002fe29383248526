"""`fusionbench pack`: the submission tree MLPerf's checker (v6.1) reads, from the results of a bundle
run with the mlperf profile; the system descriptions, never a guessed field; the closed division
refused with every rule that fails; a reproducible tarball; refusals that write nothing."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.bundle.reader import load
from harness.bundle.snapshot import Snapshot
from harness.errors import ConfigError
from harness.reporting.pack import ACCURACY_LOG_LIMIT, default_system_base, pack
from harness.reporting.submission_system import SYSTEM_FIELDS, read_system_info
from tests.unit.test_validate import tree_digest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
MLPERF = GOLDEN / "mlperf"
REPO = GOLDEN.parents[1]
# What a submitter knows and the bundle cannot (tests/integration/test_submission.py gives the checker the same).
SYSTEM_INFO = {
    "system_type": "edge", "host_processors_per_node": "1", "host_storage_capacity": "64 GB",
    "host_storage_type": "SSD", "host_processor_frequency": "2.4 GHz", "host_processor_caches": "L3 32 MB",
    "host_memory_configuration": "1x24 GB", "host_processor_interconnect": "N/A", "host_networking": "N/A",
    "host_networking_topology": "N/A", "cooling": "air", "host_network_card_count": "0",
    "system_type_detail": "virtual machine",
}


def _eager(loaded):
    return next(c for c in loaded.cells if c["config"]["backend"] == "eager")


def test_the_tree_has_the_checkers_layout_and_the_null_backend_is_never_packed(tmp_path: Path) -> None:
    before = tree_digest(MLPERF)
    loaded = load(MLPERF)
    packed = pack(loaded, tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    assert packed.results == 1 and packed.systems == ["box_eager-fusion-on_fp32"]
    assert [line for line in packed.left_out if "computes no model" in line and " null " in line]
    top = tmp_path / "sub/open/Acme"
    result = top / "results/box_eager-fusion-on_fp32/mobilenet_v3_small/Offline"
    assert {p.relative_to(result).as_posix() for p in result.rglob("*") if p.is_file()} == {
        "performance/run_1/mlperf_log_summary.txt", "performance/run_1/mlperf_log_detail.txt",
        "accuracy/mlperf_log_accuracy.json", "accuracy/accuracy.txt", "accuracy/mlperf_log_summary.txt",
        "accuracy/mlperf_log_detail.txt",
        "TEST01/verify_accuracy.txt", "TEST01/verify_performance.txt", "TEST01/accuracy/mlperf_log_accuracy.json",
        "TEST01/performance/run_1/mlperf_log_summary.txt", "TEST01/performance/run_1/mlperf_log_detail.txt",
        "TEST04/verify_performance.txt", "TEST04/performance/run_1/mlperf_log_summary.txt",
        "TEST04/performance/run_1/mlperf_log_detail.txt",
        "measurements.json", "user.conf", "README.md",
    }
    assert json.loads((top / "model_mapping.json").read_text()) == {"mobilenet_v3_small": "resnet"}
    assert (top / "src/README.md").read_text().count(loaded.header["harness"]["git_sha"]) == 1
    cell_dir = MLPERF / "cells" / _eager(loaded)["id"] / "loadgen"
    assert (result / "user.conf").read_bytes() == (cell_dir / "attempt-1/user.conf").read_bytes()
    assert tree_digest(MLPERF) == before, "pack must not write into the bundle"
    assert manifest.problems(Snapshot(tmp_path / "sub")) == []


def test_the_accuracy_log_is_cut_to_the_checkers_limit_and_its_hash_kept(tmp_path: Path) -> None:
    loaded = load(MLPERF)
    pack(loaded, tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    full = (MLPERF / "cells" / _eager(loaded)["id"] / "loadgen/accuracy/mlperf_log_accuracy.json").read_bytes()
    assert len(full) > ACCURACY_LOG_LIMIT, "the golden log is long enough to need cutting"
    accuracy = tmp_path / "sub/open/Acme/results/box_eager-fusion-on_fp32/mobilenet_v3_small/Offline/accuracy"
    kept = (accuracy / "mlperf_log_accuracy.json").read_bytes()
    assert len(kept) <= ACCURACY_LOG_LIMIT and full.startswith(kept[:4096]) and full.endswith(kept[-4096:])
    lines = (accuracy / "accuracy.txt").read_text().splitlines()
    assert lines[0].startswith("accuracy=") and lines[1] == f"hash={hashlib.sha256(full).hexdigest()}"


def test_every_result_says_what_weights_and_inputs_it_ran_and_claims_no_transformation(tmp_path: Path) -> None:
    pack(load(MLPERF), tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    result = tmp_path / "sub/open/Acme/results/box_eager-fusion-on_fp32/mobilenet_v3_small/Offline"
    measured = json.loads((result / "measurements.json").read_text())
    assert measured["starting_weights_filename"].startswith("none: random weights")
    assert measured["weight_transformations"].startswith("none: PyTorch eager")
    assert (measured["fusionbench"]["weights"], measured["fusionbench"]["inputs"]) == (
        "random", "real images from a labelled folder")
    assert measured["fusionbench"]["mlperf_conf_overrides"] == {"min_duration_s": 1.0, "min_query_count": 256}
    readme = (result / "README.md").read_text()
    # bundle.json is not in the tree: the README names the bundle that holds it ("the bundle's bundle.json")
    assert ("Reproduce: run the scenario that the result bundle 20261123-200653-mlperf's bundle.json holds (`scenario`; "
            "the bundle, not this tree) with `./run.sh` on this system.") in readme
    assert "Weights: random. Inputs: real images from a labelled folder." in readme
    assert "not an official run" in readme


def test_the_system_leaves_what_it_cannot_know_empty_and_lists_it(tmp_path: Path) -> None:
    packed = pack(load(MLPERF), tmp_path / "sub", org="Acme", system_base="box", status="available")
    system = json.loads((tmp_path / "sub/open/Acme/systems/box_eager-fusion-on_fp32.json").read_text())
    assert set(system) == set(SYSTEM_FIELDS)
    assert (system["division"], system["submitter"], system["status"]) == ("open", "Acme", "available")
    assert system["accelerators_per_node"] == "0" and system["accelerator_model_name"] == "N/A"  # a CPU run
    assert system["host_processor_core_count"].isdigit() and system["host_memory_capacity"].endswith(" GB")
    assert not any(value.startswith("unknown") for value in system.values())
    assert system["system_type"] == "" and system["cooling"] == ""
    assert set(packed.to_fill["box_eager-fusion-on_fp32"]) == set(SYSTEM_INFO)
    assert "container None" not in system["sw_notes"] and "random weights" in system["sw_notes"]


@pytest.mark.parametrize(("info", "words"), [
    ({"colour": "red"}, "colour are not MLPerf system fields"),
    ({"submitter": "Other"}, "submitter comes from pack's own arguments"),
    ({"submitter": "Other", "status": "x"}, "status, submitter come from pack's own arguments"),
    ({"cooling": 3}, "cooling is not a string"),
    ({"cooling": "air\u202e"}, "cooling holds control or bidirectional characters"),
    ({"system_type": "laptop"}, "system_type 'laptop'"),
    ([1, 2], "expected a JSON object"),
])
def test_a_bad_system_info_file_is_refused(tmp_path: Path, info: object, words: str) -> None:
    (tmp_path / "info.json").write_text(json.dumps(info))
    with pytest.raises(ConfigError, match=words):
        read_system_info(tmp_path / "info.json")


def test_closed_division_is_refused_naming_each_rule_that_fails(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        pack(load(MLPERF), tmp_path / "sub", org="Acme", division="closed", system_info=SYSTEM_INFO)
    message = str(info.value)
    for rule in ("mobilenet_v3_small is not resnet's reference model resnet50", "random weights",
                 "overrides mlperf.conf: min_duration_s, min_query_count", "not the 50000 of ImageNet's validation set",
                 "a run holds at most 4096: no run of this harness meets this; pack its results for the open division",
                 "below the target 75.695%", "a closed edge system submits MultiStream, SingleStream as well"):
        assert rule in message, rule
    assert not (tmp_path / "sub").exists()


def test_a_bundle_without_submission_results_is_refused_with_the_reasons(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no cell is a submission result .*not run with the mlperf profile"):
        pack(load(GOLDEN / "v3"), tmp_path / "sub", org="Acme")
    assert not (tmp_path / "sub").exists()


def test_tarball_is_reproducible_and_carries_the_manifest(tmp_path: Path) -> None:
    first = pack(load(MLPERF), tmp_path / "a" / "sub", org="Acme", system_base="box")
    second = pack(load(MLPERF), tmp_path / "b" / "sub", org="Acme", system_base="box")
    assert first.tarball.read_bytes() == second.tarball.read_bytes()
    with tarfile.open(first.tarball) as archive:
        names = archive.getnames()
    assert "sub/MANIFEST.sha256" in names and all(name.startswith("sub/") for name in names)
    assert len(names) == sum(1 for p in (tmp_path / "a" / "sub").rglob("*") if p.is_file())


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"org": "../evil"}, "--org '../evil'"),
    ({"org": "Acme", "system_base": "a/b"}, "--system-name 'a/b'"),
    ({"org": "Acme", "division": "secret"}, "--division 'secret'"),
])
def test_bad_names_are_refused_before_writing(tmp_path: Path, kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        pack(load(MLPERF), tmp_path / "sub", **kwargs)
    assert not (tmp_path / "sub").exists()


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"org": "Acme\n"}, "--org"),
    ({"org": "Acme", "system_base": "box\n"}, "--system-name"),
])
def test_a_name_ending_in_a_newline_is_refused_as_a_bad_name(tmp_path: Path, kwargs: dict, option: str) -> None:
    """`--org $'Acme\\n'` passed the name check (a regular expression's `$` matches before a final
    newline) and was refused only later as 'pack would write ..., which is holds a backslash'."""
    with pytest.raises(ConfigError) as info:
        pack(load(MLPERF), tmp_path / "sub", **kwargs)
    assert str(info.value).startswith(f"{option} ") and "use 1-64 letters" in str(info.value)
    assert not (tmp_path / "sub").exists()


def test_pack_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="already exists; pack never overwrites"):
        pack(load(MLPERF), tmp_path / "sub", org="Acme")
    assert list((tmp_path / "sub").iterdir()) == []


def test_cli_packs_and_lists_what_the_submitter_must_fill_in(tmp_path: Path) -> None:
    out = tmp_path / "submission"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "pack", str(MLPERF), "--org", "Acme",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "packed 1 result(s)" in done.stdout and (tmp_path / "submission.tar.gz").exists()
    assert "to fill in systems/" in done.stdout and "system_type" in done.stdout
    assert "accuracy on 1024 images, not ImageNet's 50000" in " ".join(done.stdout.split())


@pytest.mark.parametrize("command", [
    ["pack", str(GOLDEN / "v3"), "--org", "Acme", "--out", "."],
    ["pack", str(GOLDEN / "v3"), "--org", "Acme", "--out", "/"],
    ["pack", str(GOLDEN / "v3"), "--org", "Acme", "--out", "new"],
    ["schema", "--out", "."],
    ["compare", str(GOLDEN / "v3"), str(GOLDEN / "v3"), "--out", "missing-dir/x.md"],
    ["report", str(GOLDEN / "v3"), "--out", "a-file/report"],
])
@pytest.mark.slow
def test_a_path_a_command_cannot_write_is_exit_2_and_one_line(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    before = sorted(p.name for p in tmp_path.iterdir())
    python_path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))  # a machine's own packages kept
    done = subprocess.run([sys.executable, "-m", "harness.cli", *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": python_path})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_two_cells_of_one_system_model_scenario_and_batch_are_refused_not_written_one_over_the_other(
        tmp_path: Path) -> None:
    """Pretrained weights beside random ones (or another input size): both were packed to one folder,
    the second over the first, and pack said it packed two results."""
    from dataclasses import replace

    loaded = load(MLPERF)
    eager = next(i for i, c in enumerate(loaded.cells) if c["config"]["backend"] == "eager")
    twin = json.loads(json.dumps(loaded.cells[eager]))
    twin["config"]["model"]["pretrained"] = not twin["config"]["model"].get("pretrained", False)
    both = replace(loaded, cells=[*loaded.cells, twin])
    with pytest.raises(ConfigError, match=r"would both be the result of system .* a submission holds one") as refused:
        pack(both, tmp_path / "sub", org="Acme")
    assert not (tmp_path / "sub").exists()
    # the system is named as the doc says (`_b<batch>` only for several batch sizes: it said `_b1` here), and
    # the advice is one a user can follow (`--only` selects no input size or weights)
    system = default_system_base(loaded.header)
    assert f"result of system {system}_eager" in str(refused.value) and "_b" not in str(refused.value).split(" for ")[0]
    assert "`--only` does not select them" in str(refused.value)


def test_a_gpu_result_is_one_accelerators_however_many_the_machine_has() -> None:
    """A cell runs on one GPU: an 8-GPU machine's result was described as `8xNVIDIA-H100...` with
    eight accelerators per node, which MLPerf reads as an eight-accelerator result."""
    from harness.reporting.pack import default_system_base
    from harness.reporting.submission_system import captured

    loaded = load(MLPERF)
    header = json.loads(json.dumps(loaded.header))
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * 2**30, "sm_clock_max_mhz": 1980}
    header.update(device="cuda")
    header["system"]["gpu"] = {"gpus": [h100] * 8, "driver": "570"}
    assert default_system_base(header) == "1xNVIDIA-H100-80GB-HBM3"
    system = captured(header, next(c for c in loaded.records if c.config.backend == "eager"))
    assert system["accelerators_per_node"] == "1" and system["accelerator_model_name"] == h100["name"]
    assert system["hw_notes"] == "the result ran on one of the machine's 8 GPUs"


def test_closed_division_says_first_that_several_batch_sizes_split_a_system(tmp_path: Path) -> None:
    from dataclasses import replace

    loaded = load(MLPERF)
    eager = next(i for i, c in enumerate(loaded.cells) if c["config"]["backend"] == "eager")
    other = json.loads(json.dumps(loaded.cells[eager]))
    other["config"]["batch"] = loaded.cells[eager]["config"]["batch"] + 1
    with pytest.raises(ConfigError) as info:
        pack(replace(loaded, cells=[*loaded.cells, other]), tmp_path / "sub", org="Acme", division="closed",
             system_info=SYSTEM_INFO)
    problems = str(info.value).removeprefix("the closed division's rules are not met: ")
    assert " ran at batch sizes " in problems.split("; ")[0] and "`fusionbench run --only batch=N`" in problems


def test_an_interrupted_bundles_cells_never_run_are_listed_as_left_out(tmp_path: Path) -> None:
    """An interrupted run packed three results of six and named only the interrupted cell: the two
    cells never run were missing from the tree with no word."""

    root = tmp_path / "bundle"
    shutil.copytree(MLPERF, root)
    header = json.loads((root / "bundle.json").read_text())
    null = next(c for c in header["cells"] if " null " in f" {c['label']} ")
    (root / "cells" / f"{null['id']}.json").unlink()
    shutil.rmtree(root / "cells" / null["id"])
    header["state"] = "interrupted"
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    packed = pack(load(root), tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    assert packed.results == 1
    # as the run showed it, its input size too: the planned label alone is that of the cell at 224
    assert (f"{null['label']} input 32: not run (the bundle is interrupted; `fusionbench run --resume` runs it)"
            in packed.left_out), packed.left_out
    assert not [line for line in pack(load(MLPERF), tmp_path / "sub2", org="Acme").left_out if "not run" in line]
    # with why the run stopped, where the bundle records it (from 2026-12-06): the line gave the state alone
    header["interruption"] = {"why": "interrupted by Ctrl-C (SIGINT)", "resume_runs": [null["id"]]}
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    packed = pack(load(root), tmp_path / "sub3", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    assert (f"{null['label']} input 32: not run (the bundle is interrupted: interrupted by Ctrl-C (SIGINT); "
            "`fusionbench run --resume` runs it)" in packed.left_out), packed.left_out


def test_a_captured_field_the_system_info_replaces_is_said(tmp_path: Path) -> None:
    """A --system-info of 64 cores for a 2-core machine's figures went into the system JSON in silence."""
    info = {**SYSTEM_INFO, "host_processor_core_count": "64", "host_memory_capacity": "24 GB"}
    packed = pack(load(MLPERF), tmp_path / "sub", org="Acme", system_base="box", system_info=info)
    assert packed.replaced == {"box_eager-fusion-on_fp32": ["host_processor_core_count '2' -> '64'"]}
    system = json.loads((tmp_path / "sub/open/Acme/systems/box_eager-fusion-on_fp32.json").read_text())
    assert system["host_processor_core_count"] == "64"  # the submitter's word stands, said
    source = (tmp_path / "sub/open/Acme/src/README.md").read_text()  # in the tree too, not only on the terminal
    assert "System box_eager-fusion-on_fp32: the submitter's --system-info replaced what the bundle captured: " \
           "host_processor_core_count '2' -> '64'." in source
    assert pack(load(MLPERF), tmp_path / "sub2", org="Acme", system_info=SYSTEM_INFO).replaced == {}
    assert "replaced" not in (tmp_path / "sub2/open/Acme/src/README.md").read_text()


def test_a_captured_field_with_control_characters_is_refused_unless_the_system_info_gives_it(tmp_path: Path) -> None:
    """A bundle.json whose CPU model held an escape sequence and a right-to-left mark: validate
    passed it (a description, no figure) and pack wrote it into the system JSON as it was."""
    root = tmp_path / "bundle"
    shutil.copytree(MLPERF, root)
    header = json.loads((root / "bundle.json").read_text())
    header["system"]["cpu"]["model"] = "AMD \x1b[2J\x1b[31mEVIL\u202e"
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    with pytest.raises(ConfigError, match=r"host_processor_model_name holds control or bidirectional characters "
                                          r"\(AMD \\x1b\[2J.*\); give it in --system-info"):
        pack(load(root), tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    assert not (tmp_path / "sub").exists()
    info = {**SYSTEM_INFO, "host_processor_model_name": "AMD EPYC"}
    pack(load(root), tmp_path / "sub", org="Acme", system_base="box", system_info=info)
    system = json.loads((tmp_path / "sub/open/Acme/systems/box_eager-fusion-on_fp32.json").read_text())
    assert system["host_processor_model_name"] == "AMD EPYC"


@pytest.mark.parametrize("stop", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()],
                         ids=["disk-full", "ctrl-c"])
def test_a_pack_stopped_part_way_leaves_nothing_and_a_second_pack_goes_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: BaseException) -> None:
    """A full disk while the tarball was written left a tree without its tarball at --out, and a
    second pack refused it as existing; its files looked like a submission."""
    def fail(*args: object) -> None:
        raise stop

    monkeypatch.setattr("harness.reporting.pack._write_tarball", fail)
    with pytest.raises(type(stop)):
        pack(load(MLPERF), tmp_path / "sub", org="Acme")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    packed = pack(load(MLPERF), tmp_path / "sub", org="Acme")
    assert packed.tarball.is_file() and (tmp_path / "sub" / manifest.MANIFEST).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub", "sub.tar.gz"]


def test_a_failed_pack_leaves_no_folder_it_made_for_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out a/b/sub on a full disk left a/ and a/b/ behind: made before the hidden-name write, kept
    when it failed."""
    def fail(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("harness.reporting.pack._write_tarball", fail)
    with pytest.raises(OSError):
        pack(load(MLPERF), tmp_path / "a" / "b" / "sub", org="Acme")
    assert list(tmp_path.iterdir()) == []


def test_a_pack_that_fails_making_the_folders_for_out_leaves_none_it_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out a/b/sub where the disk fills between making a/ and a/b/: a/ was left, the folders
    made so far lost with the list that would have named them."""
    real_mkdir = Path.mkdir

    def mkdir(self: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        if self.name == "b":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        real_mkdir(self, mode, parents, exist_ok)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(OSError):
        pack(load(MLPERF), tmp_path / "a" / "b" / "sub", org="Acme")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("theirs", ["sub", "sub.tar.gz"])
def test_what_another_process_makes_at_out_while_pack_writes_is_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, theirs: str) -> None:
    """pack looked for --out and its tarball, then renamed its hidden tree and tarball there: a rename
    replaces a file, or an empty folder, made at the name in between, without a word. Here another
    process makes one (as a careful one does: refused where something is) just before the moves."""
    made: list[Path] = []
    real_rename = Path.rename

    def rename(self: Path, target: Path) -> Path:
        if not made:
            with contextlib.suppress(FileExistsError):
                (tmp_path / theirs).mkdir() if theirs == "sub" else (tmp_path / theirs).open("xb").close()
                made.append(tmp_path / theirs)
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    try:
        pack(load(MLPERF), tmp_path / "sub", org="Acme")
    except ConfigError as refused:
        assert made and "already exists; pack never overwrites" in str(refused)
        assert [p.name for p in tmp_path.iterdir()] == [theirs]  # theirs, as they made it, and nothing of pack's
        assert (tmp_path / theirs).is_dir() or (tmp_path / theirs).read_bytes() == b""
    else:
        assert not made, f"pack replaced the {theirs} another process made"


@pytest.mark.parametrize("command", ["validate", "report", "compare"])
def test_a_submission_tree_given_as_a_bundle_is_named_as_what_it_is(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`validate TREE` on the tree pack wrote said only 'not a FusionBench result bundle (no
    bundle.json)': a submitter checking the tree before sending it learnt neither what to give nor
    what checks a tree."""
    from harness.cli.main import main

    tree = pack(load(MLPERF), tmp_path / "sub", org="Acme").tree
    assert main([command, str(tree), *([str(MLPERF)] if command == "compare" else [])]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{tree}: not a FusionBench result bundle (no bundle.json); it is a submission tree `pack` wrote" in err, err
    assert "MLPerf's submission checker (docs/submitting.md, section 5)" in err


def test_the_tree_gets_the_mode_a_plain_folder_gets(tmp_path: Path) -> None:
    """The tree is made under a hidden name by mkdtemp, whose 0700 it kept once moved to --out:
    a colleague on the machine, or the upload job of another user, could not read the submission,
    while every folder inside it was 0755."""
    old = os.umask(0o022)
    try:
        tree = pack(load(MLPERF), tmp_path / "sub", org="Acme").tree
    finally:
        os.umask(old)
    assert oct(tree.stat().st_mode & 0o777) == oct((tree / "open").stat().st_mode & 0o777) == "0o755"


def test_a_systems_batch_suffix_follows_the_runs_plan_not_what_has_run_so_far(tmp_path: Path) -> None:
    """A run of two batch sizes packed before its second had run named its system `box_...`, and the
    same result `box_..._b8` once `--resume` had run the second: one result under two names."""
    from harness.scenario.cells import expand

    root = tmp_path / "bundle"
    shutil.copytree(MLPERF, root)
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["batch_sizes"]["cpu"] = [4, 8]
    planned = expand(header["scenario"], header["device"])
    ran = {c["id"] for c in header["cells"]}
    assert {cell.id for cell in planned} > ran  # the cells at batch 8 keep their ids; those at 4 are new
    header["cells"] = [{"id": cell.id, "label": cell.config.label} for cell in planned]
    header["state"] = "interrupted"
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    packed = pack(load(root), tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    assert packed.systems == ["box_eager-fusion-on_fp32_b8"], packed.systems
    assert [line for line in packed.left_out if " b4" in line and "not run" in line], packed.left_out
