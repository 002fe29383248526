"""A bundle's cells as the report reads them: one `Row` per cell, with the figures the report shows
(its typed record, its start, its time over rounds: the device-timing median per batch, docs/metrics.md),
and how the bundle's rounds were taken.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness import metric_table
from harness.bundle.cell_record import CellRecord, Metrics
from harness.bundle.reader import LoadedBundle, lookup
from harness.metric_table import format_value
from harness.scenario.cell_config import CellConfig
from harness.stats.intervals import Interval, median_interval
from harness.stats.summary import median

if TYPE_CHECKING:
    from harness.scenario.cells import Cell


@dataclass(frozen=True)
class Row:
    """The figures of one cell that the report uses, read from its typed record, and its start: 0 where
    it ran in the run's first start, i in its i-th `--resume` (`rows_of`); None where its record does
    not say when it started."""

    record: CellRecord
    start: int | None = None

    @property
    def config(self) -> CellConfig:
        return self.record.config

    @property
    def metrics(self) -> Metrics:
        return self.record.metrics

    @property
    def model(self) -> str:
        return self.config.model.name

    @property
    def backend(self) -> str:
        return self.config.backend

    @property
    def fusion(self) -> str:
        return self.config.variant.fusion

    @property
    def graphs(self) -> str:
        return self.config.variant.graphs

    @property
    def options(self) -> str:
        """The backend's options as the tables show them: ` key=value` each, sorted."""
        return self.config.options_label

    @property
    def variant(self) -> str:
        return f"{self.config.variant_label}{self.options}"

    @property
    def setting(self) -> str:
        """What makes two cells of different backends comparable: scenario, batch, dtype, device, and
        the input size where it is not the model's own (`input 32`) and pretrained weights where the cell
        loaded them, so no two settings read alike."""
        return setting_of(self.config)

    @property
    def pair_key(self) -> str:
        """The same for two cells that differ in fusion alone: their whole config, fusion aside."""
        config = self.config
        either = config.model_copy(update={"variant": config.variant.model_copy(update={"fusion": "on"})})
        return json.dumps(either.recorded(), sort_keys=True)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def median_ns(self) -> float | None:
        timing = self.metrics.device_time
        return timing.summary.median_ns if timing is not None and timing.summary.median_ns > 0 else None

    @property
    def round_medians(self) -> dict[int, float]:
        """The device-time median of each valid round (harness/run/rounds.py) by round number; a cell
        of one round (or of a bundle from before rounds) has its own median as round 1."""
        rounds = self.metrics.rounds
        if not rounds:
            return {1: self.median_ns} if self.median_ns is not None else {}
        return {r.round: r.median_ns for r in rounds
                if r.status == "valid" and r.median_ns is not None and math.isfinite(r.median_ns) and r.median_ns > 0}

    @property
    def over_rounds(self) -> tuple[float, Interval] | None:
        """The median of the valid rounds' medians and that median's order-statistics interval
        (harness/stats/intervals.py), where two or more rounds are valid; else None."""
        values = list(self.round_medians.values())
        if len(values) < 2:
            return None
        return median(values), median_interval(values)

    @property
    def time_ns(self) -> float | None:
        """The cell's device time as the tables show it: the median over its valid rounds where it has
        two or more, else its median (`fmt_time_over_rounds`)."""
        over = self.over_rounds
        return over[0] if over is not None else self.median_ns

    @property
    def over_round_one(self) -> float:
        """The cell's time over its rounds over its round 1 median (1 with one round, or with no median):
        what the profile's figures, taken in round 1 and applied to its median, are multiplied by to
        stand beside `time_ns`, as every table gives the cell's time."""
        return self.time_ns / self.median_ns if self.time_ns and self.median_ns else 1.0

    @property
    def checked_against_eager(self) -> bool:
        """Whether the cell's output was compared with eager's: only then does it compute the same
        thing, and only then is its speed a speedup (a backend that computes nothing is not)."""
        return self.metrics.correctness is not None and self.metrics.correctness.max_abs_error is not None

    @property
    def kernels(self) -> float | None:
        return metric_table.value("kernels_per_inference", self.record)

    def figure(self, column: str | tuple[str, ...]) -> str:
        """A figure of the cell as every table shows it (harness/metric_table.py)."""
        return metric_table.figure(column, self.record)


def setting_of(config: CellConfig) -> str:
    """`Row.setting` of a cell of this config, recorded or not."""
    return f"{config.scenario} b{config.batch} {config.dtype} {config.device}{config.model_detail}"


def missing_shown(loaded: LoadedBundle) -> list[str]:
    """A label for each cell bundle.json lists with no record, as the run showed it: the shown label
    (its input size where not the model's own, its options) of the cell its stored scenario expands
    to under its id, else the label it was planned with. Two cells of one model at two input sizes
    had the same planned label."""
    shown = {cell.id: cell.config.shown_label for cell in _expanded(loaded)}
    return [shown.get(cell, label) for cell, label in zip(loaded.missing, loaded.missing_labels, strict=True)]


def planned_configs(loaded: LoadedBundle) -> list[CellConfig]:
    """The configs of the cells bundle.json lists with no record (a run interrupted or stopped by its
    budget before them): those its stored scenario expands to under their ids or planned labels, so a
    page can say they were not run rather than leave them out. [] where it expands to none of them."""
    ids, labels = set(loaded.missing), set(loaded.missing_labels)  # ids of schema 7 and before hashed the rounds
    return [cell.config for cell in _expanded(loaded) if cell.id in ids or cell.config.label in labels]


def _expanded(loaded: LoadedBundle) -> list[Cell]:
    """The cells the bundle's stored scenario expands to, where cells are missing ([] where none is,
    or where it does not expand)."""
    if not loaded.missing:
        return []
    from harness.scenario.cells import expand  # the zoo's list: read only where cells are missing

    try:
        return expand(loaded.header["scenario"], str(loaded.header["device"]), loaded.model_plugins)
    except (LookupError, TypeError, AttributeError, ValueError):
        return []


def valid_rows(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status == "valid" and r.median_ns is not None]


def rows_of(records: list[CellRecord], resumed: list[Any] | None) -> list[Row]:
    """A row for each cell, with its start: its record's `started` against the times the run was
    resumed (bundle.json's `resumed`, as the header holds it). A resume runs the cells left, apart
    from those finished before it, so the rounds of two cells paired only where both ran in one start."""
    times = [str(when) for when in resumed or []]
    return [Row(record, None if record.started is None else sum(1 for when in times if when <= record.started))
            for record in records]


def bundle_rows(loaded: LoadedBundle) -> list[Row]:
    """`rows_of` a bundle's cells."""
    return rows_of(loaded.records, lookup(loaded.header, "resumed"))


def setting_paired(loaded: LoadedBundle) -> bool:
    """Whether the rounds of every cell of one setting took turns (bundle.json's `rounds_paired`: a
    run of one cell at a time since 2026-12-01); before, only a fusion pair's did, and `--jobs` above 1
    and Ray fill the time between one cell's rounds with other cells."""
    return bool(lookup(loaded.header, "rounds_paired") == "setting")


def fmt_time_over_rounds(row: Row) -> str:
    """A cell's device time: the median over its rounds with its interval and the coverage that
    interval has (`4.95 ms [4.90-5.10, 75%] over 3 rounds`), or its one median."""
    over = row.over_rounds
    if over is None:
        return format_value(row.median_ns, "ns")
    middle, interval = over
    return (f"{format_value(middle, 'ns')} [{format_value(interval.low, 'ns')}-{format_value(interval.high, 'ns')}, "
            f"{interval.coverage:.0%}] over {len(row.round_medians)} rounds")
