"""A cell's model and inputs, built the same way by every process that measures the cell: the
worker (harness/measure/worker.py), each further round, and the memory-traffic pass's child
(harness/measure/memory_traffic.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.measure.protocol import WorkerRequest
from harness.scenario.cell_config import CellConfig
from harness.scenario.checked_rows import example_rows


def model_and_samples(cell: CellConfig, request: WorkerRequest) -> tuple[Any, list[Any], Any]:
    """The cell's model, its input samples and one batch of them (the example every pass calls)."""
    from harness.models import zoo

    model = zoo.build_model(cell.model.name, pretrained=cell.model.pretrained, seed=cell.seed, device=cell.device,
                            dtype=cell.dtype)
    folder = Path(request.input_folder) if request.input_folder else None
    samples = zoo.make_samples(
        cell.inputs.samples, model=cell.model.name, input_size=cell.input_size, device=cell.device, dtype=cell.dtype,
        seed=cell.seed, folder=folder, labels=getattr(cell.inputs, "labels", None),
    )
    return model, samples, batch_of(samples, example_rows(len(samples), cell.batch))


def batch_of(samples: list[Any], rows: list[int]) -> Any:
    """One batch: the samples `rows` (indices into `samples`), stacked."""
    import torch

    return torch.cat([samples[row] for row in rows])


def later_batch(samples: list[Any], rows: list[int]) -> Any:
    """The batch of `rows` as LoadGen's batches reach the model (harness/measure/sut.py
    `SampleRing`): a view of consecutive rows of a larger stack, here one sample on from its start.
    A backend that reads its input from the storage's start, not from the tensor's own offset,
    computes other samples on every such batch but the first."""
    import torch

    return torch.cat([samples[(rows[0] - 1) % len(samples)], *(samples[row] for row in rows)])[1:]


def backend_arguments(cell: CellConfig, request: WorkerRequest, backend: Any, workdir: Path) -> dict[str, Any]:
    """What `Backend.tune` and `Backend.prepare` are given beside the model: the same for both."""
    cache_dir = Path(request.cache_dir or workdir / "cache") / backend.name
    cache_dir.mkdir(parents=True, exist_ok=True)
    return {"device": cell.device, "dtype": cell.dtype, "workdir": workdir, "cache_dir": cache_dir,
            "variant": backend.variant(cell.variant.fusion, cell.variant.options, cell.variant.graphs)}
