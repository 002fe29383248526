"""ONNX Runtime on the graph torch's exporter writes (batch norm kept; see backends/onnx_export.py).

Fusion is ONNX Runtime's own graph optimisation; fusion on and off differ by fusion alone:
- `fusion: on`  -> the optimisation level (default "all": ConvBNFusion, FusedConv, NCHWc
  convolutions with fused sums and activations on CPU, ...).
- `fusion: off` -> the same level with every fusing transformer left out (`FUSING_TRANSFORMERS`,
  by name), so constant folding, eliminations and the other rewrites still run. Three layout
  rewrites are left out too, and the cell records what was (`rewrites`): NchwcTransformer, the CPU
  layout rewrite, fuses sums and activations into its convolutions as it converts them and cannot
  be kept without those fusions; NhwcTransformer does the same to the NHWC convolutions it makes
  (quantized and fp16 graphs); TransposeOptimizer moves transposes through element-wise operators,
  after which the optimised graph no longer matches the exported one node for node (the fusion
  report would count a moved transpose as a fusion; it removes 2 of convnext_tiny's 46 transposes).
  `level: disable` with fusion off is the earlier "everything off": the export as it is.

Options (scenario file, `options:`):
- `level`: "disable" | "basic" | "extended" | "all", the optimisation-level ladder (default "all")
- `disabled_optimizers`: more ORT graph transformers to leave out, their names separated by
  commas, e.g. "ConvBNFusion,ConvAddFusion" (a scenario's option is one value; a list is taken too)
- `provider`: "auto" | "cpu" | "cuda" | "tensorrt" (default "auto": the cell's device; "tensorrt"
  needs onnxruntime-gpu built with TensorRT, and fuses inside TensorRT whatever the level says)
- `intra_op_threads`: threads per operator, 0 for ORT's default: one per physical core of the machine,
  or as many as the cores this process may use where they are fewer (a `--jobs` slot) (default 0)

Precision: fp32 runs the CUDA provider with `use_tf32=0` (IEEE), tf32 with `use_tf32=1`; fp16
needs a GPU provider. The CUDA provider's options are read back from the session
(`get_provider_options`) for the cell's math mode, and a session that fell back to the CPU
provider (a CUDA library missing) fails the cell instead of running on the wrong device. ORT's
TensorRT provider has no TF32 option (TensorRT allows TF32 by default), so it runs tf32 cells
only.

The fusion report comes from the optimised graph ORT writes (`optimized_model_filepath`);
CPU dispatches and the arena peak from ORT's profiler, in a separate session so the timed one
runs unprofiled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from backends.onnx_export import exported_onnx
from backends.onnx_graph import added_nodes, added_nodes_note, kernel_groups
from backends.torch_device import synchronize
from harness.contract import Availability, Backend, CpuKernelTimes, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport
from harness.options import BackendOptions, expect

PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


def _names(value: Any) -> Any:
    """A string of names separated by commas as their list (a scenario's option is one value)."""
    return [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value


class OnnxRuntimeOptions(BackendOptions):
    level: Literal["disable", "basic", "extended", "all"] = "all"
    disabled_optimizers: Annotated[list[str], BeforeValidator(_names)] = Field(default_factory=list)
    provider: Literal["auto", "cpu", "cuda", "tensorrt"] = "auto"
    intra_op_threads: int = Field(0, ge=0, le=4096)
# ONNX Runtime 1.31's graph transformers and rewrite rules that fuse operators, left out for fusion
# off, and the three layout rewrites explained above, by the names a session gives them (some carry
# their level: GeluFusionL1, GeluFusionL2). ORT takes a name it does not have without a word, so a
# fuser missing here ran in every fusion-off cell: ConvAddActivationFusion did (Conv, Add, Relu as
# one FusedConv with fusion off, 1.31.1), and GeluFusionL2. A test holds this list to every
# transformer a session of the installed ORT applies.
FUSING_TRANSFORMERS = (
    "ConvBNFusion", "ConvAddFusion", "ConvMulFusion", "ConvActivationFusion", "ConvAddActivationFusion",
    "GemmActivationFusion", "MatMulActivationFusion", "MatMulAddFusion", "MatmulBNFusion", "MatMulScaleFusion",
    "MatmulTransposeFusion", "GemmSumFusion", "GemmTransposeFusion", "FuseReluClip", "PadFusion", "DivMulFusion",
    "NotWhereFusion", "ReshapeFusion", "GeluFusion", "GeluFusionL1", "GeluFusionL2", "FastGeluFusion",
    "QuickGeluFusion", "BiasGeluFusion", "LayerNormFusion", "LayerNormFusionL1", "LayerNormFusionL2",
    "SimplifiedLayerNormFusion", "SkipLayerNormFusion", "BiasSkipLayerNormFusion", "AttentionFusion",
    "GroupQueryAttentionFusion", "GroupQueryAttentionPreNormFusion", "EmbedLayerNormFusion", "BiasSoftmaxFusion",
    "BiasDropoutFusion", "GatherSliceToSplitFusion", "GatherToSliceFusion", "SliceConcatToSpaceToDepthFusion",
    "LabelEncoderFusion", "DynamicQuantizeMatMulFusion", "MatMulIntegerToFloatFusion", "DQMatMulNBitsFusion",
    "MatMulNBitsFusion", "MatMulNBitsMlpFusion", "MatMulNBitsQkvFusion",
    "NchwcTransformer", "TransposeOptimizer", "NhwcTransformer",
    # the transpose optimizer as ORT names it in a session, after the provider: under the plain name
    # alone it still moved transposes past Gathers with fusion off (swin_b's cell counted 79 fusions)
    *(f"TransposeOptimizer_{provider}" for provider in PROVIDERS.values()),
)
#: Where ORT's TensorRT provider keeps the engines it builds, in a folder per export (named by the
#: export's key). The provider names an engine by the graph's file name (model.onnx for every
#: export), its tensors' names and the library versions, not by its weights or shapes: in one
#: folder for all, a model at another batch size, input size or seed found the first one's engine.
ENGINES_FOLDER = "ort-tensorrt-engines"
_DTYPES = ("fp32", "tf32", "fp16")
#: How ONNX Runtime's profiler names a node's kernel event: the node's name, then this.
_KERNEL_TIME = "_kernel_time"
#: The runs a profiling session times after its first, each a `cpu_kernel_times` answer.
_PROFILED_RUNS = 3


def _ort() -> Any:
    import onnxruntime

    return onnxruntime


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    options_model = OnnxRuntimeOptions
    # The exporter's onnxscript; not onnxruntime itself, whose import starts a thread.
    preload = ("onnxscript",)

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
        if dtype not in _DTYPES:
            return Availability.no(f"onnxruntime: {dtype} is not supported (fp32, and tf32 and fp16 on cuda)")
        provider = expect(self.name, OnnxRuntimeOptions, variant.options).provider
        if provider == "tensorrt" and dtype == "fp32":
            return Availability.no(
                "onnxruntime provider=tensorrt: ORT's TensorRT provider has no TF32 switch and TensorRT allows TF32 "
                "by default, so it cannot run IEEE fp32; use dtype tf32, or the tensorrt backend for fp32"
            )
        if dtype == "fp16" and device != "cuda":
            return Availability.no("onnxruntime: fp16 needs the CUDA or TensorRT provider; the CPU provider lacks fp16 convolutions")
        if provider == "tensorrt" and variant.fusion == "off":
            return Availability.no(
                "onnxruntime provider=tensorrt: TensorRT fuses inside its engine whatever ORT's level; "
                "use the tensorrt backend's approximate fusion=off instead"
            )
        if provider != "auto" and (provider == "cpu") != (device == "cpu"):  # as a tensorrt cell on a CPU is
            return Availability.no(f"onnxruntime provider={provider} runs {'cpu' if provider == 'cpu' else 'cuda'} "
                                   f"cells; this cell is {device}")
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
        stream = None
        if options.provider != "cpu":
            import torch

            # A stream of ORT's own, ordered with the caller's in each call (OrtPrepared.__call__): ORT
            # takes a user_compute_stream of 0 (torch's default stream) for none, and then runs on a
            # stream it makes, non-blocking, which nothing orders with torch's work on the input.
            stream = torch.cuda.Stream(device=example.device)
        providers = _providers(options.provider, example.device.index or 0, stream.cuda_stream if stream else None,
                               cache_dir / ENGINES_FOLDER / source_path.parent.name, tf32=dtype == "tf32",
                               fp16=dtype == "fp16")
        if options.provider != "cpu" and hasattr(ort, "preload_dlls"):
            ort.preload_dlls()  # CUDA and cuDNN from the nvidia-* wheels, when torch has not loaded them
        threads_before = _process_threads()
        try:
            session = ort.InferenceSession(
                str(source_path), session_options, providers=providers, disabled_optimizers=list(options.left_out) or None,
            )
        except Exception as exc:  # ORT raises its own exception types (Fail, InvalidGraph, ...)
            raise BackendFailed(f"onnxruntime could not load the exported graph: {type(exc).__name__}: {exc}") from exc
        check_provider(session, PROVIDERS[options.provider])
        prepared = OrtPrepared(session, source_path, optimized_path, options, providers, example, stream)
        prepared.pool_threads = _pool_threads(threads_before, _process_threads()) if options.provider == "cpu" else None
        prepared.prepare_cache = "warm" if hit else "cold"
        return prepared


@dataclass(frozen=True)
class SessionPlan:
    """A cell's session, as its options and device decide it: the provider ("auto" resolved) and
    the graph transformers left out (the file's, and the fusing ones for fusion off)."""

    level: str
    provider: str
    intra_op_threads: int
    left_out: tuple[str, ...]


def _checked_options(variant: Variant, device: str) -> SessionPlan:
    options = expect("onnxruntime", OnnxRuntimeOptions, variant.options)
    provider = device if options.provider == "auto" else options.provider
    if (provider == "cpu") != (device == "cpu"):
        raise BackendFailed(f"onnxruntime provider={provider} cannot run a {device} cell")
    available = _ort().get_available_providers()
    if PROVIDERS[provider] not in available:
        raise BackendFailed(f"onnxruntime has no {PROVIDERS[provider]} here (has {', '.join(available)})")
    left_out = set(options.disabled_optimizers) | (set(FUSING_TRANSFORMERS) if variant.fusion == "off" else set())
    return SessionPlan(options.level, provider, options.intra_op_threads or _slot_threads(), tuple(sorted(left_out)))


def _slot_threads() -> int:
    """The cores this process may run on where they are fewer than the machine's (a `--jobs` slot, a
    taskset), else 0 (ORT's default): ORT's default pool is one thread per physical core of the whole
    machine, each pinned to its core, so a slot's cell ran on the other slots' cores."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return allowed if 0 < allowed < (os.cpu_count() or 0) else 0


def _process_threads() -> int | None:
    """The threads this process runs now (Linux's /proc), or None where it cannot tell."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _pool_threads(before: int | None, after: int | None) -> int | None:
    """The threads a session's intra-op pool runs an operator on: the ones its making started, and
    the calling thread, which ORT's pool counts as one of its own (`intra_op_num_threads` 3: two
    started). The session's options say 0 where ORT chose the count itself (a thread per physical
    core), so the threads are counted, not read back."""
    return after - before + 1 if before is not None and after is not None and after >= before else None


def _session_options(ort: Any, options: SessionPlan) -> Any:
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = levels[options.level]
    session_options.intra_op_num_threads = options.intra_op_threads
    session_options.log_severity_level = 3  # errors only: the NCHWc dump warning is expected
    return session_options


def _providers(provider: str, device_id: int, stream: int | None, engines: Path, *, tf32: bool,
               fp16: bool) -> list[Any]:
    """The providers list for a session: `stream` is the CUDA stream ORT launches on (a torch
    stream the session's calls order with the caller's, so the harness's CUDA events and
    synchronize() see its work; not 0, which ORT takes for none). `engines` is where the
    TensorRT provider keeps its engines: a folder of the export's own (`ENGINES_FOLDER`)."""
    if provider == "cpu":
        return [PROVIDERS["cpu"]]
    cuda = (PROVIDERS["cuda"], {
        "device_id": device_id, "user_compute_stream": str(stream), "use_tf32": "1" if tf32 else "0",
    })
    if provider == "cuda":
        return [cuda]
    engines.mkdir(parents=True, exist_ok=True)
    tensorrt = (PROVIDERS["tensorrt"], {
        "device_id": device_id, "trt_fp16_enable": fp16,
        "trt_engine_cache_enable": True, "trt_engine_cache_path": str(engines), "user_compute_stream": str(stream),
    })
    return [tensorrt, cuda]


def check_provider(session: Any, wanted: str) -> None:
    """ONNX Runtime falls back to its CPU provider, silently, when a GPU provider's libraries do
    not load: refuse that session rather than time the wrong device."""
    running = session.get_providers()[0]
    if running != wanted:
        raise BackendFailed(
            f"onnxruntime fell back to {running}: {wanted} did not load here (a CUDA, cuDNN or TensorRT "
            "library is missing or of another version; the cell's log has ONNX Runtime's message)"
        )


def provider_math_mode(provider: str, reported: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The math a session runs with, from its provider options as ORT reports them
    (`InferenceSession.get_provider_options()`): the CUDA provider's `use_tf32`; the TensorRT
    provider has no TF32 option (TensorRT allows TF32 by default); the CPU provider computes IEEE
    fp32 and has none ({}: nothing beyond torch's state to record)."""
    if provider == "cpu":
        return {}
    if provider == "tensorrt":
        return {"tf32": True, "source": "TensorRT's default (ORT's TensorRT provider has no TF32 option)"}
    value = reported.get(PROVIDERS["cuda"], {}).get("use_tf32")
    if value is None:
        return {"unreadable": "the session's CUDA provider options have no use_tf32"}
    return {"tf32": value not in ("0", "false", "False"), "use_tf32": value,
            "source": "InferenceSession.get_provider_options()"}


class OrtPrepared(Prepared):
    dispatch_definition = "ONNX Runtime node executions per run, from ORT's profiler (one per optimised graph node)"

    def __init__(
        self, session: Any, source_path: Path, optimized_path: Path, options: SessionPlan,
        providers: list[Any], example: Any, stream: Any,
    ) -> None:
        import numpy as np

        self.session = session
        self.source_path = source_path
        self.optimized_path = optimized_path
        self.options = options
        self.providers = providers
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self.on_cuda = options.provider != "cpu"
        self.stream = stream  # the torch stream the session launches on (GPU providers; None on the CPU)
        self._profiled: dict[str, Any] | None = None
        #: the threads the timed session's intra-op pool runs (`_pool_threads`), on the CPU provider
        self.pool_threads: int | None = None
        self._kernel_runs: list[CpuKernelTimes] = []
        if self.on_cuda:
            import torch

            # Bind the input and a preallocated output on the GPU: no host copies in the timed call.
            # Each is bound as the element type it has, which need not be the cell's dtype: a language
            # model's input is its token ids (int64), and its output is float either way.
            reference = session.run(None, {self.input_name: example.cpu().numpy()})[0]
            output_dtype = torch.from_numpy(np.empty(0, reference.dtype)).dtype
            self.output = torch.empty(reference.shape, dtype=output_dtype, device=example.device)
            self.input_type = example.new_empty(()).cpu().numpy().dtype.type
            self.binding = session.io_binding()
            self.binding.bind_output(
                self.output_name, "cuda", example.device.index or 0, reference.dtype.type, tuple(reference.shape),
                self.output.data_ptr(),
            )

    def __call__(self, batch: Any) -> Any:
        import torch

        if self.on_cuda:
            # ORT's stream waits for the caller's work (the batch written, the last output read), and
            # the caller's for ORT's: the buffers are bound by address, outside any stream's order.
            current = torch.cuda.current_stream(batch.device)
            self.stream.wait_stream(current)
            self.binding.bind_input(
                self.input_name, "cuda", batch.device.index or 0, self.input_type, tuple(batch.shape), batch.data_ptr()
            )
            self.session.run_with_iobinding(self.binding)
            current.wait_stream(self.stream)
            return self.output
        return torch.from_numpy(self.session.run([self.output_name], {self.input_name: batch.numpy()})[0])

    def synchronize(self) -> None:
        synchronize("cuda" if self.on_cuda else "cpu")

    def fusion_report(self) -> FusionReport:
        import onnx

        source = onnx.load(str(self.source_path), load_external_data=False)
        optimized = onnx.load(str(self.optimized_path), load_external_data=False)
        via_tensorrt = self.options.provider == "tensorrt"
        notes = ["TensorRT subgraphs appear as single nodes; their inner fusions are not visible"] if via_tensorrt else []
        added = added_nodes(source, optimized)
        if added:
            notes.append(added_nodes_note(added))
        return FusionReport(
            kernels=tuple(kernel_groups(source, optimized)),
            source=f"onnxruntime optimised graph (level {self.options.level}, {self.options.provider} provider)",
            approximate=via_tensorrt,
            notes="; ".join(notes),
        )

    def rewrites(self) -> dict[str, Any]:
        import onnx

        node_types = {node.op_type for node in onnx.load(str(self.optimized_path), load_external_data=False).graph.node}
        return {
            "graph_optimization_level": self.options.level, "left_out": list(self.options.left_out),
            "layout": "NCHWc (blocked)" if {"ReorderInput", "ReorderOutput"} & node_types else "as exported (NCHW)",
        }

    def math_mode(self) -> dict[str, Any]:
        return provider_math_mode(self.options.provider, self.session.get_provider_options())

    def _profile(self, batch: Any) -> dict[str, Any]:
        """The figures of a profiling session of the same graph and options (`_profile_session`)."""
        if self._profiled is None:
            self._profile_session(batch)
        assert self._profiled is not None
        return self._profiled

    def _profile_session(self, batch: Any) -> None:
        """Run a profiling session of the same graph and options: one run to warm it, then
        `_PROFILED_RUNS`, each run's nodes with their kernels' times and operator types kept for
        `cpu_kernel_times`;
        the node executions of the last run and the arena peak ORT reports with each node."""
        ort = _ort()
        session_options = _session_options(ort, self.options)
        session_options.enable_profiling = True
        session_options.profile_file_prefix = str(self.optimized_path.with_name("ort-profile"))
        session = ort.InferenceSession(
            str(self.source_path), session_options, providers=self.providers,
            disabled_optimizers=list(self.options.left_out) or None,
        )
        feed = {self.input_name: batch.detach().cpu().numpy()}
        for _ in range(1 + _PROFILED_RUNS):
            session.run([self.output_name], feed)
        events = json.loads(Path(session.end_profiling()).read_text())
        runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                      key=lambda e: float(e["ts"]))[1:]
        nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith(_KERNEL_TIME)]
        per_run = [sorted((e for e in nodes if float(run["ts"]) <= float(e["ts"]) <= float(run["ts"]) + float(run.get("dur", 0))),
                          key=lambda e: float(e["ts"])) for run in runs]
        # each node's operator type, as ORT's profiler names it: the kind its time is summed under
        kinds = {e["name"].removesuffix(_KERNEL_TIME): str(e["args"]["op_name"])
                 for e in nodes if isinstance(e.get("args"), dict) and e["args"].get("op_name")}
        self._kernel_runs = [
            CpuKernelTimes(calls=tuple((e["name"].removesuffix(_KERNEL_TIME), float(e.get("dur", 0)) * 1e3) for e in in_run),
                           wall_ns=float(run.get("dur", 0)) * 1e3, kinds=kinds)
            for run, in_run in zip(runs, per_run) if float(run.get("dur", 0)) > 0
        ]
        peaks = [int(e["args"]["mem_in_use_peak"]) for e in nodes if "mem_in_use_peak" in e.get("args", {})]
        held = [int(e["args"]["mem_arena_held"]) for e in nodes if "mem_arena_held" in e.get("args", {})]
        self._profiled = {
            "node_executions_per_run": len(per_run[-1]) if per_run else 0,
            "arena_peak_in_use_bytes": max(peaks) if peaks else None,
            "arena_held_bytes": max(held) if held else None,
            **self._threads(),
        }

    def _threads(self) -> dict[str, Any]:
        """The timed session's thread pool as ORT holds it: threads per operator as set (0: ORT's
        default, one per physical core) and as run (`thread_pool_threads`, on the CPU provider:
        `compare` pairs no cells whose pools differ), and whether idle threads spin (ORT's default: yes)."""
        options = self.session.get_session_options()
        entries = options.get_session_config_entry if hasattr(options, "get_session_config_entry") else None
        try:
            spinning = entries("session.intra_op.allow_spinning") if entries else None
        except Exception:  # noqa: BLE001 - unset entries raise in some ORT versions
            spinning = None
        pool = {} if self.pool_threads is None else {"thread_pool_threads": self.pool_threads}
        return {**pool, "intra_op_threads_setting": options.intra_op_num_threads,
                "inter_op_threads_setting": options.inter_op_num_threads,
                "intra_op_allow_spinning": spinning or "1 (ORT's default)"}

    def cpu_dispatches(self, batch: Any) -> int:
        return int(self._profile(batch)["node_executions_per_run"])

    kernel_time_definition = ("each profiled run under ONNX Runtime's profiler: each node's kernel duration, named by "
                              "the optimised graph's node; their share of the run's duration applied to the timed median")

    def cpu_kernel_times(self, batch: Any) -> CpuKernelTimes | None:
        """A profiled run not given before: the next of the profiling session's, a new session once
        they are all given."""
        if not self._kernel_runs:
            self._profile_session(batch)
        return self._kernel_runs.pop(0) if self._kernel_runs else None

    def profile_figures(self, batch: Any) -> dict[str, Any]:
        return self._profile(batch)

    def close(self) -> None:
        self.session = None
