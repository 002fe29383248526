"""The null backend: returns its input. Runs measure the harness's own overhead (LoadGen, the
system under test, batching, synchronisation), as MLPerf's null SUT does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, Prepared, Variant
from harness.fusion import FusionReport
from harness.options import BackendOptions, expect


class NullBackend(Backend):
    name = "null"
    computes_model = False
    fusion_switch = False

    def availability(self, device: str) -> Availability:
        return torch_availability(device)

    def versions(self) -> dict[str, str]:
        return {}

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        expect(self.name, BackendOptions, variant.options)  # null takes none
        return NullPrepared(device)


class NullPrepared(Prepared):
    prepare_cache = "none"
    dispatch_definition = "none: the null backend computes nothing"

    def __init__(self, device: str) -> None:
        self.device = device

    def __call__(self, batch: Any) -> Any:
        return batch

    def synchronize(self) -> None:
        synchronize(self.device)

    def cpu_dispatches(self, batch: Any) -> int:
        return 0

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(), source="null backend: no computation")
