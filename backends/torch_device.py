"""What the torch-based built-in backends share: device checks and synchronisation."""

from __future__ import annotations

from harness.contract import Availability


def torch_availability(device: str) -> Availability:
    """torch imports, and sees a CUDA device when `device` is "cuda"."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the lock
        return Availability.no(f"torch is not installed ({exc})")
    if device == "cuda" and not torch.cuda.is_available():
        return Availability.no("torch sees no CUDA device here")
    return Availability.yes()


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
