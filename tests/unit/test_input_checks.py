"""An input folder is checked before any cell runs: an empty folder, a labels line whose class is
not ASCII digits ("²" passed str.isdigit() and failed each cell with "invalid literal for int()"),
a class the model never answers (5000 or 10**20 scored a silent 0%), and a labelled image that is
not there each stop `fusionbench run` with exit 2 and one line naming the folder, or the labels
file and its line, before the bundle is made. Before, each cell found them after building its
model, or never."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import main
from harness.errors import HarnessError
from harness.models.catalog import CLASSIFICATION_MODELS
from harness.models.labels import IMAGENET_CLASSES, output_classes, read_labels
from harness.models.zoo import make_samples
from harness.run import preflight, runner, sweep
from harness.run.probe_answer import ProbeAnswer
from harness.scenario.schema import ScenarioFile
from tests.labelled_images import LABELS, draw

SCENARIO = "models: [{name: resnet18, input_size: 32}]\nbackends: [eager]\nscenarios: [SingleStream]\n"


@pytest.fixture(autouse=True)
def no_cell_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that answers at once, and a sweep that must not be reached."""
    def probe(device: str, backends: list[str], **kwargs: Any) -> ProbeAnswer:
        return ProbeAnswer.model_validate({"device": "cpu", "cuda_available": False, "system": {},
                                           "backends": {name: {"available": True, "reason": "", "versions": {}}
                                                        for name in backends}})

    def never_swept(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the input folder was accepted and the cells started")

    monkeypatch.setattr(runner, "run_probe", probe)
    monkeypatch.setattr(sweep, "sweep", never_swept)


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], inputs: str) -> str:
    """`fusionbench run` of a scenario with these inputs: exit 2, one line, nothing written."""
    path, out = tmp_path / "s.yaml", tmp_path / "results"
    path.write_text(SCENARIO + f"inputs: {inputs}\n")
    code = main(["run", str(path), "--out", str(out), "--device", "cpu", "--no-cache"])
    printed = capsys.readouterr()
    lines = printed.err.splitlines()
    assert code == 2, printed.err
    assert len(lines) == 1 and lines[0].startswith(f"fusionbench: error: {path}: "), lines  # the file that asks
    assert "Traceback" not in printed.err and not out.exists(), "a refused run writes nothing"
    return lines[0].removeprefix(f"fusionbench: error: {path}: ")


def test_an_empty_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "notes.txt").write_text("not an image")
    message = refused(tmp_path, capsys, "{source: folder, path: images}")
    assert message == f"inputs.path: {tmp_path / 'images'} has no .jpg/.jpeg/.png images"


@pytest.mark.parametrize("label", ["²", "٣", "-1", "1.0", "0x10"])
def test_a_class_that_is_not_ascii_digits_is_refused_naming_the_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str) -> None:
    folder = draw(tmp_path / "images", 3, size=8)
    lines = (folder / LABELS).read_text().splitlines()
    lines[1] = lines[1].split()[0] + f" {label}"
    (folder / LABELS).write_text("\n".join(lines) + "\n")
    message = refused(tmp_path, capsys, "{source: folder, path: images, labels: val_map.txt}")
    assert message.startswith(f"inputs.labels: {folder / LABELS}:2: expected '<image file name> <class index>'")


@pytest.mark.parametrize("label", ["1000", "5000", str(10**20), "9" * 5000])  # 5,000 digits: past int()'s limit
def test_a_class_outside_the_models_classes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       label: str) -> None:
    folder = draw(tmp_path / "images", 4, size=8)
    lines = (folder / LABELS).read_text().splitlines()
    lines[3] = lines[3].split()[0] + f" {label}"  # past inputs.samples, but the labels file is wrong for the model
    (folder / LABELS).write_text("\n".join(lines) + "\n")
    message = refused(tmp_path, capsys, "{source: folder, path: images, labels: val_map.txt, samples: 2}")
    assert message.startswith(f"inputs.labels: {folder / LABELS}:4: class {label[:20]}")
    assert message.endswith("is outside resnet18's classes 0..999")


def test_a_labelled_image_that_is_not_in_the_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = draw(tmp_path / "images", 3, size=8)
    (folder / "ILSVRC2012_val_00000002.png").unlink()
    message = refused(tmp_path, capsys, "{source: folder, path: images, labels: val_map.txt}")
    assert message == (f"inputs.labels: {folder / LABELS} lists 1 image(s) that are not files in {folder}, "
                       "the first 'ILSVRC2012_val_00000002.png'")


def test_a_good_folder_passes_and_only_its_first_samples_need_to_exist(tmp_path: Path) -> None:
    folder = draw(tmp_path / "images", 3, label=lambda k: 999 - k, size=8)
    (folder / "ILSVRC2012_val_00000003.png").unlink()  # past inputs.samples: never read
    scenario = {"models": ["resnet18"], "backends": ["eager"], "scenarios": ["Offline"],
                "inputs": {"source": "folder", "path": "images", "labels": LABELS, "samples": 2}}
    assert preflight.input_folder(ScenarioFile.model_validate(scenario), tmp_path) == str(folder)
    del scenario["inputs"]["labels"]  # type: ignore[attr-defined]
    assert preflight.input_folder(ScenarioFile.model_validate(scenario), tmp_path) == str(folder)


def test_the_worker_reads_labels_as_strictly(tmp_path: Path) -> None:
    (tmp_path / LABELS).write_text("a.png 1\nb.png ²\n")
    with pytest.raises(HarnessError, match=r":2: expected '<image file name> <class index>'"):
        read_labels(tmp_path / LABELS)


def test_every_classifier_of_the_zoo_scores_imagenet_classes() -> None:
    from torchvision.models import get_model_weights

    for name in CLASSIFICATION_MODELS:
        assert len(get_model_weights(name).DEFAULT.meta["categories"]) == IMAGENET_CLASSES == output_classes(name), name
    assert output_classes("pattern_bn_act") is None


def test_resume_checks_the_input_folder_again_and_leaves_the_bundle_as_it_was(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The folder a bundle's run read can change before it is resumed: a cell left to run is not
    started on a folder it would fail on."""
    from tests.unit.test_validate import tree_digest

    emptied = tmp_path / "images"
    emptied.mkdir()
    root, _ = _killed_mlperf_run(tmp_path, emptied)
    before = tree_digest(root)
    code = main(["run", "--resume", str(root), "--no-cache"])
    printed = capsys.readouterr()
    assert code == 2 and "inputs.labels" in printed.err and "val_map.txt" in printed.err, printed.err
    assert tree_digest(root) == before


def _killed_mlperf_run(tmp_path: Path, folder: Path, digest: bool = False) -> tuple[Path, dict[str, Any]]:
    """The golden MLPerf bundle, upgraded to the version this harness writes (so that it resumes),
    reading `folder` (with its digest recorded, where asked), one cell's record deleted so that a
    resume runs it again: its root and header."""
    import json
    import shutil

    from harness.bundle import manifest
    from harness.bundle.migrations import upgraded_cell, upgraded_header
    from harness.run.preflight import inputs_sha256
    from harness.run.resumable import check_scenario
    from tests.resumable_copies import as_run_here

    root = tmp_path / "bundle"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / "mlperf", root)
    for cell in (root / "cells").glob("*.json"):
        cell.write_text(json.dumps(upgraded_cell(json.loads(cell.read_text()), cell.name)))
    header = upgraded_header(json.loads((root / "bundle.json").read_text()))
    header["input_folder"] = str(folder)
    if digest:
        header["inputs_sha256"] = inputs_sha256(check_scenario(header["scenario"], "bundle.json"), str(folder))
    (root / "bundle.json").write_text(json.dumps(header))
    gone, kept = (cell["id"] for cell in header["cells"])
    _keep_labels_scoring_as_recorded(root, kept)  # what a run of this harness keeps, so the kept cell validates
    (root / "cells" / f"{gone}.json").unlink()
    shutil.rmtree(root / "cells" / gone)
    manifest.write(root)
    as_run_here(root)  # its versions this machine's: the resume is refused for nothing else than its inputs
    return root, json.loads((root / "bundle.json").read_text())


def _keep_labels_scoring_as_recorded(root: Path, cell_id: str) -> None:
    """Beside an older accuracy run's log, the labels file this harness keeps: classes that score the
    log's responses exactly as its record says (none right, or the first `good` right)."""
    import json

    from harness.mlperf import accuracy

    path = root / "cells" / f"{cell_id}.json"
    record = json.loads(path.read_text())
    folder = root / "cells" / cell_id / record["metrics"]["accuracy"]["log_dir"]
    answers = {entry["qsl_idx"]: accuracy.predicted(entry, "log")
               for entry in accuracy.read_log(folder / "mlperf_log_accuracy.json")}
    right = set(sorted(answers)[:record["metrics"]["accuracy"]["good"]])
    labels = [answers.get(i, 0) if i in right else (answers.get(i, 0) + 1) % 1000 for i in range(max(answers) + 1)]
    (folder / accuracy.LABELS).write_text("".join(f"{label}\n" for label in labels))
    record["metrics"]["accuracy"]["labels"] = accuracy.LABELS
    path.write_text(json.dumps(record))


def test_a_labels_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    draw(tmp_path / "images", 2)
    (tmp_path / "images" / LABELS).unlink()
    os.mkfifo(tmp_path / "images" / LABELS)  # read without care, it would wait for a writer forever
    message = refused(tmp_path, capsys, f"{{source: folder, path: images, labels: {LABELS}}}")
    assert "not a regular file" in message


def test_the_inputs_digest_changes_with_what_the_cells_read_and_only_with_that(tmp_path: Path) -> None:
    from harness.run.preflight import inputs_sha256
    from harness.scenario.loading import parse
    from tests.labelled_images import relabel

    folder = draw(tmp_path / "images", 6)
    scenario = parse((SCENARIO + f"inputs: {{source: folder, path: images, labels: {LABELS}, samples: 4}}\n").encode(),
                     "s.yaml")
    first = inputs_sha256(scenario, str(folder))
    assert first is not None and len(first) == 64
    (folder / "notes.txt").write_text("not read by any cell")
    (folder / "ILSVRC2012_val_00000006.png").write_bytes(b"the fifth and sixth images are past samples: 4")
    assert inputs_sha256(scenario, str(folder)) == first
    relabel(folder, [1, 2, 3, 4, 5, 6])
    relabelled = inputs_sha256(scenario, str(folder))
    assert relabelled != first
    (folder / "ILSVRC2012_val_00000002.png").write_bytes((folder / "ILSVRC2012_val_00000001.png").read_bytes())
    assert inputs_sha256(scenario, str(folder)) not in (first, relabelled)
    unlabelled = parse((SCENARIO + "inputs: {source: folder, path: images, samples: 2}\n").encode(), "s.yaml")
    assert inputs_sha256(unlabelled, str(folder)) is not None
    assert inputs_sha256(parse(SCENARIO.encode(), "s.yaml"), None) is None  # synthetic inputs


def test_resume_refuses_a_folder_that_no_longer_holds_what_the_run_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume read whatever images the folder held by then, under the same names, and set its cells
    beside the ones measured on the first images."""
    from tests.unit.test_validate import tree_digest

    images = draw(tmp_path / "images", 1024)
    root, header = _killed_mlperf_run(tmp_path, images, digest=True)
    with pytest.raises(AssertionError, match="the cells started"):  # the same images: the resume goes on
        main(["run", "--resume", str(root), "--no-cache"])
    capsys.readouterr()
    (images / "ILSVRC2012_val_00000007.png").write_bytes((images / "ILSVRC2012_val_00000008.png").read_bytes())
    before = tree_digest(root)
    code = main(["run", "--resume", str(root), "--no-cache"])
    printed = capsys.readouterr()
    assert code == 2, printed.err
    assert f"{images} no longer holds what the run's cells read (the SHA-256 of its labels file and images was " \
           f"{header['inputs_sha256'][:12]}..., now " in printed.err, printed.err
    assert tree_digest(root) == before
    # a header naming the folder without the digest: not what a run of this harness writes
    import json

    from harness.bundle import manifest

    header["inputs_sha256"] = None
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    assert "records no inputs_sha256 of what its cells read" in capsys.readouterr().err


def test_a_fifo_named_like_an_image_is_refused_not_waited_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The digest opened each image as a plain file: a FIFO `a.png` beside a real image held the run
    (before its bundle existed, or a resume holding its bundle's lock) for as long as nobody wrote."""
    import os

    images = draw(tmp_path / "images", 2)
    os.mkfifo(images / "a.png")
    error = refused(tmp_path, capsys, "{source: folder, path: images, samples: 3}")  # after the two drawn
    assert error == f"inputs.path: cannot read what the cells read: {images / 'a.png'}: not a regular file (a FIFO, " \
                    "device, socket or directory); refused"


def _png(width: int, height: int) -> bytes:
    """A PNG's signature, header and end: `width` x `height` pixels of RGB, with no pixel data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


#: A DDS header (what PIL decodes by, whatever the file's name) whose pixel format PIL does not know:
#: its open raised NotImplementedError, out of the run as a traceback.
DDS_UNKNOWN_FORMAT = bytes.fromhex(
    "444453207c0000000ff500002000000020000000600000000000000000003f0000000000000000000000000000cc0000000000"
    "0000009a000000000000000000a60000000000000000000000200000009900000000000000180000000000ff0000ff0000ff00"
    "0000000000001000000000000000000000000000000000000000")


@pytest.mark.parametrize("damage", ["not-an-image", "cut-short", "unknown-dds-format", "decompression-bomb"])
def test_an_image_that_cannot_be_read_is_refused_before_any_cell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    """A file named .png that is text, or a PNG cut short, passed the checks (and the dry run), and
    failed every cell after it built its model ("cannot read image"); a file that PIL reads as
    another format it cannot decode, or a PNG past PIL's bound on pixels, raised out of the run."""
    images = draw(tmp_path / "images", 3)
    broken = images / "ILSVRC2012_val_00000002.png"
    broken.write_bytes({"not-an-image": b"not an image\n", "cut-short": broken.read_bytes()[:-30],
                        "unknown-dds-format": DDS_UNKNOWN_FORMAT, "decompression-bomb": _png(100_000, 100_000)}[damage])
    error = refused(tmp_path, capsys, "{source: folder, path: images, labels: val_map.txt}")
    assert error.startswith(f"inputs.path: 1 of the images the cells read cannot be read as images, the first {broken} ("), \
        error
    (tmp_path / "s.yaml").write_text(SCENARIO + "inputs: {source: folder, path: images, labels: val_map.txt}\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--dry-run", "--device", "cpu"]) == 2  # the dry run as the run
    assert "cannot be read as images" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["no-end", "bad-checksum"])
def test_a_png_that_fails_its_checks_but_decodes_is_read_as_the_cells_read_it(tmp_path: Path, damage: str) -> None:
    """A PNG missing its end chunk, or with a chunk's checksum wrong, fails PIL's verify, yet decodes,
    and the cells read it: the check refused the whole run for it."""
    images = draw(tmp_path / "images", 2)
    damaged = images / "ILSVRC2012_val_00000002.png"
    data = damaged.read_bytes()
    damaged.write_bytes(data[:-12] if damage == "no-end" else data[:-13] + bytes([data[-13] ^ 0xFF]) + data[-12:])  # IDAT's CRC
    from PIL import Image

    with pytest.raises(Exception), Image.open(damaged) as image:  # noqa: B017 - PIL's error differs by damage
        image.verify()
    scenario = ScenarioFile.model_validate({"models": ["resnet18"], "backends": ["eager"], "scenarios": ["Offline"],
                                            "inputs": {"source": "folder", "path": "images", "samples": 2}})
    preflight.readable_images(scenario, str(images))  # refuses nothing
    samples = make_samples(2, model="resnet18", input_size=32, device="cpu", dtype="fp32", folder=images)
    assert [tuple(sample.shape) for sample in samples] == [(1, 3, 32, 32)] * 2


def test_an_unreadable_image_past_the_samples_the_cells_read_is_not_checked(tmp_path: Path) -> None:
    images = draw(tmp_path / "images", 3)
    (images / "ILSVRC2012_val_00000003.png").write_bytes(b"never read")
    scenario = ScenarioFile.model_validate({"models": ["resnet18"], "backends": ["eager"], "scenarios": ["Offline"],
                                            "inputs": {"source": "folder", "path": "images", "samples": 2}})
    preflight.readable_images(scenario, str(images))  # refuses nothing
    (images / "ILSVRC2012_val_00000001.png").write_bytes(b"read")
    with pytest.raises(HarnessError, match="1 of the images the cells read cannot be read as images"):
        preflight.readable_images(scenario, str(images))
