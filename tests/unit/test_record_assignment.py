"""A cell record's figures are set as validated (harness/bundle/record_base.py `Record`): a refused
value leaves the record as it was, and a name the record does not declare is refused."""

from __future__ import annotations

import pydantic
import pytest

from harness.bundle.cell_record import Metrics
from harness.measure.protocol import WorkerAnswer


def test_a_figure_its_record_refuses_leaves_the_record_writable_with_what_was_measured() -> None:
    """A derived figure that disagreed with its sources was kept though refused: the worker's answer
    could then not be read, and the cell came back with no figure at all."""
    answer = WorkerAnswer(metrics=Metrics(first_call_s=0.01, prepare_s=2.0))
    with pytest.raises(pydantic.ValidationError, match="first_call_ratio without"):
        answer.metrics.first_call_ratio = 5.0  # no device-time median to derive it from
    with pytest.raises(pydantic.ValidationError):
        answer.metrics.prepare_s = -1.0  # a field's own check: refused before it was stored, as before
    assert answer.metrics.first_call_ratio is None and answer.metrics.prepare_s == 2.0
    read = WorkerAnswer.from_json(answer.to_json())
    assert read.metrics.recorded() == {"first_call_s": 0.01, "prepare_s": 2.0}


def test_a_name_the_record_does_not_declare_is_refused_on_assignment() -> None:
    """It was kept as an extra field: the figure looked recorded, and no check read it."""
    metrics = Metrics()
    with pytest.raises(AttributeError, match="Metrics has no field 'achieved_flops_per_s'"):
        metrics.achieved_flops_per_s = 1e9  # type: ignore[attr-defined]
    assert metrics.recorded() == {}
    newer = Metrics.model_validate({"a_newer_harness_figure": 1})  # read from a bundle: kept, as documented
    assert newer.recorded() == {"a_newer_harness_figure": 1}
