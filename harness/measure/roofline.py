"""The roofline of a cell: how close its measured time comes to what the device's peaks allow.

- FLOPs: torch's FlopCounterMode on the eager model for one batch (convolutions, matrix
  multiplications and attention, and the fused RNN layers and multi-head attention it has no
  formula for: harness/measure/flop_formulas.py; element-wise work is not counted, as in every
  roofline).
- Compulsory bytes: the weights (the parameters and buffers the forward reads: a head that eval
  mode skips, such as an auxiliary classifier, is no compulsory traffic; of a table that an
  embedding only looks rows up in, the distinct rows the batch looks up), the input batch and the
  output, each moved once: the least memory traffic any implementation needs.
- Peaks: measured on the machine by the system probe, once per run (`measure_peaks`): the best
  rate of a large matrix multiplication per dtype, and of a large tensor copy. Measured peaks
  are what the device delivers to torch, not its data-sheet figures, so the bound is one a real
  implementation could approach.
- The bound is max(FLOPs / peak FLOP/s, bytes / peak bytes/s); `fraction_of_bound` is the bound
  over the measured median batch time: 1 means at the roofline, 0.1 means ten times slower.
The kernels-per-inference floor is 1: one kernel could compute the whole model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pydantic
from pydantic import ConfigDict

PEAK_MATMUL_N = {"cpu": 1024, "cuda": 8192}
#: The costs cache's kind: a new one whenever what is counted changes (2: the fused RNN layers and
#: multi-head attention, counted 0 before), so that no cached count of the old rules is read.
COSTS_KIND = "roofline-costs-structure-3"  # 3: an embedding's table counts the rows looked up, not all of it
PEAK_COPY_BYTES = {"cpu": 256 << 20, "cuda": 1 << 30}
PEAK_REPEATS = 5
TORCH_DTYPES = ("fp32", "fp16", "bf16")


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return int(value.numel() * value.element_size())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    return 0


class ModelCosts(pydantic.BaseModel):
    """The work one batch cannot avoid: its FLOPs and the bytes any implementation moves at least
    once (`compulsory_bytes`: the weights, the input and the output). Kept as JSON in the roofline
    cache (`cached_costs`) and recorded in the cell's `metrics.roofline` (`bound`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    flops: int
    weight_bytes: int
    input_bytes: int
    output_bytes: int
    compulsory_bytes: int

    @classmethod
    def counted(cls, flops: int, weight_bytes: int, input_bytes: int, output_bytes: int) -> ModelCosts:
        """The costs of a batch whose parts were counted: the compulsory bytes are their sum."""
        return cls(
            flops=flops,
            weight_bytes=weight_bytes,
            input_bytes=input_bytes,
            output_bytes=output_bytes,
            compulsory_bytes=weight_bytes + input_bytes + output_bytes,
        )

    @pydantic.model_validator(mode="after")
    def _compulsory_is_the_sum(self) -> ModelCosts:
        if self.compulsory_bytes != self.weight_bytes + self.input_bytes + self.output_bytes:
            raise ValueError("compulsory_bytes is not the weights, input and output bytes together")
        return self


def _storages_read() -> Any:
    """A dispatch mode that notes the storage of every tensor an operator is given: which weights
    the forward reads, whole (`storages`), or only by an embedding's look-up of some of its rows
    (`looked_up`: storage -> the rows looked up and a row's bytes). BERT base's word embeddings
    are 93.8 MB, of which a batch of 128 tokens reads 128 rows, 393 KB."""
    import torch
    from torch import Tensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    embedding = torch.ops.aten.embedding.default

    class StoragesRead(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.storages: set[int | None] = set()
            self.looked_up: dict[int | None, tuple[set[int], int]] = {}

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            given = (args, kwargs)
            if func is embedding and not kwargs and len(args) >= 2 and args[0].dim() == 2:
                table, indices = args[0], args[1]
                rows, _ = self.looked_up.setdefault(_storage(table), (set(), table[0].numel() * table.element_size()))
                rows.update(int(i) for i in indices.unique().tolist())
                given = (args[1:], {})
            self.storages.update(_storage(leaf) for leaf in tree_leaves(given) if isinstance(leaf, Tensor))
            return func(*args, **kwargs)

    return StoragesRead()


def _weight_bytes(tensor: Any, read: set[int | None] | None, looked_up: dict[int | None, tuple[set[int], int]]) -> int:
    """The bytes of a weight the forward must read at least once: all of it where an operator read
    it whole (or where what was read is not known), the rows looked up where an embedding alone
    read it, none where nothing did."""
    storage = _storage(tensor)
    if read is None or storage in read:
        return _tensor_bytes(tensor)
    if storage in looked_up:
        rows, row_bytes = looked_up[storage]
        return min(len(rows) * row_bytes, _tensor_bytes(tensor))
    return 0


def _storage(tensor: Any) -> int | None:
    """Where a tensor's data lies, or None for one with no plain storage (sparse, a wrapper subclass)."""
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def model_costs(model: Any, example: Any) -> ModelCosts:
    """FLOPs of one batch and its compulsory bytes (weights, input, output)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from harness.measure.flop_formulas import custom_mapping

    reads = _storages_read()
    formulas = custom_mapping()
    try:
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=formulas) as counter, reads:
            output = model(example)
        read: set[int | None] | None = reads.storages
    except Exception:  # noqa: BLE001 - an operator the noting mode cannot pass (a higher-order one): every weight counts
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=formulas) as counter:
            output = model(example)
        read = None
    weights = sum(_weight_bytes(t, read, reads.looked_up) for t in (*model.parameters(), *model.buffers()))
    return ModelCosts.counted(
        flops=int(counter.get_total_flops()),
        weight_bytes=weights,
        input_bytes=_tensor_bytes(example),
        output_bytes=_tensor_bytes(output),
    )


def cached_costs(model: Any, example: Any, cache_dir: Path) -> ModelCosts:
    """`model_costs`, kept in `cache_dir` by what the model computes and the example's shape: the
    cells of one model and setting (every backend and variant) count its FLOPs once.

    The costs follow from the model's structure, not its weights' values: the key is its class,
    its parameters' and buffers' names, shapes and dtypes, and its modules as `repr` prints them
    (a convolution's stride, padding and dilation, which its weights' shape does not show).
    Hashing the weights instead took a cell 3 s for vgg16 (528 MB) on 2 cores, every time."""
    import torch

    from harness.artifact_cache import structure_fingerprint, warn_rebuilt
    from harness.files.atomic import write_json_atomic

    key = structure_fingerprint(model, example, torch=torch.__version__, modules=repr(model), kind=COSTS_KIND)
    path = cache_dir / f"{key}.json"
    if path.exists():
        try:
            return ModelCosts.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:  # pydantic's ValidationError among the ValueErrors
            warn_rebuilt(path, type(exc).__name__)
    costs = model_costs(model, example)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, costs.model_dump())
    except OSError:
        pass  # a cache that cannot be written costs time, not figures
    return costs


def bound(costs: ModelCosts, peaks: dict[str, Any] | None, dtype: str, measured_ns: float) -> dict[str, Any]:
    """The cell's roofline figures; without peaks for its dtype, only the costs."""
    figures: dict[str, Any] = {**costs.model_dump(), "kernels_per_inference_floor": 1}
    figures["arithmetic_intensity_flops_per_byte"] = costs.flops / costs.compulsory_bytes if costs.compulsory_bytes else None
    peak_flops = ((peaks or {}).get("flops_per_s") or {}).get(dtype)
    peak_bytes = (peaks or {}).get("bytes_per_s")
    if measured_ns <= 0:
        figures["note"] = "no measured time to compare (the backend computes no model): costs only"
        return figures
    if not peak_flops or not peak_bytes:
        why = (peaks or {}).get("error") or f"no measured {dtype} peak for this device"
        figures["note"] = f"{why}: costs only"
        return figures
    compute_ns = costs.flops / peak_flops * 1e9
    memory_ns = costs.compulsory_bytes / peak_bytes * 1e9
    figures.update(
        {
            "peak_flops_per_s": peak_flops,
            "peak_bytes_per_s": peak_bytes,
            "peaks_method": (peaks or {}).get("method", ""),
            "compute_bound_ns": compute_ns,
            "memory_bound_ns": memory_ns,
            "time_bound_ns": max(compute_ns, memory_ns),
            "bound_by": "compute" if compute_ns >= memory_ns else "memory",
            "measured_ns": measured_ns,
            "fraction_of_bound": max(compute_ns, memory_ns) / measured_ns,
        }
    )
    return figures


def _seconds(run: Any, synchronize: Any) -> list[float]:
    """Each of `PEAK_REPEATS` timed runs, after one untimed: the peak is the best, and their spread
    says whether the probe met a steady machine (a probe that met other work reads the peak low)."""
    run()
    synchronize()
    seconds = []
    for _ in range(PEAK_REPEATS):
        start = time.perf_counter()
        run()
        synchronize()
        seconds.append(time.perf_counter() - start)
    return seconds


def _rates(work: float, seconds: list[float]) -> dict[str, float]:
    """The rates of runs of `work` (FLOPs or bytes) each: the lowest, the median and the best."""
    rates = sorted(work / s for s in seconds)
    return {"min": rates[0], "median": rates[len(rates) // 2], "max": rates[-1]}


def measure_peaks(device: str, copy_bytes: int | None = None) -> dict[str, Any]:
    """The device's achievable FLOP/s per dtype (square matmul) and bytes/s (a copy of `copy_bytes`,
    by default PEAK_COPY_BYTES's for the device: harness/run/probe.py `peak_copy_bytes`)."""
    import torch

    def synchronize() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    n = PEAK_MATMUL_N[device]
    flops: dict[str, float] = {}
    spread: dict[str, dict[str, float]] = {}
    for name in TORCH_DTYPES:
        if device == "cpu" and name != "fp32":
            continue  # half precision matmul on CPU is emulated on most machines: no meaningful peak
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        spread[name] = _rates(2 * n**3, _seconds(lambda a=a, b=b: torch.mm(a, b), synchronize))
        flops[name] = spread[name]["max"]
    copied = copy_bytes or PEAK_COPY_BYTES[device]
    source = torch.empty(copied // 4, device=device, dtype=torch.float32).fill_(1.0)
    target = torch.empty_like(source)
    spread["copy"] = _rates(2 * copied, _seconds(lambda: target.copy_(source), synchronize))
    source = target = None  # freed before the caller measures anything else
    return {
        "device": device,
        "flops_per_s": flops,
        "bytes_per_s": spread["copy"]["max"],
        # each dtype's FLOP/s and the copy's bytes/s over the runs (absent before 2026-12-04)
        "spread": spread,
        "method": (
            f"best of {PEAK_REPEATS}: {n}x{n} matmul per dtype ({'TF32 off' if device == 'cuda' else 'fp32 only'}), "
            f"{copied >> 20} MiB copy (read + write)"
        ),
    }
