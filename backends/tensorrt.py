"""NVIDIA TensorRT (10.x and 11.x): an engine built from the graph torch's exporter writes (batch
norm kept as its own node; see backends/onnx_export.py), run on the GPU with `execute_async_v3`.

Fusion:
- `fusion: on`  -> TensorRT's own layer fusion, whatever it chooses.
- `fusion: off` -> TensorRT has no switch for it. Every intermediate activation of the ONNX graph
  (each source operator's output) is marked as a network output, so TensorRT has to write each
  one to memory and cannot fuse across it. This is an approximation (`FusionReport.approximate`):
  TensorRT may still fuse the layers it makes out of one source operator, an output tensor may
  cost a copy an unfused kernel would not need, and constant-only subgraphs are folded either way.

Precision (harness/precision.py): the network is strongly typed, the only kind TensorRT 11
builds (10 builds both): every layer computes in the type the exported graph gives it, so fp16
and bf16 cells export an fp16 or bf16 graph and need no builder flag (TensorRT 11 has none). fp32
cells clear `BuilderFlag.TF32` (on by default): IEEE fp32; tf32 cells set it. The flag is read
back from the builder config when the engine is built and reported as the cell's math mode.
bf16 needs compute capability 8.0 or newer.

Options (scenario file, `options:`):
- `workspace_mib`: the builder's workspace memory pool limit, MiB (default 4096)
- `builder_optimization_level`: 0-5, how hard the builder searches for tactics (default 3)

The serialized engine, the inspector's layer information and the ONNX node -> op type map are
cached per model weights, input shape, dtype, fusion, options, TensorRT version and GPU model.
The fusion report comes from the engine inspector with DETAILED profiling verbosity (see
backends/tensorrt_layers.py); kernel launches are counted by the harness's CUDA profiler.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from backends.onnx_export import exported_onnx
from backends.tensorrt_layers import (
    engine_layers,
    intermediate_outputs,
    onnx_activations,
    onnx_attention_calls,
    onnx_op_types,
)
from harness.artifact_cache import cached_dir, fingerprint
from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport
from harness.options import BackendOptions, expect


class TensorRTOptions(BackendOptions):
    workspace_mib: int = Field(4096, gt=0, le=1 << 20)
    builder_optimization_level: int = Field(3, ge=0, le=5)

    @model_validator(mode="before")
    @classmethod
    def _no_tf32(cls, data: Any) -> Any:
        if isinstance(data, dict) and "tf32" in data:
            raise ValueError("option tf32 is gone: the cell's dtype decides (fp32: TF32 off, tf32: TF32 on)")
        return data


DTYPES = ("fp32", "tf32", "fp16", "bf16")
OUTPUT_NAME = "output"  # the exporter's name for the model's output (backends/onnx_export.py)
PLAN_FILE, LAYERS_FILE, OPS_FILE, BUILD_FILE = "engine.plan", "layers.json", "onnx_ops.json", "build.json"
CALLS_FILE = "onnx_attention_calls.json"
# Bump when what a cached engine directory holds, or how it is built, changes (v3: CALLS_FILE).
ENGINE_FORMAT = "trt-engine-v3-strongly-typed"
#: IExecutionContext::setTensorAddress takes only addresses aligned this much (it answers false otherwise).
TENSOR_ALIGNMENT = 256
_PARSER_ERRORS_SHOWN = 3

_logger: Any = None


def _trt() -> Any:
    try:
        import tensorrt
    except ImportError:  # the tensorrt-cu13-bindings wheel alone provides the same API under this name
        import tensorrt_bindings as tensorrt
    return tensorrt


class TensorRTBackend(Backend):
    name = "tensorrt"
    options_model = TensorRTOptions

    def availability(self, device: str) -> Availability:
        if device != "cuda":
            return Availability.no("TensorRT runs only on NVIDIA GPUs; run its cells with device cuda")
        try:
            trt = _trt()
        except (ImportError, OSError) as exc:  # OSError: the wheel is there but libnvinfer is not
            return Availability.no(
                f"tensorrt is not importable ({exc}); ./run.sh installs it on a GPU host (requirements-gpu.lock), "
                "or: pip install --extra-index-url https://pypi.nvidia.com tensorrt-cu13"
            )
        major = _major(trt.__version__)
        if major < 10:
            return Availability.no(f"TensorRT {trt.__version__} found; this backend needs TensorRT 10 or newer")
        try:
            import onnx  # noqa: F401  (the fusion report reads the exported graph)
            import onnxscript  # noqa: F401  (torch's exporter needs it)
        except ImportError as exc:
            return Availability.no(f"{exc.name} is not installed (pip install onnx onnxscript)")
        from backends.torch_device import torch_availability

        return torch_availability("cuda")

    def supports(self, variant: Variant, dtype: str, device: str) -> Availability:
        if device != "cuda":
            return Availability.no("TensorRT runs only on NVIDIA GPUs")
        if dtype not in DTYPES:
            return Availability.no(f"tensorrt: {dtype} is not supported ({', '.join(DTYPES)})")
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        return {"tensorrt": _trt().__version__, **_exporter_versions()}

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        options = expect(self.name, TensorRTOptions, variant.options)
        if device != "cuda":
            raise BackendFailed("TensorRT runs only on NVIDIA GPUs (device cuda)")
        if variant.fusion not in ("on", "off"):
            raise BackendFailed(f"tensorrt fusion={variant.fusion!r}; allowed: on, off")
        import torch

        trt = _trt()
        index = example.device.index if example.device.index is not None else torch.cuda.current_device()
        gpu, capability = torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index)
        if dtype == "bf16" and capability < (8, 0):
            raise BackendFailed(
                f"TensorRT bf16 needs compute capability 8.0 or newer; {gpu} has {capability[0]}.{capability[1]}"
            )
        # The engine is specific to the TensorRT version and the GPU model, and is built from an
        # export that depends on torch, onnx and onnxscript.
        key = fingerprint(
            model, example, tensorrt=trt.__version__, gpu=gpu, capability=list(capability), dtype=dtype,
            fusion=variant.fusion, options=options.model_dump(), format=ENGINE_FORMAT, exporter=_exporter_versions(),
        )
        entry = cache_dir / "engines" / key
        built: dict[str, Any] = {}
        hit = cached_dir(
            entry, lambda tmp: _build(trt, model, example, cache_dir, tmp, dtype, variant.fusion, options, built)
        )
        runtime = built.get("runtime") or trt.Runtime(_collecting_logger(trt))
        engine = built.get("engine")
        if engine is None:
            engine = runtime.deserialize_cuda_engine((entry / PLAN_FILE).read_bytes())
            if engine is None:
                raise BackendFailed(f"TensorRT could not load the cached engine {entry / PLAN_FILE}: {_errors()}")
        build = json.loads((entry / BUILD_FILE).read_text())
        prepared = TensorRTPrepared(
            runtime, engine, example, fusion=variant.fusion,
            layer_info=(entry / LAYERS_FILE).read_text(), op_types=json.loads((entry / OPS_FILE).read_text()),
            attention_calls=json.loads((entry / CALLS_FILE).read_text()),
            marked_outputs=build["marked_intermediate_outputs"], activations=build["onnx_activations"],
            plan_bytes=(entry / PLAN_FILE).stat().st_size, tf32_flag=build["tf32_flag"],
        )
        prepared.prepare_cache = "warm" if hit else "cold"
        return prepared


def _exporter_versions() -> dict[str, str]:
    import onnx
    import onnxscript
    import torch

    return {"torch": torch.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__}


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def _collecting_logger(trt: Any) -> Any:
    """One logger per process (TensorRT keeps it for every builder and runtime it made): it
    prints warnings and errors to stderr (the cell's log) and keeps the errors for messages."""
    global _logger
    if _logger is None:
        shown = {trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR, trt.ILogger.WARNING}
        errors = {trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR}

        class CollectingLogger(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)
                self.errors: list[str] = []

            def log(self, severity: Any, msg: str) -> None:
                if severity in errors:
                    self.errors.append(msg)
                if severity in shown:
                    print(f"[TensorRT {severity.name}] {msg}", file=sys.stderr)

        _logger = CollectingLogger()
    return _logger


def _errors() -> str:
    """The last errors TensorRT logged, for a BackendFailed message; clears them."""
    if _logger is None or not _logger.errors:
        return "no error logged"
    text = " | ".join(_logger.errors[-3:])
    _logger.errors.clear()
    return text[:600]


def _parser_error(error: Any) -> str:
    where = ""
    node_name = getattr(error, "node_name", None)  # TensorRT 10 parser errors name the ONNX node
    if callable(node_name) and node_name():
        operator = getattr(error, "node_operator", None)
        where = f" (node {node_name()}{f', {operator()}' if callable(operator) and operator() else ''})"
    return f"{error.desc()}{where}"


def _build(
    trt: Any, model: Any, example: Any, cache_dir: Path, out: Path, dtype: str, fusion: str,
    options: TensorRTOptions, built: dict[str, Any],
) -> None:
    """Export, parse, build and inspect; write the artifacts into `out` (cached_dir's temp dir)."""
    import onnx

    onnx_path, _ = exported_onnx(model, example, cache_dir)
    logger = _collecting_logger(trt)
    logger.errors.clear()
    builder = trt.Builder(logger)
    # Strongly typed: TensorRT 11's only mode (the flag is deprecated there and ignored), 10's opt-in.
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):  # from the file, so external weights are found
        shown = [_parser_error(parser.get_error(i)) for i in range(min(parser.num_errors, _PARSER_ERRORS_SHOWN))]
        more = parser.num_errors - len(shown)
        raise BackendFailed(
            "TensorRT's ONNX parser rejected the exported graph: "
            + ("; ".join(shown) or _errors()) + (f" (and {more} more)" if more > 0 else "")
        )
    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    activations = onnx_activations(graph)
    marked = 0
    if fusion == "off":
        for tensor in intermediate_outputs(
            network, names=activations,
            skip_layer_types={trt.LayerType.CONSTANT, trt.LayerType.SHAPE},
            activation_types={trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16},
        ):
            network.mark_output(tensor)
            marked += 1
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mib << 20)
    config.builder_optimization_level = options.builder_optimization_level
    if dtype == "tf32":
        config.set_flag(trt.BuilderFlag.TF32)
    else:
        config.clear_flag(trt.BuilderFlag.TF32)  # IEEE fp32 (the flag only concerns fp32 layers)
    tf32_flag = bool(config.get_flag(trt.BuilderFlag.TF32))
    # DETAILED keeps each layer's ONNX nodes (Metadata) for the inspector, and costs no speed.
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise BackendFailed(f"TensorRT could not build an engine: {_errors()}")
    with open(out / PLAN_FILE, "wb") as file:
        file.write(plan)
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        raise BackendFailed(f"TensorRT could not load the engine it just built: {_errors()}")
    inspector = engine.create_engine_inspector()
    (out / LAYERS_FILE).write_text(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    (out / OPS_FILE).write_text(json.dumps(onnx_op_types(graph), sort_keys=True))
    (out / CALLS_FILE).write_text(json.dumps(onnx_attention_calls(graph), sort_keys=True))
    (out / BUILD_FILE).write_text(json.dumps({
        "marked_intermediate_outputs": marked, "onnx_activations": len(activations), "tensorrt": trt.__version__,
        "tf32_flag": tf32_flag,
    }))
    built.update(runtime=runtime, engine=engine)


def engine_fusion_report(
    layer_info: str, op_types: dict[str, str], *, fusion: str, marked_outputs: int, activations: int,
    attention_calls: dict[str, list[str]] | None = None,
) -> FusionReport:
    """The fusion report of an engine from its inspector JSON text, the ONNX node -> op type map and
    the nodes that are parts of the model's own attention calls (`onnx_attention_calls`)."""
    # strict=False: Metadata separates ONNX nodes with raw \x1e/\x1f, which strict JSON rejects.
    layers = engine_layers(json.loads(layer_info, strict=False), op_types, attention_calls)
    notes = [
        "one TensorRT engine layer per kernel group; a layer may launch more than one CUDA kernel "
        "(the profiler's kernel count is the launch count)"
    ]
    if fusion == "off":
        notes.append(
            f"TensorRT cannot switch fusion off: {marked_outputs} of the {activations} intermediate ONNX "
            "activations were marked as network outputs (the others are constant or absent from TensorRT's "
            "network), so TensorRT must write each to memory and cannot fuse across it; layers made from one "
            "source operator may still fuse, and a marked output may cost an extra copy"
        )
    if layers.from_names:
        notes.append(f"{layers.from_names} layer(s) carried no ONNX metadata; their operators were read from layer names")
    if layers.unresolved:
        shown = ", ".join(layers.unresolved[:5])
        more = ", ..." if len(layers.unresolved) > 5 else ""
        notes.append(f"{len(layers.unresolved)} name(s) in layers matched no ONNX node ({shown}{more})")
    return FusionReport(
        kernels=layers.groups,
        source="TensorRT engine inspector (DETAILED layer information, ONNX node metadata)",
        approximate=fusion == "off",
        notes="; ".join(notes),
    )


def _torch_dtypes(trt: Any) -> dict[Any, Any]:
    import torch

    return {
        trt.DataType.FLOAT: torch.float32, trt.DataType.HALF: torch.float16, trt.DataType.BF16: torch.bfloat16,
        trt.DataType.INT8: torch.int8, trt.DataType.UINT8: torch.uint8, trt.DataType.INT32: torch.int32,
        trt.DataType.INT64: torch.int64, trt.DataType.BOOL: torch.bool,
    }


def _aligned_empty(like: Any) -> Any:
    """An uninitialised contiguous tensor shaped and typed as `like`, on its device, whose address
    is `TENSOR_ALIGNMENT`-aligned whatever the allocator's alignment."""
    import torch

    size = like.numel() * like.element_size()
    raw = torch.empty(size + TENSOR_ALIGNMENT, dtype=torch.uint8, device=like.device)
    start = -raw.data_ptr() % TENSOR_ALIGNMENT
    return raw[start:start + size].view(like.dtype).view(like.shape)


class TensorRTPrepared(Prepared):
    dispatch_definition = "none: TensorRT runs only on GPU; its kernel launches are counted by the CUDA profiler"

    def __init__(
        self, runtime: Any, engine: Any, example: Any, *, fusion: str, layer_info: str,
        op_types: dict[str, str], marked_outputs: int, activations: int, plan_bytes: int, tf32_flag: bool,
        attention_calls: dict[str, list[str]] | None = None,
    ) -> None:
        import torch

        trt = _trt()
        self.runtime = runtime  # kept alive for as long as the engine
        self.engine = engine
        self.fusion = fusion
        self.layer_info = layer_info
        self.op_types = op_types
        self.attention_calls = attention_calls or {}
        self.marked_outputs = marked_outputs
        self.activations = activations
        self.plan_bytes = plan_bytes
        self.tf32_flag = tf32_flag
        self.context = engine.create_execution_context()
        if self.context is None:
            raise BackendFailed(f"TensorRT could not create an execution context: {_errors()}")
        dtypes = _torch_dtypes(trt)
        inputs: list[str] = []
        # Every output, the extra ones of fusion off included, gets a buffer allocated once here.
        self.buffers: dict[str, Any] = {}
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            shape = tuple(engine.get_tensor_shape(name))
            trt_dtype = engine.get_tensor_dtype(name)
            dtype = dtypes.get(trt_dtype)
            if dtype is None or any(dim < 0 for dim in shape):
                raise BackendFailed(f"TensorRT tensor {name}: unsupported dtype {trt_dtype} or dynamic shape {shape}")
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                if shape != tuple(example.shape) or dtype != example.dtype:
                    raise BackendFailed(
                        f"TensorRT input {name} is {shape} {dtype}; the cell feeds {tuple(example.shape)} {example.dtype}"
                    )
                inputs.append(name)
                continue
            buffer = torch.empty(shape, dtype=dtype, device=example.device)
            if not self.context.set_tensor_address(name, buffer.data_ptr()):
                raise BackendFailed(f"TensorRT refused the address of output {name}: {_errors()}")
            self.buffers[name] = buffer
        if len(inputs) != 1 or OUTPUT_NAME not in self.buffers:
            raise BackendFailed(
                f"TensorRT engine has inputs {inputs} and outputs {sorted(self.buffers)[:5]}; "
                f"expected one input and an output named '{OUTPUT_NAME}'"
            )
        self.input_name = inputs[0]
        self.output = self.buffers[OUTPUT_NAME]
        # Where a batch whose address TensorRT would refuse is copied to (see __call__).
        self.aligned_input = _aligned_empty(example)
        # TensorRT adds stream synchronisations when enqueued on the legacy default stream, which
        # is torch's current stream unless the caller chose another; so it runs on a stream of
        # its own, ordered after and before the caller's current stream with two events.
        self.stream = torch.cuda.Stream(device=example.device)
        self.stream_handle = self.stream.cuda_stream
        self.inputs_ready = torch.cuda.Event()
        self.outputs_ready = torch.cuda.Event()

    def __call__(self, batch: Any) -> Any:
        import torch

        current = torch.cuda.current_stream(batch.device)
        # The batch may be a different tensor on each call: its address is set each time. A batch
        # that is a view at an offset into a larger stack (LoadGen's batches, the check after
        # timing) need not be 256-byte aligned (mmoe_small's 400-byte samples): TensorRT refuses
        # its address and would run on the address it had before, so it is copied to a buffer
        # that is, on the caller's stream before the engine's waits for it (and after the engine
        # of the call before finished reading it: the caller's stream waited for that).
        if batch.data_ptr() % TENSOR_ALIGNMENT or not batch.is_contiguous():
            batch = self.aligned_input.copy_(batch)
        self.inputs_ready.record(current)
        self.stream.wait_event(self.inputs_ready)
        if not self.context.set_tensor_address(self.input_name, batch.data_ptr()):
            raise BackendFailed(f"TensorRT refused the address of input {self.input_name}: {_errors()}")
        if not self.context.execute_async_v3(self.stream_handle):
            raise BackendFailed(f"TensorRT execute_async_v3 failed: {_errors()}")
        self.outputs_ready.record(self.stream)
        current.wait_event(self.outputs_ready)
        return self.output

    def synchronize(self) -> None:
        import torch

        torch.cuda.current_stream().synchronize()  # it waits on the engine's stream (see __call__)

    def fusion_report(self) -> FusionReport:
        return engine_fusion_report(
            self.layer_info, self.op_types, fusion=self.fusion, marked_outputs=self.marked_outputs,
            activations=self.activations, attention_calls=self.attention_calls,
        )

    def rewrites(self) -> dict[str, Any]:
        if self.fusion == "on":
            return {"layer_fusion": "TensorRT's own"}
        return {"layer_fusion": f"approximately off: {self.marked_outputs} intermediate activations marked as outputs"}

    def math_mode(self) -> dict[str, Any]:
        return {"tf32": self.tf32_flag, "source": "IBuilderConfig.get_flag(BuilderFlag.TF32) when the engine was built"}

    def profile_figures(self, batch: Any) -> dict[str, Any]:
        layers = json.loads(self.layer_info, strict=False).get("Layers", [])
        return {
            "engine_plan_bytes": self.plan_bytes,
            "engine_layer_count": len(layers),
            "marked_intermediate_outputs": self.marked_outputs,
        }

    def close(self) -> None:
        # Release in dependency order: context, engine, then the runtime that made it.
        self.context = None
        self.engine = None
        self.runtime = None
        self.buffers = {}
        self.output = None
        self.aligned_input = None
