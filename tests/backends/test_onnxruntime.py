"""ONNX Runtime on resnet18 (CPU): fusion off keeps eager's operator count, the optimisation
ladder only ever removes nodes, the report finds conv+bn+relu, every variant matches eager, and
the export is cached."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.contract import Variant
from harness.errors import BackendFailed
from harness.measure.correctness import compare

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    from backends.onnxruntime import OnnxRuntimeBackend

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    example = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        reference = model(example)
    return OnnxRuntimeBackend(), model, example, reference, tmp_path_factory.mktemp("ort-cache")


def _prepare(setup, fusion: str, tmp_path: Path, **options):
    backend, model, example, _, cache = setup
    return backend.prepare(model, example, device="cpu", dtype="fp32", variant=backend.variant(fusion, options),
                           workdir=tmp_path, cache_dir=cache)


def test_fusion_off_has_one_node_per_eager_operator(setup, tmp_path: Path) -> None:
    from backends.eager import EagerBackend

    _, model, example, reference, _ = setup
    off = _prepare(setup, "off", tmp_path)
    eager = EagerBackend().prepare(model, example, device="cpu", dtype="fp32", variant=Variant(),
                                   workdir=tmp_path, cache_dir=tmp_path)
    report = off.fusion_report()
    assert report.fusions == 0
    ops = Counter(k.ops[0] for k in report.kernels)
    assert (ops["onnx.Conv"], ops["onnx.BatchNormalization"], ops["onnx.Relu"]) == (20, 20, 17)
    # eager's dispatch count plus the one reshape ONNX writes for flatten (a view eager does not count)
    assert off.cpu_dispatches(example) == eager.cpu_dispatches(example) + 1
    assert compare(off(example), reference, "fp32")["ok"]


def test_level_ladder_only_removes_nodes_and_stays_correct(setup, tmp_path: Path) -> None:
    _, _, example, reference, _ = setup
    counts = []
    for level in ("disable", "basic", "extended", "all"):
        (tmp_path / level).mkdir()
        prepared = _prepare(setup, "on", tmp_path / level, level=level)
        counts.append(prepared.cpu_dispatches(example))
        assert compare(prepared(example), reference, "fp32")["ok"], level
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1], counts


def test_fusion_on_reports_conv_bn_relu(setup, tmp_path: Path) -> None:
    _, _, example, _, _ = setup
    on = _prepare(setup, "on", tmp_path)
    groups = {k.ops for k in on.fusion_report().kernels}
    assert ("onnx.Conv", "onnx.BatchNormalization", "onnx.Relu") in groups
    assert ("onnx.Conv", "onnx.BatchNormalization", "onnx.Add", "onnx.Relu") in groups
    figures = on.profile_figures(example)
    assert figures["arena_peak_in_use_bytes"] > 0
    assert figures["node_executions_per_run"] == on.cpu_dispatches(example)
    # each node's kernel is timed under the name the report gives it, once a run
    times = on.cpu_kernel_times(example)
    assert sorted(name for name, _ in times.calls) == sorted(k.kernel for k in on.fusion_report().kernels)
    assert 0 < sum(ns for _, ns in times.calls) <= times.wall_ns


def test_each_kernel_is_of_its_nodes_operator_type_and_fusion_moves_time_between_kinds(setup, tmp_path: Path) -> None:
    """ORT's profiler names each node's operator type: the kind a kernel's time is summed under, so
    that the fused convolutions' time with fusion on is set against the convolutions, batch norms
    and relus they replaced with fusion off."""
    from harness.measure.kernel_kinds import KIND_METHOD_NAMED, kind_method
    from harness.measure.passes import cpu_kernel_figures

    _, _, example, _, _ = setup
    kinds = {}
    for fusion in ("on", "off"):
        (tmp_path / fusion).mkdir()
        times = _prepare(setup, fusion, tmp_path / fusion).cpu_kernel_times(example)
        assert set(times.kinds) == {name for name, _ in times.calls}
        assert kind_method([times]).startswith(KIND_METHOD_NAMED)
        kinds[fusion] = {k["kind"]: k for k in cpu_kernel_figures([times], times.wall_ns)["by_kind"]}
    assert {"Conv", "BatchNormalization", "Relu"} <= set(kinds["off"])
    assert kinds["off"]["Conv"]["calls_per_inference"] == 20 and kinds["off"]["Conv"]["kernels"] == 20
    assert "BatchNormalization" not in kinds["on"]  # folded into the convolutions
    assert sum(k["calls_per_inference"] for k in kinds["on"].values()) < sum(k["calls_per_inference"] for k in kinds["off"].values())


def test_disabling_conv_bn_fusion_keeps_batch_norm(setup, tmp_path: Path) -> None:
    """As a scenario file gives it: one string, the names separated by commas."""
    prepared = _prepare(setup, "on", tmp_path, level="basic", disabled_optimizers="ConvBNFusion, ConvAddFusion")
    assert any(k.ops == ("onnx.BatchNormalization",) for k in prepared.fusion_report().kernels)


def test_disabled_optimizers_are_a_list_or_one_string_of_names() -> None:
    from backends.onnxruntime import OnnxRuntimeOptions

    for given in (["ConvBNFusion", "ConvAddFusion"], "ConvBNFusion,ConvAddFusion", " ConvBNFusion , ConvAddFusion,"):
        assert OnnxRuntimeOptions.model_validate({"disabled_optimizers": given}).disabled_optimizers == [
            "ConvBNFusion", "ConvAddFusion"]


def test_a_cell_confined_to_fewer_cores_sizes_orts_pool_by_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's default pool is a thread per physical core of the machine, each pinned: a `--jobs` slot's
    cell ran on the other slots' cores. A count given in the options stays the count."""
    import os

    from backends.onnxruntime import OnnxRuntimeOptions, _checked_options

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5}, raising=False)
    assert _checked_options(Variant(fusion="on"), "cpu").intra_op_threads == 2
    given = Variant(fusion="on", options=OnnxRuntimeOptions(intra_op_threads=3))
    assert _checked_options(given, "cpu").intra_op_threads == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert _checked_options(Variant(fusion="on"), "cpu").intra_op_threads == 0  # the whole machine: ORT's default


def test_the_threads_the_sessions_pool_runs_are_recorded_where_its_options_say_0(setup, tmp_path: Path) -> None:
    """ORT's default pool (`intra_op_threads: 0`) is sized by ORT, and the session's options read
    back 0: the cell recorded the setting, not the threads its operators ran on. The pool's threads
    are counted as the session is made, a given count and the default alike."""
    import os

    _, _, example, _, _ = setup
    for folder in ("1", "3", "default"):
        (tmp_path / folder).mkdir()
    for given in (1, 3):
        figures = _prepare(setup, "on", tmp_path / str(given), intra_op_threads=given).profile_figures(example)
        assert (figures["intra_op_threads_setting"], figures["thread_pool_threads"]) == (given, given)
    default = _prepare(setup, "on", tmp_path / "default").profile_figures(example)
    assert default["intra_op_threads_setting"] in (0, len(os.sched_getaffinity(0)))  # a slot's cores where fewer
    assert 1 <= default["thread_pool_threads"] <= (os.cpu_count() or 1)


def test_export_is_cached(setup, tmp_path: Path) -> None:
    """A cache of its own (the module's is warm by now) and a small model (the export is what is
    tested): the first prepare exports, the second, fusion off, reads the same file untouched."""
    backend = setup[0]
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    example = torch.randn(1, 3, 16, 16)

    def prepare(fusion: str) -> Any:
        return backend.prepare(model, example, device="cpu", dtype="fp32", variant=backend.variant(fusion, {}),
                               workdir=tmp_path, cache_dir=tmp_path / "cache")

    first = prepare("on")
    (exported,) = (tmp_path / "cache" / "onnx").glob("*/*.onnx")
    written = (exported.stat().st_mtime_ns, exported.read_bytes())
    second = prepare("off")
    assert (first.prepare_cache, second.prepare_cache) == ("cold", "warm")
    assert (exported.stat().st_mtime_ns, exported.read_bytes()) == written


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"level": "max"}, "level: Input should be 'disable', 'basic', 'extended' or 'all'"),
        ({"provider": "cuda"}, "provider=cuda cannot run a cpu cell"),
        ({"intra_op_threads": -1}, "intra_op_threads: Input should be greater than or equal to 0"),
        ({"disabled_optimizers": 5}, "disabled_optimizers: Input should be a valid list"),
        ({"levle": "all"}, "unknown option levle (allowed: level, disabled_optimizers, provider, intra_op_threads)"),
    ],
)
def test_bad_options_fail_clearly(setup, tmp_path: Path, options, message) -> None:
    with pytest.raises(BackendFailed, match=re.escape(message)):
        _prepare(setup, "on", tmp_path, **options)


def test_a_provider_the_cells_device_lacks_is_skipped_with_a_reason(setup) -> None:
    """provider=cuda on a CPU cell failed in prepare where TensorRT on a CPU is skipped."""
    from backends.onnxruntime import OnnxRuntimeOptions

    backend = setup[0]
    support = backend.supports(Variant("on", options=OnnxRuntimeOptions(provider="cuda")), "fp32", "cpu")
    assert not support.ok and support.reason == "onnxruntime provider=cuda runs cuda cells; this cell is cpu"
    assert backend.supports(Variant("on", options=OnnxRuntimeOptions(provider="cpu")), "fp32", "cuda").reason == (
        "onnxruntime provider=cpu runs cpu cells; this cell is cuda")
    assert backend.supports(Variant("on"), "fp32", "cpu").ok


def test_fp16_on_cpu_is_skipped_with_a_reason(setup) -> None:
    backend = setup[0]
    support = backend.supports(Variant("on"), "fp16", "cpu")
    assert not support.ok and "fp16" in support.reason


class _DataDependent(torch.nn.Module):
    def forward(self, x):  # noqa: ANN001, ANN201
        return torch.nonzero(x > 0).float().sum().reshape(1, 1) if x.sum() > 0 else x[:, :1, 0, 0]


def test_a_model_that_does_not_export_fails_with_the_reason(tmp_path: Path) -> None:
    from backends.onnxruntime import OnnxRuntimeBackend

    with pytest.raises(BackendFailed, match=r"^torch\.onnx\.export failed: \w+"):
        OnnxRuntimeBackend().prepare(
            _DataDependent().eval(), torch.ones(1, 3, 4, 4), device="cpu", dtype="fp32", variant=Variant("on"),
            workdir=tmp_path, cache_dir=tmp_path / "cache",
        )
    assert not any((tmp_path / "cache" / "onnx").iterdir())  # no half-written export left in the cache


def test_the_cuda_provider_is_told_the_cells_math_and_torchs_stream(tmp_path: Path) -> None:
    from backends.onnxruntime import _providers

    (name, options), = _providers("cuda", 0, 1234, tmp_path, tf32=False, fp16=False)
    assert name == "CUDAExecutionProvider"
    assert options["use_tf32"] == "0" and options["user_compute_stream"] == "1234"
    (_, tf32_options), = _providers("cuda", 0, 1234, tmp_path, tf32=True, fp16=False)
    assert tf32_options["use_tf32"] == "1"
    assert _providers("cpu", 0, None, tmp_path, tf32=False, fp16=False) == ["CPUExecutionProvider"]


#: The handle of the stand-in torch stream `_providers_asked` gives each session (torch's default
#: stream is 0, which ORT takes for none).
SESSION_STREAM = 77


def _providers_asked(monkeypatch: pytest.MonkeyPatch, provider: str) -> list[list[Any]]:
    """Stand in for ORT (no GPU here) and for torch's streams, with `provider` the cells' provider:
    each session made records the providers list it was given, then fails its prepare. The lists,
    in the order asked."""
    import backends.onnxruntime as ort_backend

    asked: list[list[Any]] = []

    class Session:
        def __init__(self, path: str, options: Any, providers: list[Any], **kwargs: Any) -> None:
            asked.append(providers)
            raise RuntimeError("no GPU here: only the providers were wanted")

    class Stream:
        def __init__(self, **kwargs: Any) -> None:
            self.cuda_stream = SESSION_STREAM

    real = ort_backend._ort()
    monkeypatch.setattr(ort_backend, "_ort", lambda: type("Ort", (), {
        "InferenceSession": Session, "SessionOptions": real.SessionOptions,
        "GraphOptimizationLevel": real.GraphOptimizationLevel}))
    monkeypatch.setattr(ort_backend, "_checked_options",
                        lambda variant, device: ort_backend.SessionPlan("all", provider, 0, ()))
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    return asked


def test_each_export_gets_its_own_tensorrt_engine_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's TensorRT provider names an engine by the graph's file name and tensor names, not its
    weights or shapes: the same model at another batch size, or with other weights, must not find
    the first one's engine in a folder they share."""
    import backends.onnxruntime as ort_backend

    asked = _providers_asked(monkeypatch, "tensorrt")
    backend = ort_backend.OnnxRuntimeBackend()

    def engines(seed: int, batch: int) -> str:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
        with pytest.raises(BackendFailed, match="no GPU here"):
            backend.prepare(model, torch.ones(batch, 3, 8, 8), device="cuda", dtype="fp32", variant=Variant("on"),
                            workdir=tmp_path, cache_dir=tmp_path / "cache")
        return str(asked[-1][0][1]["trt_engine_cache_path"])

    first = engines(seed=0, batch=1)
    assert engines(seed=0, batch=1) == first  # the same export: its engines are found again
    assert len({first, engines(seed=0, batch=4), engines(seed=1, batch=1)}) == 3


def test_cuda_binding_takes_each_tensors_own_element_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the input and output are bound as device buffers with an element type. A language
    model's input is its token ids (int64) and its output float, whatever the cell's dtype: binding
    both as the cell's dtype handed ORT int64 ids as float32 and an int64 buffer for the logits.
    A stand-in session records what is bound (no GPU here: the buffers stay on the CPU).
    The buffers are bound by address: ORT's stream waits for the caller's (the batch written, the
    last output read) before the run, and the caller's for ORT's after it."""
    import numpy as np

    from backends.onnxruntime import OrtPrepared, SessionPlan

    bound: dict[str, tuple[Any, tuple[int, ...]]] = {}

    class Binding:
        def bind_input(self, name: str, device: str, index: int, element: Any, shape: tuple[int, ...], pointer: int) -> None:
            bound["input"] = (element, shape)

        def bind_output(self, name: str, device: str, index: int, element: Any, shape: tuple[int, ...], pointer: int) -> None:
            bound["output"] = (element, shape)

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    class Session:
        def get_inputs(self) -> list[Named]:
            return [Named("input_ids")]

        def get_outputs(self) -> list[Named]:
            return [Named("logits")]

        def run(self, names: Any, feeds: dict[str, Any]) -> list[Any]:
            assert feeds["input_ids"].dtype == np.int64
            return [np.zeros((*feeds["input_ids"].shape, 8), np.float32)]

        def io_binding(self) -> Binding:
            return Binding()

        def run_with_iobinding(self, binding: Binding) -> None:
            order.append("run")

    order: list[str] = []

    class Stream:
        def __init__(self, name: str) -> None:
            self.name = name

        def wait_stream(self, other: Stream) -> None:
            order.append(f"{self.name} waits for {other.name}")

    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: Stream("caller"))
    ids = torch.randint(0, 100, (2, 16), dtype=torch.int64)
    prepared = OrtPrepared(Session(), tmp_path / "model.onnx", tmp_path / "optimized.onnx",
                           SessionPlan("all", "cuda", 0, ()), [], ids, Stream("ort"))
    assert bound["output"] == (np.float32, (2, 16, 8))
    output = prepared(ids)
    assert bound["input"] == (np.int64, (2, 16))
    assert output.dtype == torch.float32 and tuple(output.shape) == (2, 16, 8)
    assert order == ["ort waits for caller", "run", "caller waits for ort"]


@pytest.mark.parametrize("provider", ["cuda", "tensorrt"])
def test_the_gpu_providers_launch_on_a_stream_of_torchs_not_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str,
) -> None:
    """torch's current stream is its default one (handle 0) in a worker, and ORT takes a
    user_compute_stream of 0 for none: it then launched on a non-blocking stream of its own, which
    nothing ordered with torch's writes of the batch it reads by address (a gathered Server batch,
    the check after timing's). Each GPU provider is given a torch stream of the session's own."""
    import backends.onnxruntime as ort_backend

    asked = _providers_asked(monkeypatch, provider)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    with pytest.raises(BackendFailed, match="no GPU here"):
        ort_backend.OnnxRuntimeBackend().prepare(model, torch.ones(1, 3, 8, 8), device="cuda", dtype="tf32",
                                                 variant=Variant("on"), workdir=tmp_path, cache_dir=tmp_path / "cache")
    (providers,) = asked
    assert [(name, options.get("user_compute_stream")) for name, options in providers] == [
        (name, str(SESSION_STREAM)) for name, _ in providers]


def test_math_mode_is_read_from_the_sessions_provider_options() -> None:
    from backends.onnxruntime import provider_math_mode

    assert provider_math_mode("cuda", {"CUDAExecutionProvider": {"use_tf32": "0", "device_id": "0"}})["tf32"] is False
    assert provider_math_mode("cuda", {"CUDAExecutionProvider": {"use_tf32": "1"}})["tf32"] is True
    assert "unreadable" in provider_math_mode("cuda", {"CUDAExecutionProvider": {}})
    assert provider_math_mode("tensorrt", {})["tf32"] is True
    assert provider_math_mode("cpu", {"CPUExecutionProvider": {}}) == {}


def test_a_session_that_fell_back_to_the_cpu_is_refused() -> None:
    from backends.onnxruntime import check_provider

    class FellBack:
        def get_providers(self) -> list[str]:
            return ["CPUExecutionProvider"]

    with pytest.raises(BackendFailed, match="fell back to CPUExecutionProvider: CUDAExecutionProvider did not load"):
        check_provider(FellBack(), "CUDAExecutionProvider")
    check_provider(FellBack(), "CPUExecutionProvider")


def test_ort_tensorrt_provider_runs_tf32_cells_only() -> None:
    from backends.onnxruntime import OnnxRuntimeBackend

    backend = OnnxRuntimeBackend()
    refused = backend.supports(backend.variant("on", {"provider": "tensorrt"}), "fp32", "cuda")
    assert not refused.ok and "no TF32 switch" in refused.reason
    assert backend.supports(backend.variant("on", {"provider": "tensorrt"}), "tf32", "cuda").ok
    assert backend.supports(Variant("on"), "tf32", "cuda").ok


def test_every_fuser_a_session_applies_is_left_out_for_fusion_off(tmp_path: Path) -> None:
    """ORT takes a transformer name it does not have without a word, so a fuser missing from the
    list ran in every fusion-off cell (ConvAddActivationFusion; GeluFusionL2, whose name carries its
    level). A session's verbose log names every graph transformer it applies: each that fuses, or
    rewrites the layout, must be left out."""
    import subprocess
    import sys

    from backends.onnxruntime import FUSING_TRANSFORMERS

    graph = tmp_path / "add.onnx"
    torch.onnx.export(ConvAddRelu().eval(), (torch.randn(1, 8, 4, 4),), str(graph), dynamo=True)
    session = ("import onnxruntime as ort, sys\nort.set_default_logger_severity(0)\nso = ort.SessionOptions()\n"
               "so.log_severity_level = 0\nso.log_verbosity_level = 1\n"
               "ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])\n")
    done = subprocess.run([sys.executable, "-c", session, str(graph)], capture_output=True, text=True, timeout=120)
    applied = set(re.findall(r"(?:Applying|Skipping) graph transformer (\S+)", done.stdout + done.stderr))
    assert {"ConstantFolding", "ConvAddActivationFusion", "GeluFusionL2"} <= applied, sorted(applied)  # the log is read
    # FuseFp16InitializerToFp32NodeTransformer drops a Cast of an fp16 weight: no operators joined
    fusing = {name for name in applied if re.search("Fusion|Fuse|Transpose|Nchwc|Nhwc|Layout", name)
              and name != "FuseFp16InitializerToFp32NodeTransformer"}
    assert fusing <= set(FUSING_TRANSFORMERS), sorted(fusing - set(FUSING_TRANSFORMERS))


class ConvAddRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: Any) -> Any:
        return torch.relu(self.conv(x) + x)


class ErfGelu(torch.nn.Module):
    """GELU written out, as a model's own code does it: GeluFusionL2 made it one Gelu with fusion off."""

    def forward(self, x: Any) -> Any:
        return x * 0.5 * (1.0 + torch.erf(x / 1.4142135623730951))


class WrittenLayerNorm(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        mean = x.mean(-1, keepdim=True)
        centred = x - mean
        return centred / torch.sqrt((centred * centred).mean(-1, keepdim=True) + 1e-5)


class SplitHeads(torch.nn.Module):
    """Attention's q, k, v taken from one transposed tensor (swin_b, ViT)."""

    def forward(self, x: Any) -> Any:
        qkv = x.reshape(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)
        return qkv[0] * qkv[1] + qkv[2]


@pytest.mark.parametrize(("model", "shape", "kernels"), [
    # ConvAddActivationFusion made these one FusedConv with fusion off, where fusion on (NCHWc first) ran
    # five kernels and no fusion
    (ConvAddRelu, (2, 8, 16, 16), ["onnx.Add", "onnx.Conv", "onnx.Relu"]),
    # ORT names its transpose optimizer after the provider: it moved the transpose past the three
    # Gathers with fusion off, a "fusion" of each (swin_b's fusion-off cell counted 72)
    (SplitHeads, (2, 16, 96), ["onnx.Add", "onnx.Gather", "onnx.Gather", "onnx.Gather", "onnx.Mul", "onnx.Reshape",
                               "onnx.Transpose"]),
    (ErfGelu, (2, 64), ["onnx.Add", "onnx.Div", "onnx.Erf", "onnx.Mul", "onnx.Mul"]),
    (WrittenLayerNorm, (2, 8, 64), ["onnx.Add", "onnx.Div", "onnx.Mul", "onnx.ReduceMean", "onnx.ReduceMean",
                                    "onnx.Sqrt", "onnx.Sub"]),
])
def test_fusion_off_changes_nothing_a_fuser_or_a_layout_rewrite_would(
        model: Any, shape: tuple[int, ...], kernels: list[str], tmp_path: Path, capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rewrite ORT made is in its log: none may be a fuser's or a layout rewrite's."""
    import backends.onnxruntime as ort_backend

    made = ort_backend._session_options

    def logging_each_rewrite(ort: Any, options: Any) -> Any:
        session_options = made(ort, options)
        session_options.log_severity_level = 1  # info: what each graph transformer changed
        return session_options

    monkeypatch.setattr(ort_backend, "_session_options", logging_each_rewrite)
    torch.manual_seed(0)
    module, example = model().eval(), torch.randn(*shape)
    backend = ort_backend.OnnxRuntimeBackend()
    off = backend.prepare(module, example, device="cpu", dtype="fp32", variant=backend.variant("off", {}),
                          workdir=tmp_path, cache_dir=tmp_path / "cache")
    log = capfd.readouterr().err
    assert "Applying graph transformer" in log or "GraphTransformer" in log, log[-2000:]  # the log is read
    changed = set(re.findall(r"GraphTransformer (\S+) modified: 1", log))
    assert not {name for name in changed if re.search("Fusion|Fuse|Transpose|Nchwc|Nhwc|Layout", name)}, changed
    report = off.fusion_report()
    assert report.fusions == 0, [k.ops for k in report.kernels]
    assert sorted(k.ops[0] for k in report.kernels) == kernels
    with torch.no_grad():
        assert compare(off(example), module(example), "fp32")["ok"]


@pytest.mark.slow
def test_the_parts_of_the_models_own_attention_call_are_one_operator(tmp_path: Path) -> None:
    # The exporter writes the call as its parts and ORT runs its scale and first matmul as one FusedMatMul,
    # which counted a fusion of Mul and MatMul where Inductor calls the attention as one library call. The
    # exporter's record of each node's FX node makes the parts one operator; the linears stay MatMul and Add.
    from backends.onnxruntime import OnnxRuntimeBackend
    from tests.attention_block import attention_block

    backend = OnnxRuntimeBackend()
    prepared = backend.prepare(*attention_block(), device="cpu", dtype="fp32", variant=backend.variant("on"),
                               workdir=tmp_path, cache_dir=tmp_path / "cache")
    try:
        report = prepared.fusion_report()
    finally:
        prepared.close()
    attention = [k for k in report.kernels if "aten.scaled_dot_product_attention" in k.ops]
    assert len(attention) == 2  # the matmuls' nodes; the FusedMatMul holds the scale too
    assert all(k.fusion_class == "single" for k in attention)
    assert report.fusions == 2 and all(k.ops == ("onnx.MatMul", "onnx.Add") for k in report.kernels if k.fusion_class != "single")
