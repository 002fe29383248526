"""A bundle's header (`bundle.json`), typed: the run, the machine it probed, the backends and the
cells it planned. The current schema version's JSON Schema of `bundle.json` is generated from
`BundleHeader` (harness/bundle/schema.py), as a cell's is from harness/bundle/cell_record.py.

Typed wherever a reader uses a field: whatever `validate` accepts here, the report, compare and
pack can show. The resolved scenario is kept as the run stored it (it is checked against the
scenario format by `--resume`), and fields a newer harness adds are kept and ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from harness.bundle.record_base import HEX16, Bytes, Count, model_problems
from harness.bundle.statuses import STATES

Spread = Annotated[float, Field(ge=0, le=1e6)]
State = Literal["running", "interrupted", "complete", "unrecorded"]
assert set(get_args(State)) == set(STATES), "the typed states are the bundle's"


class Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class Cpu(Part):
    model: str | None = None
    #: x86's vendor, family, model and stepping, or Arm's implementer, part, variant and revision
    #: (absent before 2026-12-04)
    identity: str | None = None
    #: the vector extensions /proc/cpuinfo lists of those kernels are chosen by (absent before 2026-12-04)
    vector_extensions: list[str] | None = None
    architecture: str | None = None
    logical_cores: Count | None = None
    physical_cores: Count | None = None
    usable_cores: Count | None = None
    memory_bytes: Bytes | None = None


class Gpu(Part):
    index: Annotated[int, Field(ge=0, le=1024)] | None = None
    name: str | None = None
    memory_bytes: Bytes | None = None
    sm_clock_max_mhz: Annotated[float, Field(ge=0, le=10**6)] | None = None


class Gpus(Part):
    available: bool | None = None
    reason: str | None = None
    driver: str | None = None
    gpus: list[Gpu] = []


class OperatingSystem(Part):
    platform: str | None = None
    kernel: str | None = None
    system: str | None = None


class Python(Part):
    version: str | None = None
    implementation: str | None = None
    executable: str | None = None


class TorchDevice(Part):
    name: str | None = None
    capability: str | None = None


class Torch(Part):
    installed: bool | None = None
    version: str | None = None
    cuda_build: str | None = None
    cuda_available: bool | None = None
    cudnn: str | int | None = None
    devices: list[TorchDevice] = []


class Container(Part):
    """The image a containerised run ran in (harness/container/launcher.py passes these in its environment)."""

    in_container: bool | None = None
    image: str | None = None
    image_id: str | None = None
    image_digest: str | None = None
    layers: list[Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]] | None = None  # diff_ids, base first (v5)
    base: str | None = None  # Debian by mmdebstrap (and its lock's hash), or the registry image (v5)
    tensorrt: Literal["on", "off"] | None = None  # whether the image holds TensorRT's libraries (v5)


class MachineNoise(Part):
    """The machine's own noise floor (harness/run/machine_noise.py)."""

    compute_cv: Spread | None = None
    memory_cv: Spread | None = None
    warning: str | None = None
    method: str | None = None
    pinned_spread: Spread | None = None
    core_chunk_ms: dict[str, Annotated[float, Field(ge=0, le=1e9)]] | None = None
    cross_core_ns: Annotated[list[Annotated[float, Field(ge=0, le=1e9)]], Field(min_length=3, max_length=3)] | None = None


class System(Part):
    """The machine a run probed (harness/run/system.py)."""

    cpu: Cpu | None = None
    gpu: Gpus | None = None
    os: OperatingSystem | None = None
    python: Python | None = None
    torch: Torch | None = None
    container: Container | None = None
    packages: dict[str, str] | None = None
    machine_noise: MachineNoise | None = None
    peaks: dict[str, Any] | None = None


class Node(Part):
    """A machine a cell ran on, as the executor saw it (harness/run/executors.py `node_info`): a
    cell's `node`, and each machine of bundle.json's `nodes`. The schema keeps both loose dicts (an
    executor adds its own entries: the slot, Ray's ids), so a reader parses one with
    harness/bundle/record_base.py's `read_as`."""

    hostname: str | None = None
    executor: str | None = None
    cpu: Cpu | None = None
    gpus: list[str | None] = []  # the GPUs' names
    boot_id: str | None = None  # the machine's start (harness/run/system.py `boot_id`); absent before 2026-12-02


class Harness(Part):
    version: str
    git_sha: str | None = None
    git_dirty: bool | None = None


class BackendReport(Part):
    available: bool
    reason: str | None = None
    versions: dict[str, str] | None = None


class PlannedCell(Part):
    id: Annotated[str, Field(pattern=HEX16)]
    label: str


class RerunOf(Part):
    """The bundle a `fusionbench rerun` ran again (harness/run/rerun.py): its run, the scenario it
    stored (the rerun's own, so the same digest) and the SHA-256 of its MANIFEST.sha256, which names
    every file of it, so that `compare` says which copy of the run this one reran."""

    run_id: str
    created: str | None = None
    scenario_sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")]
    manifest_sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")] | None = None
    #: The value the rerun set for each variable its scenario's `env:` passes on from the shell, as
    #: the original's cells saw it (None: unset), which a `--resume` of the rerun sets again; absent
    #: where it set none, and in reruns before this field
    variables: dict[str, str | None] | None = None


class ModelPlugin(Part):
    """The package a plugin model came from (harness/models/plugins.py), and what it said of the
    model: a reader without the package expands the bundle's cells from it, and a rerun names it."""

    distribution: str
    version: str
    entry_point: str
    family: str
    input_kind: str
    input_size: Annotated[int, Field(ge=1, le=1_000_000)]
    #: the folder its module was imported from, which ran its cells (from 2026-12-07; absent before)
    code_folder: str | None = None


class Interruption(Part):
    """Why a run, or its last resume, ended `interrupted`, and what a `--resume` of it runs."""

    #: what stopped it, in one line: a Ctrl-C or a SIGTERM (the line its interrupted cells record),
    #: the time budget (`run --budget-s`), cells outside a resume's `--only`, a refusal once the
    #: bundle was made
    why: str
    #: the cells a `--resume` runs, as the run closed it: those with no result (no record, or
    #: interrupted) and those the time budget cut short of their rounds, which it times afresh
    resume_runs: list[Annotated[str, Field(pattern=HEX16)]]


class BundleHeader(Part):
    """`bundle.json`: what ran, on what, by which harness, and the cells it planned."""

    schema_version: Literal[12]  # harness/bundle/migrations.py SCHEMA_VERSION: a test holds them equal
    run_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,100}$")]
    created: str
    state: State
    harness: Harness
    command: list[str] | None = None
    scenario_file: str | None = None
    input_folder: str | None = None
    #: SHA-256 of what the cells read from the input folder (its labels file, then each image they
    #: read, name and bytes: harness/run/preflight.py `inputs_sha256`); None for synthetic inputs and
    #: in bundles before schema 10
    inputs_sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")] | None = None
    scenario: dict[str, Any]
    scenario_sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")]
    device: Literal["cpu", "cuda"]
    only: dict[str, Any] | None = None
    artifact_cache: str | None = None
    system: System
    backends: dict[str, BackendReport]
    cells: list[PlannedCell]
    resumed: list[str] | None = None
    #: When the run last closed the bundle (complete or interrupted): every cell it ran started
    #: before then; None while a run or a resume is under way, and in bundles before 2026-12-05
    ended: str | None = None
    executor: dict[str, Any] | None = None
    nodes: dict[str, Any] | None = None
    #: Whose rounds took turns (harness/run/rounds.py): "setting", every cell of one model and
    #: setting, so a backend's rounds pair with the baseline's; None (bundles before 2026-12-01):
    #: a fusion pair's alone
    rounds_paired: Literal["setting"] | None = None
    #: The bundle this run ran again (`fusionbench rerun`); absent in every other run's bundle, and
    #: in every bundle before 2026-12-06
    rerun_of: RerunOf | None = None
    #: Why the run ended `interrupted` and what `--resume` runs; None where it ended complete, while a
    #: run or a resume is under way, and in bundles before 2026-12-06 (which say nothing of why)
    interruption: Interruption | None = None
    #: Each plugin model the scenario names: the package and version it came from (the artifact
    #: cache's keys hold them too) and its description; absent where the scenario names none, and in
    #: every bundle before 2026-12-06
    model_plugins: dict[str, ModelPlugin] | None = None


def local_jobs(executor: object) -> int | None:
    """The cells a run ran at once (`--jobs`) as bundle.json's `executor` records its last start: a
    local executor's `jobs` (1 where it records none); None where it records no local executor (none
    at all, Ray's) or a `jobs` that is no whole number of 1 or more. Every reader of it reads it here."""
    if not isinstance(executor, dict) or executor.get("name") != "local":
        return None
    jobs = executor.get("jobs", 1)
    return jobs if isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1 else None


def problems(header: Any, where: str) -> list[str]:
    """Where `header` (upgraded to the current version) is not a `BundleHeader`."""
    return model_problems(BundleHeader, header, where)
