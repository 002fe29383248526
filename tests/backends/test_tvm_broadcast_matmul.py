"""backends/tvm_broadcast_matmul.py: a matmul's batch-only broadcast operand given unbroadcast, and
nothing else; on nn.MultiheadAttention at batch 2, the pattern that took vit_b_16's batch-8 compile
out of memory."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from backends.tvm_broadcast_matmul import _broadcast_batch, _needless

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402  (after the skip)

from backends.tvm import TVMBackend, _imported  # noqa: E402
from harness.measure.correctness import compare  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _tvm() -> None:
    """Skips the module where apache-tvm is not installed; imported as its first test runs, not at
    collection, which every pytest-xdist worker makes (tests/backends/test_tvm.py says why)."""
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")


def _shaped(*dims: int, args: list[Any] | None = None) -> Any:
    """An expression as `_needless` reads it: a type with a static shape, and a call's arguments."""
    return SimpleNamespace(ty=SimpleNamespace(shape=SimpleNamespace(values=[SimpleNamespace(value=d) for d in dims])),
                           args=args or [])


@pytest.mark.parametrize(("left", "right", "batch"), [
    ((197, 2, 768), (768, 2304), (197,)),
    ((197, 2, 768), (197, 768, 2304), (197,)),
    ((4, 1, 3, 5), (7, 5, 6), (4, 7)),
    ((3, 5), (5, 6), ()),
    ((2, 3, 5), (4, 5, 6), None),
])
def test_batch_dimensions_broadcast_as_numpy_does(left: tuple[int, ...], right: tuple[int, ...],
                                                  batch: tuple[int, ...] | None) -> None:
    assert _broadcast_batch(left, right) == batch


def test_a_weight_broadcast_along_the_batch_is_needless() -> None:
    weight = _shaped(768, 2304)
    broadcast = _shaped(197, 768, 2304, args=[weight])
    assert _needless(broadcast, _shaped(197, 2, 768))
    same = _shaped(197, 2, 768, args=[_shaped(197, 2, 768)])  # broadcast to its own shape
    assert _needless(same, _shaped(197, 768, 2304))


@pytest.mark.parametrize(("source", "broadcast", "other"), [
    ((768, 2304), (197, 768, 2304), (2, 768)),  # the product's batch would be lost
    ((1, 2304), (197, 768, 2304), (197, 2, 768)),  # the matrix itself is broadcast
    ((768, 2304), (197, 768, 2304), (5, 2, 768)),  # batches that do not broadcast
    ((2, 768), (197, 2, 768), (768, 2304)),  # as a left operand: the batch would be lost
])
def test_a_broadcast_the_product_needs_is_kept(source: tuple[int, ...], broadcast: tuple[int, ...],
                                                other: tuple[int, ...]) -> None:
    assert not _needless(_shaped(*broadcast, args=[_shaped(*source)]), _shaped(*other))


class _Attention(nn.Module):
    """vit_b_16's attention block in small: batch first, so torch's in-projection sees a transposed
    input and decomposes into `expand` of the weight and `bmm` at a batch above 1."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.attention(x, x, x, need_weights=False)[0]


def _attention() -> tuple[Any, Any]:
    torch.manual_seed(0)
    return _Attention().eval(), torch.randn(2, 5, 16)


def _broadcast_feeding_a_matmul(mod: Any) -> list[tuple[int, str]]:
    """Every `broadcast_to` an operand of a `matmul` in `mod`'s main function that the product does
    not need: the rank of what it broadcasts, and the call as text."""
    from tvm import relax

    values: dict[Any, Any] = {}
    found = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            values[binding.var] = binding.value
            value = binding.value
            if isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.matmul":
                left, right = (values.get(arg, arg) for arg in value.args)
                for operand, other in ((left, right), (right, left)):
                    if (isinstance(operand, relax.Call) and getattr(operand.op, "name", "") == "relax.broadcast_to"
                            and _needless(operand, other)):
                        source = values.get(operand.args[0], operand.args[0])
                        found.append((len(source.ty.shape.values), str(operand)))
    return found


def test_the_in_projection_of_attention_is_imported_without_its_weights_broadcast() -> None:
    model, example = _attention()
    assert _broadcast_feeding_a_matmul(_imported(model, example)) == []


def test_without_the_rewrite_the_import_has_the_broadcast(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pattern the rewrite removes is there to remove: the in-projection's weight (rank 2)
    broadcast to the sequence's length."""
    import backends.tvm

    monkeypatch.setattr(backends.tvm, "unbroadcast_matmul_operands", lambda mod: mod)
    model, example = _attention()
    assert 2 in [rank for rank, _ in _broadcast_feeding_a_matmul(_imported(model, example))]


def test_attention_at_batch_two_matches_eager(tmp_path: Path) -> None:
    """The rewrite changes the import, which fusion on and off share: one variant checks it."""
    model, example = _attention()
    with torch.no_grad():
        reference = model(example)
    prepared = TVMBackend().prepare(model, example, device="cpu", dtype="fp32",
                                    variant=TVMBackend.variant("on", {"tuning_trials": 0}),
                                    workdir=tmp_path, cache_dir=tmp_path)
    try:
        output = prepared(example)
        prepared.synchronize()
        verdict = compare(output, reference, "fp32")
        assert verdict["ok"], verdict["reason"]
    finally:
        prepared.close()
