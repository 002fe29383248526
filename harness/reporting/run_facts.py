"""The facts a report states about a run, apart from its cells' figures: where it ran (the CPU and
GPUs; a run spread over several machines said out loud), the libraries its cells ran on, the
packages its plugins' models came from, the harness that ran them, how its cells ended, and the machine's own noise floor."""

from __future__ import annotations

from typing import Any, TypeGuard

from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import BundleHeader, Cpu, Gpus, Node
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.record_base import read_as
from harness.bundle.statuses import FINISHED
from harness.metric_table import format_per_core, format_ratio, format_si, format_times, si_scale
from harness.plain_text import one_line, visible


def library_versions(loaded: LoadedBundle) -> dict[str, str]:
    """The libraries the cells ran on, as each cell's backend reported them, and LoadGen's; a
    library whose cells ran on several versions has them all, said so (the last cell's alone hid it)."""
    seen: dict[str, dict[str, None]] = {}
    for record in loaded.records:
        reported = record.environment.get("backend_versions")
        if isinstance(reported, dict):
            for name, version in reported.items():
                seen.setdefault(str(name), {})[str(version)] = None
    versions = {name: " and ".join(found) + (" (its cells differ)" if len(found) > 1 else "")
                for name, found in seen.items()}
    packages = loaded.header_record.system.packages or {}  # by distribution name
    if "mlcommons-loadgen" in packages:
        versions["mlcommons-loadgen"] = packages["mlcommons-loadgen"]
    return versions


def facts(loaded: LoadedBundle) -> list[tuple[str, str]]:
    h = loaded.header_record
    cpu, gpus = h.system.cpu or Cpu(), (h.system.gpu or Gpus()).gpus
    libraries = ", ".join(f"{name} {version}" for name, version in sorted(library_versions(loaded).items()))
    counts: dict[str, int] = {}
    for record in loaded.records:
        counts[record.status] = counts.get(record.status, 0) + 1
    if loaded.missing:
        counts["not run"] = len(loaded.missing)
    harness = h.harness
    return [
        ("run", f"{loaded.name} ({h.created}), state {h.state}"),
        *([("interrupted", interruption(loaded))] if h.state == "interrupted" else []),
        ("scenario file", str(h.scenario_file)),
        ("LoadGen profile", loadgen_profile(loaded.header)),
        ("device", h.device),
        ("CPU", f"{cpu.model}, {cpu.logical_cores} logical cores"
                + (f" ({cpu.identity})" if cpu.identity else "")
                + (f"; vector extensions {' '.join(cpu.vector_extensions) or 'none'}" if cpu.vector_extensions is not None
                   else "")),
        ("GPU", ", ".join(str(g.name) for g in gpus) or "none"),
        ("libraries", libraries or "-"),
        *([("plugin models", plugin_models(h))] if h.model_plugins else []),
        ("harness", f"{harness.version} {harness.git_sha or ''}{' (dirty)' if harness.git_dirty else ''}"),
        ("cells", ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"),
        ("schema", f"written as version {loaded.version}"),
        # As recorded: the typed record would read a `true` where a figure belongs as 1.0; this says "not measured".
        ("machine noise", machine_noise(lookup(loaded.header, "system", "machine_noise"))),
        ("peaks (roofline)", peaks(lookup(loaded.header, "system", "peaks"))),
        *([("machines", spread)] if (spread := machines(h.nodes)) else []),
    ]


def plugin_models(header: BundleHeader) -> str:
    """Each model of a plugin the run ran, and the package and version it came from (bundle.json
    `model_plugins`): its code is the model, as a library's is a backend's."""
    return ", ".join(f"{name} from {entry.distribution} {entry.version} ({entry.entry_point})"
                     for name, entry in sorted((header.model_plugins or {}).items()))


def interruption(loaded: LoadedBundle) -> str:
    """Why an interrupted run stopped and what `--resume` runs, as bundle.json records them (a bundle
    before 2026-12-06 records neither: its cells with no result are counted, and why is said unknown)."""
    recorded = loaded.header_record.interruption
    finished = {record.id for record in loaded.records if record.status in FINISHED}
    if recorded is None:
        no_result = len(loaded.missing) + sum(1 for record in loaded.records if record.status not in FINISHED)
        if loaded.version != SCHEMA_VERSION:  # --resume refuses it: it would mix versions in one bundle
            return (f"why not recorded (bundles before 2026-12-06 keep no reason); {no_result} cell(s) with no result, "
                    f"which --resume will not run in a bundle of schema {loaded.version} (this harness writes "
                    f"{SCHEMA_VERSION}): `fusionbench rerun` runs its cells again in a bundle of its own")
        return (f"why not recorded (bundles before 2026-12-06 keep no reason); --resume runs the {no_result} cell(s) "
                "with no result, and times afresh any the time budget cut short of their rounds")
    if not recorded.resume_runs:  # stopped after its last cell's result, before the bundle was closed
        return f"{one_line(recorded.why)}; every cell has its result: --resume runs none, and closes the bundle complete"
    cut = sum(1 for cell in recorded.resume_runs if cell in finished)
    said = [f"{len(recorded.resume_runs) - cut} with no result"] + (
        [f"{cut} cut short of their rounds by the time budget, timed afresh, every round"] if cut else [])
    return (f"{one_line(recorded.why)}; --resume runs {len(recorded.resume_runs)} cell(s): "
            + ", ".join(said))


def loadgen_profile(header: dict[str, Any]) -> str:
    """The LoadGen profile the run's file asked for, in words: `dev` (short, not for submission), or
    `mlperf` with the settings it overrode (then not an official run), as pack and its README say."""
    profile = lookup(header, "scenario", "loadgen", "profile")
    if profile is None:
        return "not recorded"
    if profile != "mlperf":
        return f"{profile}: the harness's own short settings, not MLPerf's (pack takes no cell of it)"
    overrides = lookup(header, "scenario", "loadgen", "overrides")
    if isinstance(overrides, dict) and overrides:
        said = ", ".join(f"{key} {value}" for key, value in sorted(overrides.items()))
        return f"mlperf, overriding mlperf.conf's {said}: not an official run"
    return "mlperf: MLPerf's official settings (mlperf.conf)"


def hardware(node: Node | None) -> str | None:
    """A cell's machine as the executor recorded it (CPU model and cores, GPUs), or None."""
    if node is None or node.cpu is None:
        return None
    gpus = ", ".join(str(g) for g in node.gpus) or "no GPU"
    return f"{node.cpu.model} x{node.cpu.logical_cores}, {gpus}"


def share(cores: int | None, usable: int | None = None, logical: int | None = None,
          quota: float | None = None) -> str:
    """A share of the machine in words: a slot of `cores` cores; else (None) the whole machine, or
    the `usable` of its `logical` CPUs the process was bound to where those are fewer (a cpuset
    container, taskset, a batch scheduler's allocation), under a cgroup `quota` of CPUs' worth where
    that is less than they are (`docker --cpus`, a Kubernetes limit)."""
    if cores:
        return f"a slot of {cores} core(s)"
    bound = usable and logical and usable < logical
    words = f"{usable} of the machine's {logical} CPUs" if bound else "the whole machine"
    if quota is not None and quota < (usable or logical or float("inf")):
        words += f" under a CPU quota of {quota:g}"
    return words


def quota_recorded(cell: CellRecord) -> bool:
    """Whether the cell's record says its cgroup's CPU quota, none included (cells from before
    2026-12-04 do not: their quota is unknown, not absent)."""
    return isinstance(cell.environment, dict) and "cpu_quota" in cell.environment


def machine_share(cell: CellRecord, with_quota: bool = True) -> str:
    """The cores a cell had: its slot's (`--jobs`, or the ones a Ray task claimed), else those its
    worker was bound to (`environment.cpu_affinity`) against the machine's and, `with_quota`, its
    cgroup's CPU quota (`environment.cpu_quota`), or the whole machine. Two cells are held to the
    quota only where both recorded it (`quota_recorded`)."""
    node = cell.node if isinstance(cell.node, dict) else {}
    environment = cell.environment if isinstance(cell.environment, dict) else {}
    slot, cpu = node.get("slot"), node.get("cpu")
    cpus = slot.get("cpus") if isinstance(slot, dict) else None
    affinity, quota = environment.get("cpu_affinity"), environment.get("cpu_quota")
    logical = cpu.get("logical_cores") if isinstance(cpu, dict) else None
    held = (float(quota) if with_quota and isinstance(quota, (int, float)) and not isinstance(quota, bool)
            and 0 < quota < 1e9 else None)  # not NaN, inf, or an integer float() overflows on (10**400)
    return share(len(cpus) if isinstance(cpus, list) else None, len(affinity) if isinstance(affinity, list) else None,
                 logical if isinstance(logical, int) and not isinstance(logical, bool) else None, held)


def ran_on(cell: CellRecord) -> tuple[str | None, str]:
    """Where a cell ran, as two cells must share it for their times to be set side by side: the
    machine's hardware and the share of it the cell had."""
    return hardware(read_as(Node, cell.node)), machine_share(cell)


def apart(a: CellRecord, b: CellRecord) -> str:
    """Why two cells of one bundle ran where their times cannot be set side by side (another share of
    the machine, other hardware where both recorded theirs, or two starts of the machine), in words;
    empty where they can."""
    (hardware_a, share_a), (hardware_b, share_b) = ran_on(a), ran_on(b)
    if share_a != share_b:
        return f"one ran on {share_a}, the other on {share_b}"
    if hardware_a is not None and hardware_b is not None and hardware_a != hardware_b:
        return f"one ran on {hardware_a}, the other on {hardware_b}"
    node_a, node_b = read_as(Node, a.node), read_as(Node, b.node)
    cpus = other_cpus(node_a, node_b)
    if cpus is not None:
        return f"one ran on {cpus[0]}, the other on {cpus[1]}"
    return other_boots(node_a, node_b)


def machines_apart(a: Node | None, b: Node | None) -> tuple[str, str] | None:
    """Each side's hardware in words (a's, b's) where the two ran on different hardware: another CPU
    or GPU model (`hardware`), or one CPU name over two generations or vector extensions
    (`other_cpus`); else None. What compare sets cells apart by (harness/reporting/pairing.py) and
    what a rerun warns of before it runs (harness/run/rerun_original.py)."""
    where_a, where_b = hardware(a), hardware(b)
    if where_a and where_b and where_a != where_b:
        return where_a, where_b
    return other_cpus(a, b)


def other_cpus(a: Node | None, b: Node | None) -> tuple[str, str] | None:
    """Each side's CPU in words where the two differ in what one model name hides (a VM's "AMD EPYC"
    of two generations, or one that hides vector extensions the other offers); None where they do
    not or cannot tell: identity and extensions are compared only where both sides recorded them
    (cells since 2026-12-04), so a run resumed across that date keeps its pairs."""
    cpu_a, cpu_b = (node.cpu if node is not None else None for node in (a, b))
    if cpu_a is None or cpu_b is None:
        return None
    if cpu_a.identity and cpu_b.identity and cpu_a.identity != cpu_b.identity:
        return f"a CPU of {visible(cpu_a.identity)}", f"a CPU of {visible(cpu_b.identity)}"
    extensions_a, extensions_b = cpu_a.vector_extensions, cpu_b.vector_extensions
    if extensions_a is not None and extensions_b is not None and set(extensions_a) != set(extensions_b):
        said_a, said_b = (visible(" ".join(sorted(e))) or "none" for e in (extensions_a, extensions_b))
        return f"a CPU with the vector extensions {said_a}", f"a CPU with the vector extensions {said_b}"
    return None


def other_boots(a: Node | None, b: Node | None) -> str:
    """Why two cells ran on two starts of the machine (both recorded their `boot_id`, and they
    differ), in words; empty where they did not or cannot tell. A resume after a restart, or on
    another machine of the same kind, ran its cells there: a VM started again was 1.75 times slower
    on the same models (docs/metrics.md), a change no interval over rounds sees. Cells of a Ray run
    on two of its machines are left to the hardware's check, as before (`machines`)."""
    if a is None or b is None or not a.boot_id or not b.boot_id or a.boot_id == b.boot_id:
        return ""
    if a.executor == b.executor == "ray" and a.hostname != b.hostname:
        return ""
    return (f"they ran on two starts of the machine (boot {a.boot_id[:8]} and {b.boot_id[:8]}): a resume after a "
            "restart, or on another machine of its kind; run them again in one start (--only)")


def machines(nodes: dict[str, Any] | None) -> str:
    """The machines of a run spread over several (Ray; bundle.json's `nodes`, by hostname), said
    out loud: its figures pair cells across them only where the hardware is the same."""
    nodes = nodes or {}
    if len(nodes) < 2:
        return ""
    typed = [read_as(Node, raw) for raw in nodes.values()]
    kinds: list[Node | None] = []  # one machine of each kind: the same hardware, and no CPU that `other_cpus` tells apart
    for node in typed:
        if not any(hardware(kind) == hardware(node) and other_cpus(kind, node) is None for kind in kinds):
            kinds.append(node)
    spread = f"{len(nodes)} machines ({', '.join(sorted(map(str, nodes)))})"
    if len(kinds) > 1:
        return f"{spread} of {len(kinds)} different kinds: each cell's `node` says where it ran; compare them with care"
    # The CPU's identity (what one model name hides) is said where every machine recorded it.
    identities = {node.cpu.identity if node is not None and node.cpu is not None else None for node in typed}
    identity = next(iter(identities)) if len(identities) == 1 else None
    return f"{spread}, all {hardware(kinds[0])}" + (f" ({visible(identity)})" if identity else "")


def peaks(probed: Any) -> str:
    """The probe's peaks the roofline's bounds were taken at (each the best of its runs), with the
    lowest and the median of its runs where recorded: a best far above them says the probe met other
    work, and a low best alike reads every cell of the run closer to its roof."""
    if not isinstance(probed, dict):
        return "not measured"
    if probed.get("error"):
        return f"not measured: {one_line(str(probed['error']))}"
    flops = probed.get("flops_per_s")
    rates = [(f"{visible(str(dtype))} matmul", dtype, rate, "FLOP/s") for dtype, rate in
             sorted(flops.items() if isinstance(flops, dict) else [], key=lambda item: str(item[0]))]
    parts = []
    for name, key, best, unit in [*rates, ("copy", "copy", probed.get("bytes_per_s"), "B/s")]:
        if not _number(best) or best <= 0:
            continue
        text = f"{name} {format_si(best, unit)}"  # an H200's 50.5 TFLOP/s, never 5.05e+04 GFLOP/s
        runs = lookup(probed, "spread", key)
        if isinstance(runs, dict) and _number(runs.get("min")) and _number(runs.get("median")):
            scale, _ = si_scale(best)  # the runs in the best's unit, which the line names once
            text += f" (its runs' lowest {format_ratio(runs['min'] / scale)}, median {format_ratio(runs['median'] / scale)})"
        parts.append(text)
    return "; ".join(parts) or "not measured"


def _number(value: Any) -> TypeGuard[int | float]:
    """A figure as a bundle holds one: an int or a float, never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def machine_noise(noise: Any) -> str:
    compute, memory = lookup(noise, "compute_cv"), lookup(noise, "memory_cv")
    if not all(_number(cv) for cv in (compute, memory)):
        return "not measured"
    text = (f"a fixed compute loop's CV {compute:.1%}, a memory-bound one's {memory:.1%} "
            "(the floor no figure of this run can go below)")
    spread = lookup(noise, "pinned_spread")
    if _number(spread):
        text += f"; pinned to each core in turn, its chunks span {format_times(spread)} (10th to 90th percentile)"
    cross = lookup(noise, "cross_core_ns")
    if isinstance(cross, list) and len(cross) == 3 and all(_number(ns) for ns in cross):
        text += f"; a round trip between two cores {cross[0]:.0f} / {cross[1]:.0f} / {cross[2]:.0f} ns (10th / 50th / 90th)"
    if not lookup(noise, "warning"):
        return text
    # The run's warning says these figures again in other words (the console's line): said once here.
    text += "; beyond a steady machine's, as the run warned: no figure measured here can be steadier"
    cores = lookup(noise, "core_chunk_ms")
    if isinstance(cores, dict) and cores and all(_number(ms) for ms in cores.values()):
        text += "; median chunk by core: " + format_per_core(cores)
    return text
