"""What Dynamo counted for a cell compiled through torch.compile: graphs, graph breaks and their
reasons, recompiles in the timed calls (harness/measure/dynamo_counts.py), and the record's laws
(harness/bundle/cell_record.py `Dynamo`). Compiled with Dynamo's `eager` backend: it counts graphs
and breaks as Inductor's compile does, without generating code."""

from __future__ import annotations

import sys
from typing import Any

import pydantic
import pytest

from harness.bundle.cell_record import BREAK_REASONS_KEPT, Dynamo, Metrics
from harness.measure import dynamo_counts
from harness.measure.trust import warnings

torch = pytest.importorskip("torch")


class _Breaks(torch.nn.Module):
    """Two graph breaks: a branch on a tensor's value (`.item()`) and a print."""

    def forward(self, x: Any) -> Any:
        x = x + 1
        if x.sum().item() > 0:
            x = x * 2
        print("", end="")
        return x.relu()


def test_a_model_broken_twice_records_three_graphs_two_breaks_and_each_reason_once() -> None:
    """The last session's note: graph breaks (the graph count only in a fusion report's source text)
    and recompiles were not recorded. A model Dynamo splits at a `.item()` branch and a print records
    3 graphs, 2 breaks, each reason on one line; a shape first met in the timed calls, 3 recompiles."""
    torch._dynamo.reset()
    readings = dynamo_counts.Readings()  # as a round reads them (harness/measure/phases.py)
    compiled = torch.compile(_Breaks(), backend="eager", dynamic=False)
    compiled(torch.ones(2, 3))
    compiled(torch.ones(2, 3))  # the compiled code holds: nothing compiled again
    found = readings.checked()
    assert found is not None
    record = Dynamo.model_validate(found)
    assert (record.graphs, record.graph_breaks, record.distinct_break_reasons, record.recompiles_timed) == (3, 2, 2, None)
    reasons = sorted(r.reason for r in record.break_reasons)
    assert [r.count for r in record.break_reasons] == [1, 1]
    assert "Tensor.item()" in reasons[1] and "print" in reasons[0], reasons
    assert all("\n" not in r and len(r) <= dynamo_counts.REASON_CHARS for r in reasons)
    readings.warmed_up()
    compiled(torch.ones(4, 3))  # another shape, dynamic=False: each of its three frames compiled again
    record = Dynamo.model_validate(readings.timed())
    assert (record.graphs, record.graph_breaks, record.recompiles_timed) == (3, 2, 3)
    metrics = Metrics(dynamo=record)
    assert any(w.startswith("recompiled: Dynamo compiled 3 frames again during the timed calls") for w in warnings(metrics))
    torch._dynamo.reset()


class _Branch(torch.nn.Module):
    """One graph break, at a branch on a tensor's value (Dynamo's generic_jump), the commonest."""

    def forward(self, x: Any) -> Any:
        x = x + 1
        if x.sum() > 0:
            x = x * 2
        return x.relu()


def test_a_branch_on_a_tensors_value_is_a_break_even_across_dynamos_reset() -> None:
    """torch's `graph_break` counter counts only the breaks at a call: this model recorded 2 graphs
    and 0 breaks. Dynamo's reset (Inductor's prepare calls it) between the readings loses none."""
    before = dynamo_counts.snapshot()
    torch._dynamo.reset()
    compiled = torch.compile(_Branch(), backend="eager", dynamic=False)
    compiled(torch.ones(2, 3))
    record = Dynamo.model_validate(dynamo_counts.record(before, dynamo_counts.snapshot()))
    assert (record.graphs, record.graph_breaks, record.distinct_break_reasons) == (2, 1, 1)
    assert record.break_reasons[0].reason == f"{dynamo_counts.JUMP} (generic_jump TensorVariable())"
    torch._dynamo.reset()


def test_a_cell_that_compiled_nothing_through_dynamo_records_nothing() -> None:
    torch._dynamo.reset()
    before = dynamo_counts.snapshot()
    torch.nn.ReLU()(torch.ones(2))
    assert dynamo_counts.record(before, dynamo_counts.snapshot()) is None


def test_a_torch_without_the_counters_records_why_never_a_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", None)  # an import of it raises ImportError
    missing = dynamo_counts.snapshot()
    assert isinstance(missing, str) and "torch._dynamo.utils.counters" in missing
    record = Dynamo.model_validate(dynamo_counts.record(missing, missing))
    assert record.absent == missing and record.graphs is None and record.graph_breaks is None


def test_counters_cleared_between_two_readings_make_the_figure_absent_not_negative() -> None:
    before, after = dynamo_counts.Snapshot(4, 5, ()), dynamo_counts.Snapshot(1, 2, ())
    cleared = Dynamo.model_validate(dynamo_counts.record(before, after))
    assert cleared.absent == dynamo_counts.CLEARED and cleared.graphs is None
    timed = Dynamo.model_validate(dynamo_counts.record(dynamo_counts.Snapshot(0, 0, ()), before, before, after))
    assert (timed.graphs, timed.recompiles_timed) == (4, None) and dynamo_counts.CLEARED in (timed.absent or "")


def test_a_reason_is_its_first_line_and_explanation_made_safe() -> None:
    text = dynamo_counts.reason_text("Unsupported call \x1b[31mred\u202e\n  Explanation: of `print`\n  Hint: more\n")
    assert text == "Unsupported call \\x1b[31mred\\u202e: of `print`"
    assert dynamo_counts.reason_text("x" * 500).endswith("...") and len(dynamo_counts.reason_text("x" * 500)) == 200


def _record(**changes: Any) -> dict[str, Any]:
    good: dict[str, Any] = {"graphs": 3, "graph_breaks": 2, "distinct_break_reasons": 2, "recompiles_timed": 0,
                            "break_reasons": [{"reason": "a", "count": 1}, {"reason": "b", "count": 1}], "method": "m"}
    return {**good, **changes}


@pytest.mark.parametrize(("changes", "refusal"), [
    ({"break_reasons": [{"reason": "a", "count": 1}]}, "lists 1 reasons of 2 distinct"),
    ({"break_reasons": [{"reason": "a", "count": 1}, {"reason": "a", "count": 1}]}, "a reason twice"),
    ({"break_reasons": [{"reason": "a", "count": 2}, {"reason": "b", "count": 1}]}, "count 3 breaks of 2"),
    ({"graph_breaks": 1, "break_reasons": [{"reason": "a", "count": 1}], "distinct_break_reasons": 2},
     "2 distinct break reasons for 1"),
    ({"graphs": None}, "need the reason (absent)"),
    ({"graph_breaks": -1}, "greater than or equal to 0"),
    ({"graphs": 2.5}, "integer"),
    ({"break_reasons": [{"reason": "a", "count": 0}, {"reason": "b", "count": 2}]}, "greater than or equal to 1"),
    # the report names the first reason as the most frequent
    ({"graph_breaks": 4, "break_reasons": [{"reason": "a", "count": 1}, {"reason": "b", "count": 3}]},
     "are not the most frequent first"),
    # the reasons left out are reasons: each gave a break, and none more than a kept one
    ({"graph_breaks": 10, "distinct_break_reasons": BREAK_REASONS_KEPT + 2,
      "break_reasons": [{"reason": str(i), "count": 2} for i in range(BREAK_REASONS_KEPT)]},
     "leaving 0 to 2 reasons left out, each with 1 to 2"),
    ({"graph_breaks": 20, "distinct_break_reasons": BREAK_REASONS_KEPT + 2,
      "break_reasons": [{"reason": str(i), "count": 1} for i in range(BREAK_REASONS_KEPT)]},
     "leaving 15 to 2 reasons left out, each with 1 to 1"),
    ({"distinct_break_reasons": None, "break_reasons": []}, "counted together"),
])
def test_a_record_whose_reasons_are_not_its_breaks_is_refused(changes: dict[str, Any], refusal: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        Dynamo.model_validate(_record(**changes))


def test_graphs_and_breaks_hold_no_law_between_them_and_reasons_past_the_kept_are_left_out() -> None:
    """A frame compiled again adds graphs and no break (5 graphs, 0 breaks); a break before any operator
    compiles no graph (1 graph, 3 breaks); reasons past the kept ones take the breaks the kept leave, each
    at least one and at most as many as the least frequent kept."""
    Dynamo.model_validate(_record(graphs=5, graph_breaks=0, distinct_break_reasons=0, break_reasons=[]))
    Dynamo.model_validate(_record(graphs=1, graph_breaks=3, distinct_break_reasons=1, break_reasons=[{"reason": "a", "count": 3}]))
    kept = [{"reason": str(i), "count": 1} for i in range(BREAK_REASONS_KEPT)]
    Dynamo.model_validate(_record(graph_breaks=7, distinct_break_reasons=BREAK_REASONS_KEPT + 2, break_reasons=kept))
    twice = [{"reason": str(i), "count": 2} for i in range(BREAK_REASONS_KEPT)]
    Dynamo.model_validate(_record(graph_breaks=13, distinct_break_reasons=BREAK_REASONS_KEPT + 2, break_reasons=twice))
