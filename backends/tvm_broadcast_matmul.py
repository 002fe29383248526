"""A matmul's operand broadcast along batch dimensions only is given to the matmul unbroadcast.

torch's decomposition of `linear` on a 3-D input it cannot view as 2-D (nn.MultiheadAttention's
in-projection at a batch above 1, whose input is the batch-first input transposed) is `expand` of
the weight to (sequence, in, out) and `bmm`. Imported into Relax that is `broadcast_to` of the
transposed weight feeding `matmul`. The weight is a constant, so relax's `FoldConstant`
materialises the broadcast: for vit_b_16, 197 copies of a 768 x 2304 weight, 1.3 GiB in each of
its 12 layers, which took a 24 GiB machine out of memory during the compile. Relax's `matmul`
broadcasts batch dimensions itself, so `matmul(a, broadcast_to(w, shape))` computes exactly
`matmul(a, w)` wherever `shape` keeps w's last two dimensions and the product's shape is the same
either way; that is all this rewrite checks and changes, on both operands. Nothing is fused or
reordered: fusion on and off both get it (backends/tvm.py `_imported`).
"""

from __future__ import annotations

from typing import Any


def _static_shape(expr: Any) -> tuple[int, ...] | None:
    """The expression's tensor shape as integers, or None where any dimension is not a constant.
    (apache-tvm 0.27's wheels call an expression's type `ty`; its sources, `struct_info`.)"""
    info = getattr(expr, "ty", None) or getattr(expr, "struct_info", None)
    shape = getattr(info, "shape", None)
    if shape is None or not hasattr(shape, "values"):
        return None
    dims: list[int] = []
    for dim in shape.values:
        value = getattr(dim, "value", None)
        if not isinstance(value, int):
            return None
        dims.append(value)
    return tuple(dims)


def _broadcast_batch(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...] | None:
    """The batch dimensions of a product of operands shaped `left` and `right` (numpy's rule on all
    but the last two), or None where they do not broadcast."""
    a, b = left[:-2], right[:-2]
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    batch = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    return tuple(batch)


def _needless(broadcast: Any, other: Any) -> bool:
    """Whether a matmul of `broadcast` (a `broadcast_to` call) and `other`, in either order, computes
    the same with the broadcast's source in its place: the matrix dimensions kept, the product's
    batch unchanged (batch dimensions broadcast alike whichever operand comes first)."""
    shapes = [_static_shape(e) for e in (broadcast.args[0], broadcast, other)]
    if any(shape is None or len(shape) < 2 for shape in shapes):
        return False
    source_shape, broadcast_shape, other_shape = shapes
    assert source_shape is not None and broadcast_shape is not None and other_shape is not None
    if source_shape[-2:] != broadcast_shape[-2:]:
        return False  # the matrix itself is broadcast, not only its batch
    with_it = _broadcast_batch(broadcast_shape, other_shape)
    return with_it is not None and with_it == _broadcast_batch(source_shape, other_shape)


def unbroadcast_matmul_operands(mod: Any) -> Any:
    """`mod` with every `matmul` of a batch-only `broadcast_to` given the broadcast's source instead,
    in every Relax function, either operand; the broadcasts left unused are removed by the caller's
    dead-code pass."""
    from tvm import relax
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    for broadcast_first in (False, True):
        other, source = wildcard(), wildcard()
        broadcast = is_op("relax.broadcast_to")(source, wildcard())
        operands = (broadcast, other) if broadcast_first else (other, broadcast)
        pattern = is_op("relax.matmul")(*operands)

        def rewrite(call: Any, matches: dict[Any, Any], broadcast: Any = broadcast, other: Any = other,
                    source: Any = source, broadcast_first: bool = broadcast_first) -> Any:
            if not _needless(matches[broadcast], matches[other]):
                return call
            operands = (matches[source], matches[other]) if broadcast_first else (matches[other], matches[source])
            return relax.op.matmul(*operands, out_dtype=call.attrs.out_dtype)

        updates = {gv: rewrite_call(pattern, rewrite, func) for gv, func in mod.functions.items()
                   if isinstance(func, relax.Function)}
        for gv, func in updates.items():
            mod[gv] = func
    return mod
