"""Backends that fail the way real compilers and runtimes do, each in one way only.

Each runs the model eagerly except for its fault, so everything else about its cell (the
reference, the timing, LoadGen) is real:
- fault_segfault: the first call writes a line to standard error and kills the worker with SIGSEGV;
- fault_hang: the first call does not return for an hour (FUSIONBENCH_FAULT_HANG_S seconds where
  set: a test that resumes the cell need not wait out its time limit);
- fault_oom: prepare keeps allocating (and touching) memory, up to 8 GiB, so a memory limit
  below that must stop it;
- fault_raise: prepare raises, as a compiler that crashes in Python does;
- fault_wrong: outputs 1% too large: plausible figures, wrong answers;
- fault_slow_first: the first call takes 3 s more (a lazy compile), later calls are eager's.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness.contract import Availability, Backend, Prepared, Variant
from harness.fusion import FusionReport, KernelGroup

OOM_CHUNK_BYTES = 64 << 20
OOM_CAP_BYTES = 8 << 30
SLOW_FIRST_CALL_S = 3.0
WRONG_SCALE = 1.01


class FaultPrepared(Prepared):
    prepare_cache = "none"
    dispatch_definition = "one call of the eager model per inference"

    def __init__(self, model: Any, fault: str) -> None:
        self.model = model
        self.fault = fault
        self.calls = 0

    def __call__(self, batch: Any) -> Any:
        import torch

        self.calls += 1
        if self.fault == "segfault":  # a native library's last words, then its crash
            print("fault_segfault: a native library crashes now", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.fault == "hang" and self.calls == 1:
            time.sleep(float(os.environ.get("FUSIONBENCH_FAULT_HANG_S", "3600")))
        if self.fault == "slow_first" and self.calls == 1:
            time.sleep(SLOW_FIRST_CALL_S)
        with torch.no_grad():
            output = self.model(batch)
        return output * WRONG_SCALE if self.fault == "wrong" else output

    def synchronize(self) -> None:
        pass

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(KernelGroup("eager model", ("aten.model",)),), source="fault injection")

    def cpu_dispatches(self, batch: Any) -> int:
        return 1


class _Fault(Backend):
    fault = ""

    def availability(self, device: str) -> Availability:
        return Availability.yes() if device == "cpu" else Availability.no("fault injection runs on CPU only")

    def versions(self) -> dict[str, str]:
        return {"fusionbench-faults": "0.1.0"}

    def prepare(self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
                cache_dir: Path) -> Prepared:
        return FaultPrepared(model, self.fault)


class Segfault(_Fault):
    name, fault = "fault_segfault", "segfault"


class Hang(_Fault):
    name, fault = "fault_hang", "hang"


class OutOfMemory(_Fault):
    name, fault = "fault_oom", "oom"

    def prepare(self, model: Any, example: Any, **kwargs: Any) -> Prepared:
        hoard = []
        while len(hoard) * OOM_CHUNK_BYTES < OOM_CAP_BYTES:
            hoard.append(b"\x01" * OOM_CHUNK_BYTES)  # written, so resident, not just reserved
        return FaultPrepared(model, "oom")


class Raise(_Fault):
    name, fault = "fault_raise", "raise"

    def prepare(self, model: Any, example: Any, **kwargs: Any) -> Prepared:
        raise RuntimeError("injected fault: the compiler crashed")


class WrongOutput(_Fault):
    name, fault = "fault_wrong", "wrong"


class SlowFirstCall(_Fault):
    name, fault = "fault_slow_first", "slow_first"
