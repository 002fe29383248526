"""The TVM backend's fusion report, read from the IR while it compiles: which Relax ops each
kernel (a fused or single-op PrimFunc) was built from, in the order the main function calls them.
`snapshot_instrument` keeps the modules the walk needs; `kernel_groups` walks them."""

from __future__ import annotations

from typing import Any

from harness.errors import BackendFailed
from harness.fusion import KernelGroup

_CALL_TIR = ("relax.call_tir", "relax.call_tir_inplace")


def snapshot_instrument(modules: dict[str, Any]) -> Any:
    """A PassInstrument that keeps, in `modules`, the module entering LegalizeOps (Relax ops still
    there) and the one after each of LegalizeOps and FuseOps (call_tir bindings; fused functions
    still Relax functions, before FuseTIR turns them into TIR)."""
    import tvm

    @tvm.instrument.pass_instrument
    class Snapshots:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name == "LegalizeOps":
                modules["before LegalizeOps"] = mod

        def run_after_pass(self, mod: Any, info: Any) -> None:
            if info.name in ("LegalizeOps", "FuseOps"):
                modules[f"after {info.name}"] = mod

    return Snapshots()


def _relax_op_name(name: str) -> str:
    """`relax.nn.conv2d` -> `relax.conv2d`: the namespace kept, sub-namespaces dropped, so that
    `harness.fusion.op_name` gives the bare op."""
    return f"relax.{name.rsplit('.', 1)[-1]}"


def _bindings(func: Any) -> list[Any]:
    from tvm import relax

    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return []
    return [binding for block in body.blocks for binding in block.bindings]


def _call_tir_callee(value: Any) -> str | None:
    """The PrimFunc name a `call_tir` binding calls, or None for anything else."""
    import tvm
    from tvm import relax

    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _CALL_TIR:
        return value.args[0].name_hint
    return None


def kernel_groups(modules: dict[str, Any], lowered: Any) -> list[KernelGroup]:
    """One group per PrimFunc call of the lowered main, in call order, with the Relax ops it runs."""
    import tvm
    from tvm import relax, tirx

    if "before LegalizeOps" not in modules or "after LegalizeOps" not in modules:
        raise BackendFailed("tvm: the default pipeline ran no LegalizeOps; cannot build the fusion report")
    # 1. Each Relax op call before legalization, by the variable it binds.
    op_of_var: dict[Any, str] = {}
    for binding in _bindings(modules["before LegalizeOps"]["main"]):
        value = binding.value
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            op_of_var[binding.var] = _relax_op_name(value.op.name)
    # 2. The PrimFunc each op was legalized into. LegalizeOps keeps the bound variable; an op
    #    legalized into several PrimFuncs binds the extra ones to new variables just before it.
    op_of_primfunc: dict[str, str] = {}
    pending: list[str] = []
    for binding in _bindings(modules["after LegalizeOps"]["main"]):
        callee = _call_tir_callee(binding.value)
        if callee is None:
            continue
        pending.append(callee)
        op = op_of_var.get(binding.var)
        if op is not None:
            for name in pending:
                op_of_primfunc.setdefault(name, op)
            pending = []

    def op_of(primfunc: str) -> str:
        return op_of_primfunc.get(primfunc, f"relax.{primfunc}")  # the PrimFunc's name when unmatched

    # 3. The ops inside each fused (Primitive) function, while it is still a Relax function.
    ops_of_kernel: dict[str, tuple[str, ...]] = {}
    fused_module = modules.get("after FuseOps")
    if fused_module is not None:
        for gvar, func in fused_module.functions.items():
            if isinstance(func, relax.Function) and func.attrs is not None and func.attrs.get("Primitive"):
                callees = [_call_tir_callee(b.value) for b in _bindings(func)]
                ops_of_kernel[gvar.name_hint] = tuple(op_of(c) for c in callees if c is not None)

    # 4. The kernels main really calls, in order (FuseTIR keeps the fused function's name).
    groups: list[KernelGroup] = []

    def walk(func: Any) -> None:
        for binding in _bindings(func):
            value = binding.value
            if not (isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar)):
                continue
            callee = lowered[value.op]
            name = value.op.name_hint
            if isinstance(callee, tirx.PrimFunc):
                groups.append(KernelGroup(kernel=name, ops=ops_of_kernel.get(name) or (op_of(name),)))
            elif isinstance(callee, relax.Function):
                walk(callee)

    walk(lowered["main"])
    return groups
