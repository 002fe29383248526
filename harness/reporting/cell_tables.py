"""The report's tables of one line per cell: LoadGen validity at a glance, every cell's figures, the
time split, LoadGen against device timing (one latency truth), warnings, the roofline and the cells
that were skipped, failed or invalid; each a head and rows of plain text, with its note."""

from __future__ import annotations

from harness import metric_table
from harness.bundle.reader import LoadedBundle
from harness.bundle.timing_record import Roofline
from harness.metric_table import format_value
from harness.plain_text import one_line
from harness.reporting.cell_rows import Row, missing_shown, valid_rows
from harness.reporting.plots import Series

ROOFLINE_NOTE = (
    "Bound: the least time one batch could take at the device's measured peaks (the run's probe, shown beside "
    "each cell), max(FLOPs / peak FLOP/s, compulsory bytes / peak bytes/s); measured: the cell's median batch "
    "time, over its rounds where it has several, as the fusion tables give it; fraction of bound = bound / "
    "measured (1 is the roofline). A fraction above 1 (marked *above roof*) means the cell beat a measured peak: "
    "the copy peak is main memory's, and a small working set stays in cache between batches; on GPU, TF32 "
    "convolutions beat the fp32 matmul peak; and the peaks are probed once, as the run starts, so a probe that "
    "met other work reads them low. The kernel floor is 1: one kernel could run the whole model."
)


TIME_SPLIT_NOTE = (
    "Per batch: the time inside kernels (GPU: the union of the CUDA kernels' intervals; CPU: the backend's own "
    "profiler) against the device-timing median, the profile's split (round 1's) applied to the cell's time over "
    "its rounds as the other tables give it; the rest is launch and host overhead on a GPU, dispatch overhead "
    "on a CPU. Compare fusion on and off, and graphs on and off, of one backend: fewer launches shrink the "
    "overhead, less memory traffic shrinks the kernels (docs/metrics.md)."
)


AGREEMENT_NOTE = (
    "LoadGen's figure per batch (SingleStream and MultiStream: median query latency, against the device-timing "
    "median; Offline: batch / samples per second, a mean, against the device-timing mean) of the same cell; beyond "
    "5% the cell says why. Offline on a GPU "
    "keeps batches in flight and may beat the sequential timing. Server is not compared (queueing)."
)


def validity_grid(loaded: LoadedBundle, rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    settings = list(dict.fromkeys(r.setting for r in rows))
    lines = list(dict.fromkeys(f"{r.model} · {r.variant}" for r in rows))
    grid = {(f"{r.model} · {r.variant}", r.setting): r.status for r in rows}
    body = [[line, *[grid.get((line, s), "") for s in settings]] for line in lines]
    columns = settings or ["status"]  # no cell recorded (a run stopped by its budget): the missing row's own column
    for label in missing_shown(loaded):  # listed, never recorded: each named, as --resume will run it
        body.append([f"{label} (listed)", "not run", *[""] * (len(columns) - 1)])
    return ["model · variant", *columns], body


def cells_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """Every cell's figures, under the labels and in the words of the console summary."""
    columns = metric_table.present(metric_table.REPORT_CELLS, [r.record for r in rows])
    head = ["model", "backend / variant", "setting", "status", "math", *(metric_table.label(c) for c in columns),
            "fusions"]
    body = [[r.model, r.variant, r.setting, r.status, r.metrics.math_mode.effective if r.metrics.math_mode else "-",
             *(r.figure(c) for c in columns),
             str(r.metrics.fusion_report.fusion_count) if r.metrics.fusion_report else "-"] for r in rows]
    return head, body


def problems(rows: list[Row]) -> list[list[str]]:
    return [[r.model, r.variant, r.setting, r.status, "; ".join(map(one_line, r.record.reasons))]
            for r in rows if r.status != "valid"]


def warnings_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["model", "backend / variant", "setting", "warning"]
    return head, [[r.model, r.variant, r.setting, w] for r in rows for w in r.record.warnings]


def agreement_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """LoadGen's figure against the device timing, per measured cell (one latency truth)."""
    head = ["model", "backend / variant", "setting", "LoadGen per batch", "device timing", "gap", "why"]
    body = []
    for r in rows:
        agreement = r.metrics.latency_agreement
        if agreement is None:
            continue
        device = agreement.device_ns_per_batch
        body.append([r.model, r.variant, r.setting, format_value(agreement.loadgen_ns_per_batch, "ns"),
                     "-" if device is None else f"{format_value(device, 'ns')} ({agreement.device_statistic})",
                     r.figure("latency_gap"), agreement.why or ("within the limit" if agreement.within else "")])
    return head, body


def time_split_series(rows: list[Row], backend: str) -> tuple[list[str], list[Series]]:
    """Per valid cell of `backend` with a measured split: kernel time and the rest, in ms, round 1's split
    applied to the cell's time over its rounds (`Row.over_round_one`), as every other table gives it: as
    recorded, a round 1 the machine slowed put eager's shufflenet_v2 at 216 ms in kernels here where the
    speedup table's kernel time by class, over its two rounds, gave it 116 ms."""
    split = [(r, t.kernel_ns * r.over_round_one, t.overhead_ns * r.over_round_one) for r in valid_rows(rows)
             if r.backend == backend for t in (r.metrics.time_split,)
             if t is not None and t.kernel_ns is not None and t.overhead_ns is not None]
    groups = [f"{r.model} {r.variant.removeprefix(backend + ' ')} {r.setting}" for r, _, _ in split]
    return groups, [Series("in kernels", tuple((kernel or 0) / 1e6 for _, kernel, _ in split)),
                    Series("overhead (dispatch, launch, host)", tuple((rest or 0) / 1e6 for _, _, rest in split))]


def roofline_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """Each valid cell's costs, bound and how close it came. Its time is the cell's time over its rounds
    (`Row.time_ns`), as every other table of the report gives it: the record's `fraction_of_bound` is
    round 1's alone, and a round 1 the machine slowed set a fusion pair's sides 1.6x apart here where
    their rounds put them 7% apart (BERT base on ONNX Runtime, 134 against 82.3 ms in round 1)."""
    head = ["model", "backend / variant", "setting", "FLOP/batch", "compulsory bytes", "peaks", "bound", "bound by",
            "measured", "fraction of bound", "kernels/inf (floor 1)"]
    body = []
    for r in valid_rows(rows):
        roof = r.metrics.roofline
        if roof is None:
            continue
        fraction = roof.time_bound_ns / r.time_ns if roof.time_bound_ns and r.time_ns else roof.fraction_of_bound
        # Three figures under the decimal prefix that fits, as the peaks they are divided by: in GFLOP
        # with two decimals, resnet18 at input 32 (75.0 MFLOP) read 0.08, and mobilenet_v3_small 0.00637.
        body.append([r.model, r.variant, r.setting, metric_table.format_si(roof.flops, "FLOP"),
                     metric_table.format_si(roof.compulsory_bytes, "B"),
                     _peaks(roof), format_value(roof.time_bound_ns, "ns"), roof.bound_by or "-",
                     format_value(r.time_ns, "ns"), fmt_fraction(fraction), r.figure("kernels_per_inference")])
    return head, body


def _peaks(roof: Roofline) -> str:
    """The probe's peaks a cell's bound was taken at: `159 GFLOP/s, 55.6 GB/s`, an H200's `50.5 TFLOP/s,
    4.06 TB/s` (never an exponent)."""
    flops = metric_table.format_si(roof.peak_flops_per_s, "FLOP/s") if roof.peak_flops_per_s else None
    copy = metric_table.format_si(roof.peak_bytes_per_s, "B/s") if roof.peak_bytes_per_s else None
    return ", ".join(part for part in (flops, copy) if part) or "-"


def fmt_fraction(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    return f"{fraction:.3f} above roof" if fraction > 1 else f"{fraction:.3f}"
