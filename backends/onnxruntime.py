"""ONNX Runtime on the graph torch's exporter writes (batch norm kept; see backends/onnx_export.py).

Fusion is ONNX Runtime's own, chosen by its graph optimisation level:
- `fusion: on`  -> level "all" (ConvBNFusion, FusedConv, NCHWc convolutions with fused sums and
  activations on CPU, ...).
- `fusion: off` -> level "disable": the exported graph as it is, one node per eager operator.

Options (scenario file, `options:`):
- `level`: "disable" | "basic" | "extended" | "all", the optimisation-level ladder (default: "all"
  with fusion on, "disable" with fusion off; with fusion off any other level applies ORT's own
  fusions to the unfused export, which is what a ladder study wants)
- `disabled_optimizers`: names of ORT graph transformers to leave out, e.g. ["ConvBNFusion"]
- `provider`: "auto" | "cpu" | "cuda" | "tensorrt" (default "auto": the cell's device; "tensorrt"
  needs onnxruntime-gpu built with TensorRT, and fuses inside TensorRT whatever the level says)
- `intra_op_threads`: threads per operator, 0 for ORT's default (default 0)

The fusion report comes from the optimised graph ORT writes (`optimized_model_filepath`);
CPU dispatches and the arena peak from ORT's profiler, in a separate session so the timed one
runs unprofiled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backends.onnx_export import exported_onnx
from backends.onnx_graph import kernel_groups
from backends.torch_device import synchronize
from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport
from harness.options import checked

LEVELS = ("disable", "basic", "extended", "all")
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
OPTIONS = {"level": str, "disabled_optimizers": list, "provider": str, "intra_op_threads": int}
_NUMPY_DTYPES = {"fp32": "float32", "fp16": "float16"}


def _ort() -> Any:
    import onnxruntime

    return onnxruntime


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def availability(self, device: str) -> Availability:
        try:
            ort = _ort()
            import onnx  # noqa: F401  (the export and the fusion report read graphs with it)
            import onnxscript  # noqa: F401  (torch's exporter needs it)
        except ImportError as exc:
            return Availability.no(f"{exc.name} is not installed (pip install onnxruntime onnx onnxscript)")
        if device == "cuda":
            from backends.torch_device import torch_availability

            basic = torch_availability("cuda")
            if not basic.ok:
                return basic
            if PROVIDERS["cuda"] not in ort.get_available_providers():
                return Availability.no(
                    f"this onnxruntime has no CUDAExecutionProvider (has {', '.join(ort.get_available_providers())}); "
                    "install onnxruntime-gpu"
                )
        return Availability.yes()

    def supports(self, variant: Variant, dtype: str, device: str) -> Availability:
        if dtype not in _NUMPY_DTYPES:
            return Availability.no(f"onnxruntime: {dtype} is not supported (fp32, and fp16 on cuda)")
        if dtype == "fp16" and device != "cuda":
            return Availability.no("onnxruntime: fp16 needs the CUDA or TensorRT provider; the CPU provider lacks fp16 convolutions")
        if variant.options.get("provider") == "tensorrt" and variant.fusion == "off":
            return Availability.no(
                "onnxruntime provider=tensorrt: TensorRT fuses inside its engine whatever ORT's level; "
                "use the tensorrt backend's approximate fusion=off instead"
            )
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        import onnx
        import onnxscript
        import torch

        ort = _ort()
        return {
            "onnxruntime": ort.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__,
            "torch": torch.__version__, "providers": ",".join(ort.get_available_providers()),
        }

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        options = _checked_options(variant, device)
        ort = _ort()
        source_path, hit = exported_onnx(model, example, cache_dir)
        optimized_path = workdir / "ort-optimized.onnx"
        session_options = _session_options(ort, options)
        session_options.optimized_model_filepath = str(optimized_path)
        providers = _providers(options["provider"], example, cache_dir)
        try:
            session = ort.InferenceSession(
                str(source_path), session_options, providers=providers,
                disabled_optimizers=options["disabled_optimizers"] or None,
            )
        except Exception as exc:  # ORT raises its own exception types (Fail, InvalidGraph, ...)
            raise BackendFailed(f"onnxruntime could not load the exported graph: {type(exc).__name__}: {exc}") from exc
        prepared = OrtPrepared(session, source_path, optimized_path, options, providers, example, dtype)
        prepared.prepare_cache = "warm" if hit else "cold"
        return prepared


def _checked_options(variant: Variant, device: str) -> dict[str, Any]:
    defaults = {
        "level": "all" if variant.fusion == "on" else "disable",
        "disabled_optimizers": [], "provider": "auto", "intra_op_threads": 0,
    }
    options = checked("onnxruntime", variant.options, OPTIONS, defaults)
    if options["level"] not in LEVELS:
        raise BackendFailed(f"onnxruntime option level={options['level']!r}; allowed: {', '.join(LEVELS)}")
    if not all(isinstance(name, str) for name in options["disabled_optimizers"]):
        raise BackendFailed("onnxruntime option disabled_optimizers must be a list of transformer names")
    if options["intra_op_threads"] < 0:
        raise BackendFailed(f"onnxruntime option intra_op_threads must be >= 0, got {options['intra_op_threads']}")
    provider = options["provider"]
    if provider == "auto":
        provider = device
    if provider not in PROVIDERS:
        raise BackendFailed(f"onnxruntime option provider={provider!r}; allowed: auto, {', '.join(PROVIDERS)}")
    if (provider == "cpu") != (device == "cpu"):
        raise BackendFailed(f"onnxruntime provider={provider} cannot run a {device} cell")
    available = _ort().get_available_providers()
    if PROVIDERS[provider] not in available:
        raise BackendFailed(f"onnxruntime has no {PROVIDERS[provider]} here (has {', '.join(available)})")
    return {**options, "provider": provider}


def _session_options(ort: Any, options: dict[str, Any]) -> Any:
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = levels[options["level"]]
    session_options.intra_op_num_threads = options["intra_op_threads"]
    session_options.log_severity_level = 3  # errors only: the NCHWc dump warning is expected
    return session_options


def _providers(provider: str, example: Any, cache_dir: Path) -> list[Any]:
    if provider == "cpu":
        return [PROVIDERS["cpu"]]
    import torch

    device_id = example.device.index or 0
    # ORT launches on torch's stream, so CUDA events and synchronize() see its work.
    cuda = (PROVIDERS["cuda"], {"device_id": device_id, "user_compute_stream": str(torch.cuda.current_stream().cuda_stream)})
    if provider == "cuda":
        return [cuda]
    engines = cache_dir / "ort-tensorrt-engines"
    engines.mkdir(parents=True, exist_ok=True)
    tensorrt = (PROVIDERS["tensorrt"], {
        "device_id": device_id, "trt_fp16_enable": example.dtype == torch.float16,
        "trt_engine_cache_enable": True, "trt_engine_cache_path": str(engines),
    })
    return [tensorrt, cuda]


class OrtPrepared(Prepared):
    dispatch_definition = "ONNX Runtime node executions per run, from ORT's profiler (one per optimised graph node)"

    def __init__(
        self, session: Any, source_path: Path, optimized_path: Path, options: dict[str, Any],
        providers: list[Any], example: Any, dtype: str,
    ) -> None:
        import numpy as np

        self.session = session
        self.source_path = source_path
        self.optimized_path = optimized_path
        self.options = options
        self.providers = providers
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self.on_cuda = options["provider"] != "cpu"
        self._profiled: dict[str, Any] | None = None
        if self.on_cuda:
            import torch

            # Bind the input and a preallocated output on the GPU: no host copies in the timed call.
            with torch.no_grad():
                reference_shape = tuple(session.run(None, {self.input_name: example.cpu().numpy()})[0].shape)
            self.output = torch.empty(reference_shape, dtype=example.dtype, device=example.device)
            self.element_type = np.dtype(_NUMPY_DTYPES[dtype]).type
            self.binding = session.io_binding()
            self.binding.bind_output(
                self.output_name, "cuda", example.device.index or 0, self.element_type, reference_shape,
                self.output.data_ptr(),
            )

    def __call__(self, batch: Any) -> Any:
        import torch

        if self.on_cuda:
            self.binding.bind_input(
                self.input_name, "cuda", batch.device.index or 0, self.element_type, tuple(batch.shape), batch.data_ptr()
            )
            self.session.run_with_iobinding(self.binding)
            return self.output
        return torch.from_numpy(self.session.run([self.output_name], {self.input_name: batch.numpy()})[0])

    def synchronize(self) -> None:
        synchronize("cuda" if self.on_cuda else "cpu")

    def fusion_report(self) -> FusionReport:
        import onnx

        source = onnx.load(str(self.source_path), load_external_data=False)
        optimized = onnx.load(str(self.optimized_path), load_external_data=False)
        via_tensorrt = self.options["provider"] == "tensorrt"
        return FusionReport(
            kernels=tuple(kernel_groups(source, optimized)),
            source=f"onnxruntime optimised graph (level {self.options['level']}, {self.options['provider']} provider)",
            approximate=via_tensorrt,
            notes="TensorRT subgraphs appear as single nodes; their inner fusions are not visible" if via_tensorrt else "",
        )

    def _profile(self, batch: Any) -> dict[str, Any]:
        """Run once more in a profiling session of the same graph and options; count node
        executions of the last run and read the arena peak ORT reports with each node."""
        if self._profiled is not None:
            return self._profiled
        ort = _ort()
        session_options = _session_options(ort, self.options)
        session_options.enable_profiling = True
        session_options.profile_file_prefix = str(self.optimized_path.with_name("ort-profile"))
        session = ort.InferenceSession(
            str(self.source_path), session_options, providers=self.providers,
            disabled_optimizers=self.options["disabled_optimizers"] or None,
        )
        feed = {self.input_name: batch.detach().cpu().numpy()}
        for _ in range(2):
            session.run([self.output_name], feed)
        events = json.loads(Path(session.end_profiling()).read_text())
        runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
        last_start = runs[-1]["ts"] if runs else 0
        nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
        in_last_run = [e for e in nodes if e["ts"] >= last_start]
        peaks = [int(e["args"]["mem_in_use_peak"]) for e in nodes if "mem_in_use_peak" in e.get("args", {})]
        held = [int(e["args"]["mem_arena_held"]) for e in nodes if "mem_arena_held" in e.get("args", {})]
        self._profiled = {
            "node_executions_per_run": len(in_last_run),
            "arena_peak_in_use_bytes": max(peaks) if peaks else None,
            "arena_held_bytes": max(held) if held else None,
        }
        return self._profiled

    def cpu_dispatches(self, batch: Any) -> int:
        return self._profile(batch)["node_executions_per_run"]

    def profile_figures(self, batch: Any) -> dict[str, Any]:
        return self._profile(batch)

    def close(self) -> None:
        self.session = None
