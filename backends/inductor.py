"""TorchInductor through `torch.compile`: C++/OpenMP kernels on CPU, Triton kernels on GPU.

Fusion on is Inductor as shipped, with freezing. Inductor has no switch for fusion off: it
fuses while lowering (pointwise producers are inlined into consumers) and again in the
scheduler. `fusion: off` therefore patches three places for the length of the compile:
every FX node's result is realized into a buffer of its own as soon as it is lowered, the
scheduler may fuse no two nodes, and the C++ backend emits each node as its own function
(instead of grouping consecutive loop nests into one). The result is one ATen operator (after
Inductor's decompositions: batch norm becomes its arithmetic) per generated kernel.

Fusion on and off differ by fusion alone: freezing is a setting of its own, on in both by
default. With fusion off, freezing keeps its rewrites that fuse nothing (constants, constant
folding, channels-last weights, oneDNN weight prepacking) and loses the ones that do: batch
norm folded into the convolution's weights, oneDNN activation and sum epilogues, concat-linear
(backends/inductor_freezing.py). Each cell records which rewrites ran (`rewrites`).

Options (scenario file, `options:`):
- `mode`: torch.compile mode: "default", "max-autotune" (default "default"); CUDA graphs are the
  variant `graphs: on` ("reduce-overhead"), not a mode here
- `freezing`: parameters become constants, folded and prepacked (default true); `freezing: false`
  with `fusion: off` is the earlier "everything off"
- `layout_optimization`: Inductor's choice of the channels-last layout for a graph's convolutions
  (default true, as shipped). False keeps the model's own layout (NCHW), so that the cost of the
  layout change (transposes around library convolutions, other algorithms chosen for them) can
  be measured apart from fusion. On CPU with freezing, oneDNN's prepacked convolutions take
  channels-last whatever this says; the setting shows there without freezing.

Models of nn.LSTM, nn.GRU or nn.RNN are traced (Dynamo's `allow_rnn`, off by default: they would
run as eager, with no Inductor code); each cell records whether its torch could (`rnn_modules_traced`).

A cell's compile starts cold: Inductor's and Triton's on-disk caches are folders of the cell's own
(`scratch_env`), empty for its first round, so `prepare_s` is a cold compile and the generated code
is really produced. A further round of the cell (`timing: {rounds: N}`) finds those folders as the
rounds before it left them and compiles warm (`prepare_cache: warm`): the code is generated again
(the graph and AOTAutograd caches stay off, so the fusion report is always the compile's own), its
kernels' builds come from the code cache. Prepared outside a worker (no folder given), every cache
is off. What a compile does once for the whole machine (the check of the CPU's vector instruction
sets, the C++ prefix's precompiled header) is timed apart and left out of `prepare_s`
(backends/inductor_toolchain.py): the first cell of a machine is charged no more than the others;
the check's test programs that passed are recorded for the machine, so that a later cell builds
none of them (backends/inductor_isa.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from unittest import mock

from backends import inductor_isa, inductor_toolchain, torch_kernel_time
from backends.inductor_attention import AttentionWatch, is_attention_rewrite
from backends.inductor_code import branch_note, generated_kinds, placed_back, placed_kernel_calls, region_calls, subgraph_kernels
from backends.inductor_folding import FoldWatch
from backends.inductor_freezing import freezing_without_fusion
from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, CpuKernelTimes, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport, KernelGroup
from harness.options import BackendOptions, expect

GENERATED_PREFIX = "cpp_fused"  # Inductor's name for the C++ kernels it generates
Mode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class InductorOptions(BackendOptions):
    mode: Mode = "default"
    freezing: bool = True
    layout_optimization: bool = True


class InductorBackend(Backend):
    name = "inductor"
    cuda_graphs = True
    options_model = InductorOptions
    # Inductor's and Triton's on-disk caches: folders of each cell's own, shared by its rounds only
    scratch_env = {"TORCHINDUCTOR_CACHE_DIR": "inductor-cache", "TRITON_CACHE_DIR": "triton-cache"}
    preload = ("torch._inductor.compile_fx",)  # about 1.5 CPU-seconds; it reads no scratch variable on import

    def availability(self, device: str) -> Availability:
        basic = torch_availability(device)
        if not basic.ok:
            return basic
        if device == "cuda":
            from torch.utils._triton import has_triton

            if not has_triton():
                return Availability.no("Triton is not importable with a supported GPU; Inductor cannot generate GPU kernels")
        elif not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
            return Availability.no("no C++ compiler (g++, c++ or clang++) on PATH; Inductor compiles its CPU kernels with one")
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        import torch

        versions = {"torch": torch.__version__}
        try:
            import triton

            versions["triton"] = triton.__version__
        except ImportError:
            pass
        return versions

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        options = expect(self.name, InductorOptions, variant.options)
        import torch
        import torch._inductor.config as inductor_config
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        fused = variant.fusion == "on"
        watch, attention = FoldWatch(), AttentionWatch()
        # fusion on: which operators each attention call Inductor makes replaced; off: no rewrite makes one
        lowering = attention.recording() if fused else _unfused_lowering()
        no_folding = freezing_without_fusion() if options.freezing and not fused else contextlib.nullcontext()
        watching = options.freezing and fused  # only then can a batch norm be folded away

        def post_grad(graph: Any) -> None:
            attention.post_grad(graph)
            if watching:
                watch.post_grad(graph)

        hooks = {"post_grad_custom_pre_pass": _graph_pass(post_grad),
                 **({"pre_grad_custom_pass": _graph_pass(watch.pre_grad)} if watching else {})}
        own_caches = _own_cache_folder()
        warm = own_caches is not None and own_caches.is_dir() and any(own_caches.iterdir())
        # Never a whole graph from the graph cache: the code is generated again in every round (so the
        # fusion report is the compile's own, whatever patches the variant makes); only its kernels'
        # builds come from the code cache of a further round.
        patches = {"force_disable_caches": own_caches is None, "fx_graph_cache": False, "freezing": options.freezing,
                   "layout_optimization": options.layout_optimization,
                   **(hooks if fused else {})}
        mode = compile_mode(options.mode, variant.graphs, device)
        if variant.graphs == "on" and hasattr(inductor_config.triton, "cudagraph_or_error"):
            # A graph Inductor declines to capture (an operator it deems unsafe, a CPU tensor) would
            # otherwise run uncaptured, with a warning only, in a cell that says graphs: on.
            patches["triton.cudagraph_or_error"] = True
        loaded: list[Any] = []
        with inductor_config.patch(**patches), _no_autograd_cache(), _rnn_traced() as rnn_traced, lowering, \
                no_folding, _loaded_modules(loaded), inductor_isa.recorded_builds(device), \
                inductor_toolchain.watch() as toolchain, torch.no_grad():
            compiled = torch.compile(model, mode=None if mode == "default" else mode, dynamic=False)
            # Compilation happens on the first call; capture the wrapper code it generates.
            try:
                _, sources = run_and_get_code(compiled, example)
            except Exception as exc:
                if variant.graphs == "on" and "cudagraph" in str(exc):
                    raise BackendFailed(f"Inductor would not capture the model in CUDA graphs (graphs: on): {exc}") from exc
                raise
        if not sources:
            raise BackendFailed("torch.compile produced no Inductor code: Dynamo traced no graph of the model (a module "
                                "it skips, or a break at every operator), so the whole model ran as eager")
        aten = [name for name in dir(torch.ops.aten) if not name.startswith("__")]
        placed = [placed_kernel_calls(source, aten) for source in sources]
        # Each graph's own kernels are read again against its passes' records (the attention calls and the
        # convolutions in its post-grad graph's order), a nested_compile_region's listed as its code runs them.
        per_graph = [[group for group, subgraph in graph if subgraph is None] for graph in placed]
        per_graph, attention_note = attention.attribute(per_graph) if fused else (per_graph, "")
        if watching:
            own, note = watch.attribute(per_graph)
        else:  # nothing folded into weights: freezing off, or fusion off (freezing without its folding)
            own = [group for groups in per_graph for group in groups]
            note = ("no operator was folded into weights at compile time ("
                    + ("freezing off" if not options.freezing else "fusion off: freezing without its folding") + ")")
        kernels = placed_back(own, placed)
        branches: dict[str, int] = {}
        others: dict[str, int] = {}
        regions: dict[str, int] = {}
        for source in sources:
            in_branches, outside = subgraph_kernels(source, aten)
            branches.update(in_branches)
            others.update(outside)
            for name, calls in region_calls(source).items():
                regions[name] = regions.get(name, 0) + calls
        note = "; ".join(part for part in (note, attention_note, branch_note(branches, others, regions)) if part)
        wrappers = [m for m in loaded if callable(getattr(m, "call", None))]
        prepared = InductorPrepared(compiled, device, kernels, graphs=len(sources), folding_note=note, wrappers=wrappers)
        prepared.prepare_cache = "warm" if warm else "cold"
        prepared.toolchain_s = toolchain.seconds
        prepared.rewrite_record = {
            "compile_mode": mode, "freezing": options.freezing,
            "constant_folding": options.freezing, "onednn_weight_prepack": options.freezing and device == "cpu",
            "conv_bn_folding": options.freezing and fused, "onednn_epilogues": options.freezing and fused and device == "cpu",
            "lowering_inlining": fused, "scheduler_fusion": fused, "rnn_modules_traced": rnn_traced,
            "layout_optimization": options.layout_optimization,
        }
        return prepared


@contextlib.contextmanager
def _no_autograd_cache() -> Iterator[None]:
    """AOTAutograd's cache off too: like the graph cache, it would skip the code generation."""
    import torch._functorch.config as functorch_config

    if not hasattr(functorch_config, "enable_autograd_cache"):
        yield
        return
    with functorch_config.patch(enable_autograd_cache=False):
        yield


@contextlib.contextmanager
def _rnn_traced() -> Iterator[bool]:
    """Dynamo skips nn.LSTM, nn.GRU and nn.RNN unless told (`allow_rnn`), so a model of them ran as
    eager with no Inductor code (the global-analysis suite's LSTM): traced, each layer is one call
    of oneDNN's RNN kernel (`aten.mkldnn_rnn_layer` on CPU) in Inductor's graph, fusion on and off.
    Yields whether they are traced: a torch without the setting leaves them to eager."""
    import torch._dynamo.config as dynamo_config

    if not hasattr(dynamo_config, "allow_rnn"):
        yield False
        return
    with dynamo_config.patch(allow_rnn=True):
        yield True


def _own_cache_folder() -> Path | None:
    """Inductor's cache folder where the worker gave the cell one (`scratch_env`), else None. Inductor
    names its default folder in the variable once it has used it, and that folder is shared by
    every compile of the machine (fusion on and off alike): not the cell's own."""
    import os

    named = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # a torch that lays its caches out otherwise: keep them off
        return None
    if not named or os.path.abspath(named) == os.path.abspath(default_cache_dir()):
        return None
    return Path(named)


def _graph_pass(function: Any) -> Any:
    """`function` as an Inductor custom graph pass that only observes: no cache key (uuid None), which
    is right since the graph cache is always off here."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError:  # older torch: a plain callable is a custom pass
        return function

    class Observer(CustomGraphPass):
        def __call__(self, graph: Any) -> None:
            function(graph)

        def uuid(self) -> None:
            return None

    return Observer()


@contextlib.contextmanager
def _loaded_modules(loaded: list[Any]) -> Iterator[None]:
    """Collect the Python modules Inductor loads while compiling: the generated wrappers, whose
    C++ kernels the CPU kernel-time split wraps later."""
    from torch._inductor.codecache import PyCodeCache

    load = PyCodeCache.load_by_key_path.__func__

    def recording(cls: Any, *args: Any, **kwargs: Any) -> Any:
        module = load(cls, *args, **kwargs)
        loaded.append(module)
        return module

    with mock.patch.object(PyCodeCache, "load_by_key_path", classmethod(recording)):
        yield


def compile_mode(mode: str, graphs: str, device: str) -> str:
    """torch.compile's mode for the option and the graphs setting: CUDA graphs come from
    `reduce-overhead` (and `max-autotune`, which includes them), and only when `graphs: on`, so
    that a cell's graphs setting says whether it replays graphs."""
    if graphs == "on":
        if mode == "max-autotune-no-cudagraphs":
            raise BackendFailed("inductor mode=max-autotune-no-cudagraphs contradicts graphs: on")
        return "reduce-overhead" if mode == "default" else mode
    if mode == "reduce-overhead":
        raise BackendFailed("inductor mode=reduce-overhead is Inductor's CUDA graphs: ask for them with graphs: on")
    return "max-autotune-no-cudagraphs" if mode == "max-autotune" and device == "cuda" else mode


@contextlib.contextmanager
def _unfused_lowering() -> Iterator[None]:
    """One operator per kernel: realize every lowered FX node, forbid scheduler fusion, flush the
    C++ kernel group after every node, and apply none of the attention rewrites, which put a
    matmul, a softmax and a matmul into one `_scaled_dot_product_..._attention` call (BERT's 12
    attentions ran so with fusion off). Patches Inductor internals, checked to exist first."""
    from torch._inductor import ir
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.graph import GraphLowering
    from torch._inductor.pattern_matcher import ReplacementPatternEntry
    from torch._inductor.scheduler import Scheduler

    for owner, attribute in ((GraphLowering, "run_node"), (Scheduler, "can_fuse"), (CppScheduling, "ready_to_flush"),
                             (ReplacementPatternEntry, "apply")):
        if not callable(getattr(owner, attribute, None)):
            raise BackendFailed(
                f"inductor fusion=off needs {owner.__name__}.{attribute}, which this torch does not have"
            )
    lower = GraphLowering.run_node

    def run_node_realized(self: Any, node: Any) -> Any:
        result = lower(self, node)
        if node.op == "call_function" and isinstance(result, ir.TensorBox) and isinstance(result.data, ir.StorageBox):
            result.realize()
        return result

    replace = ReplacementPatternEntry.apply

    def replace_unless_attention(self: Any, match: Any, graph: Any, node: Any) -> Any:
        return None if is_attention_rewrite(self) else replace(self, match, graph, node)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(GraphLowering, "run_node", run_node_realized))
        stack.enter_context(mock.patch.object(Scheduler, "can_fuse", lambda self, *args, **kwargs: False))
        stack.enter_context(mock.patch.object(CppScheduling, "ready_to_flush", lambda self: True))
        stack.enter_context(mock.patch.object(ReplacementPatternEntry, "apply", replace_unless_attention))
        yield


class InductorPrepared(Prepared):
    prepare_cache = "cold"
    dispatch_definition = (
        "kernel calls in Inductor's generated wrapper per inference: generated C++/Triton kernels "
        "plus library (extern, oneDNN) calls"
    )

    def __init__(self, compiled: Any, device: str, kernels: list[KernelGroup], graphs: int, folding_note: str = "",
                 wrappers: list[Any] | None = None) -> None:
        self.compiled = compiled
        self.wrappers = wrappers or []
        self.rewrite_record: dict[str, Any] = {}
        self.device = device
        self.kernels = kernels
        self.graphs = graphs
        self.folding_note = folding_note

    def __call__(self, batch: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.compiled(batch)

    def synchronize(self) -> None:
        synchronize(self.device)

    def cpu_dispatches(self, batch: Any) -> int:
        return len(self.kernels)

    kernel_time_definition = torch_kernel_time.DEFINITION + " (Inductor's C++ kernels wrapped in record_function)"

    def cpu_kernel_times(self, batch: Any) -> CpuKernelTimes | None:
        generated = {module: [name for name in vars(module) if name.startswith(GENERATED_PREFIX)]
                     for module in self.wrappers}
        if not any(generated.values()):
            return None  # the wrapper modules were not found: no honest split
        times = torch_kernel_time.kernel_times(lambda: self(batch), generated, GENERATED_PREFIX)
        return dataclasses.replace(times, kinds={**times.kinds, **generated_kinds(self.kernels)})

    def cuda_kernel_kinds(self) -> dict[str, str]:
        """The kinds `generated_kinds` names on the CPU, for the Triton kernels, which CUPTI names as
        Inductor's wrapper does (`triton_poi_fused_convolution_relu_0`, its bias and relu, the
        convolution cuDNN's: a `triton_poi_fused_bias_relu`)."""
        return generated_kinds(self.kernels)

    def rewrites(self) -> dict[str, Any]:
        return dict(self.rewrite_record)

    def close(self) -> None:
        """Let go of the compiled model: Dynamo's cache entry, on the model class's code, holds the
        compiled graph and, frozen, the model's weights (on a GPU, through the memory pass's child)."""
        import torch

        self.compiled = None
        self.wrappers = []
        torch._dynamo.reset()

    def fusion_report(self) -> FusionReport:
        return FusionReport(
            kernels=tuple(self.kernels),
            source=f"inductor generated wrapper code ({self.graphs} graph{'s' if self.graphs != 1 else ''})",
            notes=self.folding_note,
        )
