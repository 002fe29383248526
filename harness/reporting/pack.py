"""`fusionbench pack RUN_DIR --org NAME`: the submission tree MLPerf's checker (v6.1) reads, and its tarball.

    <out>/<division>/<org>/systems/<system>.json             the system description (submission_system.py)
    <out>/<division>/<org>/model_mapping.json                open division: each model -> the benchmark it stands for
    <out>/<division>/<org>/src/README.md                     the code that ran: FusionBench version and git sha
    <out>/<division>/<org>/results/<system>/<model>/<Scenario>/
        performance/run_1/mlperf_log_{summary,detail}.txt   LoadGen's performance logs, as the run wrote them
        accuracy/mlperf_log_accuracy.json                   the accuracy log, cut to 8 KiB past 10 KiB (its hash in accuracy.txt)
        accuracy/accuracy.txt, mlperf_log_{summary,detail}.txt
        TEST01/, TEST04/                                    compliance runs and their verify_*.txt, where run
        measurements.json, user.conf, README.md             what ran, with which weights and inputs
    <out>/MANIFEST.sha256                                    every file's SHA-256
    <out>.tar.gz                                             the tree, manifest included

One system per backend variant: `<system-name>_<backend>-fusion-<on|off>[-graphs][-<options digest>]_<dtype>`
(MLPerf's "system" is the hardware with its software stack, and the backend is the software).
A cell becomes a result when it is valid, computes a model that stands for an MLPerf benchmark,
ran with the `mlperf` profile and has an accuracy run (submission_rules.py); the others are
listed with the reason. The closed division is refused, naming every rule that fails. Nothing
is invented: what the bundle does not know is left empty for the submitter and listed.
The bundle is validated first (validate re-derives the accuracy and compliance figures from their logs)
and never written to; every file is read under harness.bundle.confine's rules; the output
directory must not exist and must lie outside the bundle.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bundle import manifest
from harness.bundle.cell_record import CellRecord
from harness.bundle.confine import output_path
from harness.bundle.files import CELLS
from harness.bundle.loadgen_record import Accuracy
from harness.bundle.manifest import check_path
from harness.bundle.mlperf_check import VERIFY
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.snapshot import Snapshot
from harness.errors import BundleError, ConfigError
from harness.file_modes import plain_folder_mode
from harness.mlperf.benchmarks import Benchmark, benchmark_for
from harness.plain_text import one_line, visible, visible_lines
from harness.reporting import submission_rules
from harness.reporting.cell_rows import missing_shown, planned_configs
from harness.reporting.markdown import md_cell
from harness.reporting.submission_system import describe
from harness.scenario.cell_config import CellConfig

DIVISIONS = ("closed", "open")
STATUSES = ("available", "preview", "rdi")
ACCURACY_LOG_LIMIT = 10240  # bytes the checker accepts
ACCURACY_LOG_KEEP = 4096  # bytes kept from each end of a longer log
LOGS = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # whole: `$` lets a final newline through


@dataclass
class Packed:
    tree: Path
    tarball: Path
    systems: list[str] = field(default_factory=list)
    results: int = 0
    left_out: list[str] = field(default_factory=list)  # "label: why"
    notes: list[str] = field(default_factory=list)  # "label: what the checker will say"
    to_fill: dict[str, list[str]] = field(default_factory=dict)  # system -> fields left empty
    replaced: dict[str, list[str]] = field(default_factory=dict)  # system -> "field 'captured' -> 'given'"


def checked_name(value: str, what: str) -> str:
    """A name that becomes a directory: letters, digits, '.', '_', '-'; no path tricks."""
    if not _NAME.fullmatch(value) or value in (".", ".."):
        raise ConfigError(f"{what} {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return value


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


def system_name(base: str, config: CellConfig) -> str:
    variant = config.variant
    name = f"{base}_{_safe(config.backend)}-fusion-{variant.fusion}"
    if variant.graphs == "on":
        name += "-graphs"
    if variant.options:
        digest = hashlib.sha256(json.dumps(variant.options, sort_keys=True).encode()).hexdigest()[:8]
        name += f"-{digest}"
    return f"{name}_{_safe(config.dtype)}"


def listed(value: Any) -> list[Any]:
    """`value` where it is a list, else no items (a bundle is read, never trusted to have its shape)."""
    return value if isinstance(value, list) else []


def default_system_base(header: dict[str, Any]) -> str:
    gpus = listed(lookup(header, "system", "gpu", "gpus"))
    if header.get("device") == "cuda" and gpus:  # a cell runs on one GPU, however many the machine has
        return _safe(f"1x{lookup(gpus[0], 'name') or 'gpu'}")[:40]
    model, cores = lookup(header, "system", "cpu", "model"), lookup(header, "system", "cpu", "logical_cores")
    return _safe(f"{model or 'cpu'}-{cores or '?'}c")[:40]


def weights_and_inputs(cell: CellRecord) -> tuple[str, str]:
    """What every result states: random or pretrained weights, synthetic or real inputs."""
    config = cell.config
    weights = "pretrained" if config.model.pretrained else "random"
    real = "real images from a labelled folder" if config.inputs.source == "folder" else "synthetic"
    return weights, real


def measurements(cell: CellRecord) -> dict[str, Any]:
    """MLPerf's measurements.json fields for one result; the transformations are the backend's
    recorded ones, never more."""
    config = cell.config
    model, backend, fusion = config.model, config.backend, config.variant.fusion
    weights, inputs = weights_and_inputs(cell)
    rewrites = cell.metrics.rewrites or {}
    if backend == "eager":
        transformations = "none: PyTorch eager runs the model as built"
    else:
        done = ", ".join(f"{k}: {v}" for k, v in sorted(rewrites.items())) or "none recorded besides fusion"
        transformations = (f"compiled by {backend} with operator fusion {fusion}; other rewrites: {done}; "
                           "the kernels it ran and what each fused are in the bundle's fusion report")
    return {
        "input_data_types": config.dtype,
        "retraining": "no",
        "starting_weights_filename": (f"torchvision {model.name} DEFAULT pretrained weights" if weights == "pretrained"
                                      else f"none: random weights (seed {config.seed}), not trained"),
        "weight_data_types": config.dtype,
        "weight_transformations": transformations,
        "fusionbench": {"cell_id": cell.id, "label": cell.label, "batch": config.batch,
                        "weights": weights, "inputs": inputs,
                        "loadgen_profile": config.loadgen.profile,
                        "mlperf_conf_overrides": config.loadgen.overrides},
    }


def readme(cell: CellRecord, header: dict[str, Any], run: str) -> str:
    """A result's README: what ran it, its weights, inputs, LoadGen settings and accuracy, and the
    bundle (`run`, its name) whose bundle.json holds the scenario to run it again."""
    weights, inputs = weights_and_inputs(cell)
    accuracy = _accuracy(cell)
    overrides = cell.config.loadgen.overrides
    lines = [
        f"# {md_cell(cell.config.shown_label)}", "",
        f"Run by FusionBench {md_cell(lookup(header, 'harness', 'version'))} (git {md_cell(lookup(header, 'harness', 'git_sha'))}).",
        f"Command: {md_cell(shlex.join(map(str, header.get('command') or [])))}", "",
        f"- Weights: {weights}. Inputs: {inputs}.",
        "- LoadGen: the mlperf profile (LoadGen's mlperf.conf and the user.conf beside this file)"
        + (f", with overrides {json.dumps(overrides, sort_keys=True)}: not an official run." if overrides else "."),
        f"- Accuracy: top-1 {accuracy.top1_percent:.3f}% on {accuracy.total} images.",
    ]
    for test, outcome in sorted((cell.metrics.compliance or {}).items()):
        lines.append(f"- Compliance {test}: {'TEST PASS' if outcome.passed else 'TEST FAIL'}.")
    lines += ["", f"Reproduce: run the scenario that the result bundle {md_cell(run)}'s bundle.json holds "
              "(`scenario`; the bundle, not this tree) with `./run.sh` on this system."]
    return visible_lines("\n".join(lines) + "\n")


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


@dataclass(frozen=True)
class AccuracyFolder:
    """An accuracy folder as the submission holds it: the log cut to fit the checker's limit, and
    accuracy.txt (where the run wrote one) with the full log's SHA-256 in a `hash=` line."""

    log: bytes
    accuracy_txt: bytes | None = None

    def files(self) -> dict[str, bytes]:
        """Each file of the folder by its name."""
        named = {"mlperf_log_accuracy.json": self.log}
        if self.accuracy_txt is not None:
            named["accuracy.txt"] = self.accuracy_txt
        return named


def accuracy_files(files: Snapshot, folder: str) -> AccuracyFolder:
    """The accuracy folder `folder` of the bundle, as MLPerf's truncation leaves it."""
    full = files.inner_bytes(f"{folder}/mlperf_log_accuracy.json", f"{folder}/mlperf_log_accuracy.json")
    kept = full if len(full) <= ACCURACY_LOG_LIMIT else full[:ACCURACY_LOG_KEEP] + b"\n\n...\n\n" + full[-ACCURACY_LOG_KEEP:]
    if not (files.root / folder / "accuracy.txt").exists():
        return AccuracyFolder(kept)
    text = files.inner_bytes(f"{folder}/accuracy.txt", f"{folder}/accuracy.txt").decode("utf-8", "replace").rstrip("\n")
    return AccuracyFolder(kept, f"{text}\nhash={hashlib.sha256(full).hexdigest()}\n".encode())


def _accuracy(cell: CellRecord) -> Accuracy:
    if cell.metrics.accuracy is None:  # unpackable() refuses such a cell before anything is packed
        raise BundleError(f"{cell.config.shown_label}: no accuracy run")
    return cell.metrics.accuracy


def _result_files(bundle: Snapshot, cell: CellRecord) -> dict[str, bytes]:
    """The files of one result, from the bytes validate read and checked (harness.bundle.snapshot,
    under harness.bundle.confine's rules): nothing is read again."""
    metrics = cell.metrics
    base = f"{CELLS}/{cell.id}"

    def read(rel: str) -> bytes:
        return bundle.inner_bytes(rel, rel)

    if metrics.loadgen is None:  # unpackable() refuses such a cell before anything is packed
        raise BundleError(f"{cell.config.shown_label}: no LoadGen run")
    performance = f"{base}/{metrics.loadgen.log_dir}"
    files = {f"performance/run_1/{log}": read(f"{performance}/{log}") for log in LOGS}
    files["user.conf"] = read(f"{performance}/user.conf")
    accuracy = f"{base}/{_accuracy(cell).log_dir}"
    files.update({f"accuracy/{name}": data for name, data in accuracy_files(bundle, accuracy).files().items()})
    files.update({f"accuracy/{log}": read(f"{accuracy}/{log}") for log in LOGS})
    for test, outcome in (metrics.compliance or {}).items():
        test_dir = f"{base}/{outcome.log_dir}"
        run = f"{test_dir}/performance/run_1"
        files.update({f"{test}/performance/run_1/{log}": read(f"{run}/{log}") for log in LOGS})
        checks = sorted(name for name, verdict in outcome.checks if verdict is not None)
        for check in checks:  # the files validate read for this test's checks, no others
            files[f"{test}/{VERIFY[check]}"] = read(f"{test_dir}/{VERIFY[check]}")
        if "accuracy" in checks:  # TEST01 logs responses
            files[f"{test}/accuracy/mlperf_log_accuracy.json"] = accuracy_files(bundle, run).log
    files["measurements.json"] = _json_bytes(measurements(cell))
    return files


def _planned_batches(loaded: LoadedBundle, base: str) -> dict[tuple[str, str, str], set[int]]:
    """The batch sizes the run has or plans for each system, model and scenario: its cells', and
    those of the cells it has not run yet. A system's `_b<batch>` follows the run, not what has run
    so far: packed before its second batch size ran, a system was `<name>`, and `<name>_b8` once
    `--resume` had run it."""
    planned: dict[tuple[str, str, str], set[int]] = {}
    for config in [*(cell.config for cell in loaded.records), *planned_configs(loaded)]:
        planned.setdefault((system_name(base, config), config.model.name, config.scenario), set()).add(config.batch)
    return planned


def _batches(cells: list[CellRecord]) -> list[int]:
    """The batch sizes `cells` ran at, each once: a system takes `_b<batch>` only where they are
    several (two input sizes at one batch were named `_b1` each, which the doc does not say)."""
    return sorted({cell.config.batch for cell in cells})


def _refuse_one_place_for_two(results: list[tuple[str, CellRecord]]) -> None:
    """Two cells of one system, model, scenario and batch (another input size, or pretrained weights
    beside random ones) would be written to one result folder, the second over the first."""
    placed: dict[tuple[str, str, str], CellRecord] = {}
    for name, cell in results:
        where = (name, cell.config.model.name, cell.config.scenario)
        if where in placed:
            raise ConfigError(f"{placed[where].config.shown_label} and {cell.config.shown_label} would both be the "
                              f"result of system {name} for {where[1]} {where[2]}; a submission holds one: pack a "
                              "bundle that ran one of them (a scenario file listing that input size or those "
                              "weights alone: `--only` does not select them)")
        placed[where] = cell


def pack(loaded: LoadedBundle, out: Path, *, org: str, division: str = "open", status: str = "rdi",
         system_base: str | None = None, system_info: dict[str, str] | None = None, option: str = "--out") -> Packed:
    """Write the submission tree at `out` (which must not exist) and `out`.tar.gz beside it;
    `option`: how a refusal names `out` (the user gave no `--out`: "the default --out")."""
    org = checked_name(org, "--org")
    base = checked_name(system_base, "--system-name") if system_base is not None else default_system_base(loaded.header)
    if division not in DIVISIONS:
        raise ConfigError(f"--division {division!r}; allowed: {', '.join(DIVISIONS)}")
    if status not in STATUSES:
        raise ConfigError(f"--status {status!r}; allowed: {', '.join(STATUSES)}")
    info = system_info or {}
    named = [out, out.with_name(out.name + ".tar.gz")] if out.name else [out]
    for given in named:  # as named: resolving would follow a dangling link
        if given.is_symlink():
            raise ConfigError(f"{given} is a symbolic link; pack writes a new directory and tarball, never through a link")
    out = output_path(out, [loaded.root], option)
    if not out.name:
        raise ConfigError(f"{option} {out}: give a new directory to create, not the file system's root")
    tarball = out.with_name(out.name + ".tar.gz")
    for path in (out, tarball):
        if path.exists() or path.is_symlink():
            raise ConfigError(f"{path} already exists; pack never overwrites")

    packed = Packed(tree=out, tarball=tarball)
    chosen: dict[tuple[str, str, str], list[CellRecord]] = {}
    for cell in loaded.records:
        why = submission_rules.unpackable(cell)
        if why is not None:
            packed.left_out.append(f"{cell.config.shown_label}: {why}")
            continue
        key = (system_name(base, cell.config), cell.config.model.name, cell.config.scenario)
        chosen.setdefault(key, []).append(cell)
    stopped = loaded.header_record.interruption
    state = loaded.header_record.state + (f": {one_line(stopped.why)}" if stopped is not None else "")
    for label in missing_shown(loaded):  # an interrupted run's cells never run: left out, said so, not in silence
        packed.left_out.append(f"{label}: not run (the bundle is {state}; `fusionbench run --resume` runs it)")
    if not chosen:
        reasons = "; ".join(packed.left_out[:3]) + (" ..." if len(packed.left_out) > 3 else "")
        raise ConfigError(f"{loaded.root}: no cell is a submission result ({reasons}); docs/submitting.md says how to run one")

    results: list[tuple[str, CellRecord]] = []
    planned = _planned_batches(loaded, base)
    for (system, model, scenario), cells in sorted(chosen.items()):
        # several batch sizes of one system, model and scenario: each a system of its own
        split = len(planned[(system, model, scenario)]) > 1
        results.extend((f"{system}_b{cell.config.batch}" if split else system, cell) for cell in cells)
    _refuse_one_place_for_two(results)
    if division == "closed":
        several = [f"{system}: {model} {scenario} ran at batch sizes {', '.join(map(str, _batches(cells)))}, "
                   "each then a system of its own (a closed system submits every scenario at one): pack a bundle of "
                   "one (`fusionbench run --only batch=N`)"
                   for (system, model, scenario), cells in sorted(chosen.items()) if len(_batches(cells)) > 1]
        _refuse_closed(results, info, several)

    top = f"{division}/{org}"
    files: dict[str, bytes] = {}
    mapping: dict[str, str] = {}
    for name, cell in results:
        model = cell.config.model.name
        benchmark = benchmark_for(model)
        assert benchmark is not None
        if name not in packed.systems:
            packed.systems.append(name)
            described, empty, replaced = describe(loaded.header, cell, info, org=org, division=division, status=status,
                                                  name=name)
            files[f"{top}/systems/{name}.json"] = _json_bytes(described)
            if empty:
                packed.to_fill[name] = empty
            if replaced:
                packed.replaced[name] = replaced
        folder = benchmark.name if division == "closed" else model
        if division == "open":
            mapping[model] = benchmark.name
            packed.notes += [f"{cell.config.shown_label}: {note}" for note in submission_rules.open_notes(cell)]
        where = f"{top}/results/{name}/{folder}/{cell.config.scenario}"
        files.update({f"{where}/{rel}": data for rel, data in _result_files(loaded.files, cell).items()})
        files[f"{where}/README.md"] = readme(cell, loaded.header, loaded.name).encode()
        packed.results += 1
    if mapping:
        files[f"{top}/model_mapping.json"] = _json_bytes(mapping)
    harness = loaded.header.get("harness") or {}
    files[f"{top}/src/README.md"] = (
        f"# Source\n\nThe results were measured by FusionBench {harness.get('version')}, git commit "
        f"{harness.get('git_sha')} (uncommitted changes: {harness.get('git_dirty')}), bundle {loaded.name} "
        f"(schema version {loaded.version}). Each result's README.md gives the command; the bundle's "
        "bundle.json holds the scenario it ran.\n"
        + "".join(f"\nSystem {name}: the submitter's --system-info replaced what the bundle captured: "
                  f"{'; '.join(lines)}.\n" for name, lines in sorted(packed.replaced.items()))).encode()

    for rel in files:
        problem = check_path(rel)  # every part is a checked name; this holds should one ever not be
        if problem:
            raise BundleError(f"pack would write {rel[:80]!r}, which is {problem}; nothing was written")
    _write_tree(files, out, tarball, option)
    return packed


def _write_tree(files: dict[str, bytes], out: Path, tarball: Path, option: str) -> None:
    """The tree at `out` and its tarball, both whole or neither: each is written under a hidden
    name beside its place and moved there last, so a full disk or a Ctrl-C part-way leaves no half
    tree at `out` (which a second pack refused as existing), nor the folders made to hold it. An error
    names the path under `out` (or the tarball) it was writing, never a hidden one; where the user gave
    no --out (`option` says so) and may not write in the folder, it says to give one."""
    hidden: dict[Path, Path] = {}  # hidden path -> the path it becomes
    made: list[Path] = []  # what this pack made outside the hidden names, undone unless it ends whole
    try:
        _make_folders(out.parent, made)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".packing", dir=out.parent))
        os.chmod(staging, plain_folder_mode())  # mkdtemp's 0700 would hide the tree from every other user
        staged_tarball = staging.with_name(staging.name + ".tar.gz")
        hidden = {staging: out, staged_tarball: tarball}
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        manifest.write(staging)
        _write_tarball(staging, staged_tarball, out.name)
        made.append(_claim(tarball, folder=False))
        made.append(_claim(out, folder=True))
        staged_tarball.rename(tarball)  # each over its own placeholder
        staging.rename(out)
        made = []
    except OSError as exc:
        named = _named_by(exc, hidden, out)
        if isinstance(named, PermissionError) and option != "--out":  # the CLI says --out's own (os_error_line)
            raise ConfigError(f"{option} {visible(out)}: this user may not write there ({named.strerror} at "
                              f"{visible(named.filename)}); give --out a folder of your own") from None
        raise named from None
    finally:
        for path in hidden:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for path in reversed(made):  # the placeholders (or the tarball moved over one), then the folders
            with contextlib.suppress(OSError):  # a folder someone else has put a file in meanwhile is theirs
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink()


def _make_folders(folder: Path, made: list[Path]) -> None:
    """`folder` and the folders above it that are missing, made, each added to `made` (outermost
    first) as it is made: a mkdir that fails part-way (a full disk) leaves those above it named."""
    for path in reversed([folder, *folder.parents]):
        if not path.is_dir():
            with contextlib.suppress(FileExistsError):  # made meanwhile, or a file: the next mkdir says so
                path.mkdir()
                made.append(path)


def _claim(path: Path, *, folder: bool) -> Path:
    """`path` (the tarball's name, then the tree's) taken by creating an empty file or folder there,
    refused where something is, a link among them: the rename that follows replaces a file, or an
    empty folder, made at its name since `pack` looked, without a word."""
    try:
        if folder:
            path.mkdir()
        else:
            path.open("xb").close()
    except FileExistsError:
        raise ConfigError(f"{path} already exists; pack never overwrites") from None
    return path


def _named_by(exc: OSError, hidden: dict[Path, Path], out: Path) -> OSError:
    """`exc`, naming the path it was writing as the user knows it: `out` where the hidden folder
    could not be made, the place a hidden path becomes where it names one."""
    if not isinstance(exc.filename, str) or exc.errno is None:
        return exc
    failed = Path(exc.filename)
    named = out if not hidden else None
    for path, becomes in hidden.items():
        if failed == path or failed.is_relative_to(path):
            named = becomes / failed.relative_to(path)
    return exc if named is None else type(exc)(exc.errno, exc.strerror, str(named))


def _refuse_closed(results: list[tuple[str, CellRecord]], info: dict[str, str], several: list[str]) -> None:
    """ConfigError listing every closed-division rule `results` break; `several`: the systems split by
    batch size, said first (the scenarios each part then lacks follow from it)."""
    problems = [*several, *(f"{cell.config.shown_label}: {problem}"
                            for _, cell in results for problem in submission_rules.closed_problems(cell))]
    system_type = info.get("system_type")
    if not system_type:
        problems.append("system_type unknown: give it with --system-info (edge or datacenter decides the scenarios required)")
    else:
        scenarios: dict[tuple[str, Benchmark], set[str]] = {}  # each system's scenarios, per benchmark
        for name, cell in results:
            benchmark = benchmark_for(cell.config.model.name)
            assert benchmark is not None, "unpackable() ran first"
            scenarios.setdefault((name, benchmark), set()).add(cell.config.scenario)
        for (name, benchmark), present in sorted(scenarios.items(), key=lambda item: (item[0][0], item[0][1].name)):
            missing = submission_rules.missing_scenarios(system_type, present, benchmark.edge_scenarios)
            if missing:
                problems.append(f"{name}: a closed {system_type} system submits {', '.join(missing)} as well")
    if problems:
        raise ConfigError("the closed division's rules are not met: " + "; ".join(problems))


def _write_tarball(tree: Path, tarball: Path, name: str) -> None:
    """A reproducible tar.gz of `tree`, its entries under `name`/: sorted, fixed owner, mode and times."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(f"{name}/{path.relative_to(tree).as_posix()}")
            data = path.read_bytes()
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), 0o644, 0, 0, 0
            archive.addfile(info, io.BytesIO(data))
    tarball.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
