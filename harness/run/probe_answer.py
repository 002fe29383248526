"""The probe's answer as the parent reads it (harness/run/probe.py). A module of its own so that
the probe's process, which only writes the answer, does not build the bundle header's models."""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import ConfigDict

from harness.bundle.header_record import BackendReport


class ProbeAnswer(pydantic.BaseModel):
    """What the probe found: the device `auto` resolved to, whether torch sees CUDA, each backend's
    status and, for a new run, the system's description (a record of its own, stored as it is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    device: str
    cuda_available: bool = False
    cuda_devices: int = 0  # as torch counts them (CUDA_VISIBLE_DEVICES applied)
    backends: dict[str, BackendReport] = {}  # as bundle.json records them
    system: dict[str, Any] | None = None

    def available(self, backend: str) -> bool:
        status = self.backends.get(backend)
        return status is not None and status.available

    def recorded_backends(self) -> dict[str, Any]:
        """The backends as bundle.json records them."""
        return {name: status.model_dump() for name, status in self.backends.items()}

    def gpu_indices(self) -> list[str]:
        """The indices of the GPUs the system description lists, in its order."""
        gpus = ((self.system or {}).get("gpu") or {}).get("gpus") or []
        return [str(gpu.get("index", position)) for position, gpu in enumerate(gpus)]
