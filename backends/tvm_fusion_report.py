"""The TVM backend's fusion report, read from the IR while it compiles: which Relax ops each
kernel (a fused or single-op PrimFunc) was built from, in the order the main function calls them.
`snapshot_instrument` keeps the modules the walk needs; `kernel_groups` walks them. The parts of one of
the model's own attention calls in a fused kernel are one operator (backends/attention_provenance.py):
FuseOps keeps the variables a fused function's bindings bind, which say the call each came from, except
its last, bound to a new variable: that one is the binding of main before FuseOps that calls the same
PrimFunc on the same variables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.attention_provenance import Call, model_ops
from harness.errors import BackendFailed
from harness.fusion import KernelGroup

_CALL_TIR = ("relax.call_tir", "relax.call_tir_inplace")


def snapshot_instrument(modules: dict[str, Any]) -> Any:
    """A PassInstrument that keeps, in `modules`, the module entering LegalizeOps (Relax ops still
    there), the one entering FuseOps, and the one after each of LegalizeOps and FuseOps (call_tir
    bindings; fused functions still Relax functions, before FuseTIR turns them into TIR)."""
    import tvm

    @tvm.instrument.pass_instrument
    class Snapshots:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name in ("LegalizeOps", "FuseOps"):
                modules[f"before {info.name}"] = mod

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


def _arguments(value: Any) -> list[Any]:
    """The variables a `call_tir` binding passes to its PrimFunc."""
    from tvm import relax

    args = value.args[1] if len(value.args) > 1 else None
    fields = args.fields if isinstance(args, relax.Tuple) else [args]
    return [arg for arg in fields if isinstance(arg, relax.Var)]


def _calls_of_parts(func: Any, before_fuse: Any, origins: Mapping[Any, Call | None]) -> list[Call | None]:
    """For each `call_tir` binding of fused function `func`, the model's attention call it is part of (or None).
    Its last binding's variable is new: its call is that of main's binding, before FuseOps, that called the
    same PrimFunc on the same variables of the fused function (where exactly one did)."""
    bindings = [b for b in _bindings(func) if _call_tir_callee(b.value) is not None]
    calls = [origins.get(b.var) for b in bindings]
    if bindings and bindings[-1].var not in origins and before_fuse is not None:
        inner = {b.var for b in bindings[:-1]}
        callee = _call_tir_callee(bindings[-1].value)
        reads = [arg for arg in _arguments(bindings[-1].value) if arg in inner]
        same = [b.var for b in _bindings(before_fuse) if _call_tir_callee(b.value) == callee
                and [arg for arg in _arguments(b.value) if arg in inner] == reads]
        if reads and len(same) == 1:
            calls[-1] = origins.get(same[0])
    return calls


def _completed(main: Any, origins: Mapping[Any, Call | None]) -> dict[Any, Call | None]:
    """`origins` with each variable of `main` the import did not record (a converter's nested expression,
    bound by the normaliser; a PrimFunc LegalizeOps added) read as the recorded binding after it: both are
    bound just before the variable their converter or operator emitted."""
    completed, pending = dict(origins), []
    for binding in _bindings(main):
        if binding.var in origins:
            completed.update((var, origins[binding.var]) for var in pending)
            pending = []
        else:
            pending.append(binding.var)
    return completed


def kernel_groups(modules: dict[str, Any], lowered: Any, origins: Mapping[Any, Call | None] | None = None) -> list[KernelGroup]:
    """One group per PrimFunc call of the lowered main, in call order, with the Relax ops it runs; with
    `origins` (backends/attention_provenance.py: each Relax variable the import bound, to the model's
    attention call it is part of, or None), the parts of one attention call in a fused kernel are one."""
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
    before_fuse = modules["before FuseOps"]["main"] if "before FuseOps" in modules else None
    if origins and before_fuse is not None:
        origins = _completed(before_fuse, origins)
    if fused_module is not None:
        for gvar, func in fused_module.functions.items():
            if isinstance(func, relax.Function) and func.attrs is not None and func.attrs.get("Primitive"):
                callees = [c for c in (_call_tir_callee(b.value) for b in _bindings(func)) if c is not None]
                calls = _calls_of_parts(func, before_fuse, origins) if origins else [None] * len(callees)
                ops_of_kernel[gvar.name_hint] = model_ops(zip((op_of(c) for c in callees), calls))

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
