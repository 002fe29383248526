"""The TVM backend's targets and Relax pipelines: the CPU target (this machine's, or LLVM's
baseline), the CUDA target of a compute capability, and the pipeline `tvm.compile` runs: TVM's
default one, on CPU with a tuning database applied after FuseTIR (backends/tvm_tuning.py), on CUDA
with dlight's Matmul rule declining where it would raise (see backends/tvm.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def process_cores() -> int:
    """The cores this process may run on (its affinity: a `--jobs` slot's, or the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_target(mcpu: str) -> Any:
    from tvm.target import Target

    # num-cores: MetaSchedule's rules size parallel loops by it (it refuses a target without it); the
    # cores this process may run on, as many as the backend gives TVM's thread pool.
    cores = process_cores()
    if mcpu == "host":
        host = Target.from_device("cpu")  # {"kind": "llvm", "mtriple": ..., "mcpu": <this CPU>}
        return Target({**{k: host.attrs[k] for k in ("mtriple", "mcpu") if k in host.attrs}, "kind": "llvm",
                       "num-cores": cores})
    return Target({"kind": "llvm", "num-cores": cores})


def cuda_target(capability: tuple[int, int]) -> Any:
    """The CUDA target of a GPU of this compute capability, LLVM for the host side. The limits are
    the ones `Target.from_device` reads, the same on every GPU from sm_70 on (1024 threads a
    block, 48 KiB of static shared memory, warps of 32)."""
    from tvm.target import Target

    major, minor = capability
    return Target({"kind": "cuda", "arch": f"sm_{major}{minor}", "max_threads_per_block": 1024,
                   "max_shared_memory_per_block": 49152, "thread_warp_size": 32},
                  host=cpu_target("host"))


def current_cuda_target() -> Any:
    import torch

    return cuda_target(torch.cuda.get_device_capability(torch.cuda.current_device()))


def _declining(rule: Any) -> Any:
    """A dlight rule that declines (None) where it would raise, so the next rule gets the function."""
    from tvm.s_tir import dlight as dl

    class Declining(dl.ScheduleRule):
        def apply(self, func: Any, target: Any, tunable: bool) -> Any:
            try:
                return rule.apply(func, target, tunable)
            except Exception:  # noqa: BLE001 - dlight's rules assert on shapes they cannot handle
                return None

    return Declining()


def pipeline(target: Any, database: Path | None = None) -> Any:
    """`relax.get_default_pipeline(target)`; on CPU with a tuning database the same stages with the
    database's schedules applied after FuseTIR; for CUDA the same stages and pass names, with
    dlight's Matmul rule declining where it would raise (see the module docstring)."""
    from tvm import relax

    if target.kind.name != "cuda":
        return relax.get_default_pipeline(target) if database is None else tuned_cpu_pipeline(target, database)
    import tvm
    from tvm.relax.backend.cuda import pipeline as cuda
    from tvm.s_tir import dlight as dl

    legalize = [
        relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
        relax.transform.FuseOps(), relax.transform.FuseTIR(),
        dl.ApplyDefaultSchedule(_declining(dl.gpu.Matmul()), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                dl.gpu.GeneralReduction(), dl.gpu.Fallback()),
    ]

    @tvm.transform.module_pass(opt_level=0, name="FusionBenchCUDAPipeline")
    def pipeline(mod: Any, _context: Any) -> Any:
        stages = cuda.library_dispatch_passes(target) + legalize + cuda.dataflow_lower_passes(target)
        return tvm.transform.Sequential(stages + cuda.finalize_passes(target))(mod)

    return pipeline


def tuned_cpu_pipeline(target: Any, database: Path) -> Any:
    """TVM's CPU pipeline (relax/backend/cpu_generic) with MetaScheduleApplyDatabase between its
    legalize stage (through FuseTIR) and its lowering: each tuned PrimFunc gets its best schedule."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    from backends import tvm_tuning

    apply, records = tvm_tuning.apply_database(database, target.kind.name)

    @tvm.transform.module_pass(opt_level=0, name="FusionBenchTunedCPUPipeline")
    def pipeline(mod: Any, _context: Any) -> Any:
        with records:
            mod = tvm.transform.Sequential(cpu.library_dispatch_passes(target) + cpu.legalize_passes(target)
                                           + [apply])(mod)
        return tvm.transform.Sequential(cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))(mod)

    return pipeline
