"""The TensorRT backend: what can be checked without a GPU, and a marked GPU test that builds engines.

The engine-information fixture (data/trt10_engine_information_tiny_resnet.json) is HAND-WRITTEN
from the documented TensorRT 10 engine-inspector format (DETAILED profiling verbosity: "Layers"
with Name, LayerType, Inputs, Outputs, Metadata holding "[ONNX Layer: ...]" markers separated by
\\x1f or \\x1e; "Bindings"), for the graph torch's exporter writes for `TinyResNet` below. It was
not captured from a real engine; the GPU test checks the parser against real engines.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from backends.onnxruntime import OnnxRuntimeOptions
from backends.tensorrt import TensorRTBackend, engine_fusion_report
from backends.tensorrt_layers import (
    REFORMAT_OP,
    engine_layers,
    intermediate_outputs,
    name_nodes,
    onnx_activations,
    onnx_attention_calls,
    onnx_op_types,
)
from harness.contract import Variant
from harness.errors import BackendFailed

DATA = Path(__file__).parent / "data"

# {node name: op type} of the exported TinyResNet graph (backends/onnx_export.py, torch 2.14).
TINY_OPS = {
    "node_Conv_52": "Conv", "node__native_batch_norm_legit_no_training__0": "BatchNormalization", "node_relu": "Relu",
    "node_max_pool2d": "MaxPool", "node_Conv_53": "Conv",
    "node__native_batch_norm_legit_no_training_1__0": "BatchNormalization", "node_relu_1": "Relu",
    "node_Conv_54": "Conv", "node__native_batch_norm_legit_no_training_2__0": "BatchNormalization",
    "node_add": "Add", "node_relu_2": "Relu", "node_mean": "ReduceMean", "node_view": "Reshape", "node_linear": "Gemm",
}


def fixture_info() -> dict:
    return json.loads((DATA / "trt10_engine_information_tiny_resnet.json").read_text())


# --- availability and support ---------------------------------------------------------------

def test_cpu_is_never_available_and_the_reason_names_gpus() -> None:
    availability = TensorRTBackend().availability("cpu")
    assert not availability.ok
    assert "NVIDIA GPU" in availability.reason


def test_cuda_is_not_available_here_with_a_reason() -> None:
    if torch.cuda.is_available() and importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("this machine has TensorRT and a GPU")
    availability = TensorRTBackend().availability("cuda")
    assert not availability.ok
    if importlib.util.find_spec("tensorrt") is None:
        assert "tensorrt-cu13" in availability.reason and "requirements-gpu.lock" in availability.reason
    else:
        assert "CUDA" in availability.reason


def test_tensorrt_older_than_10_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", types.SimpleNamespace(__version__="8.6.1"))
    availability = TensorRTBackend().availability("cuda")
    assert not availability.ok
    assert "8.6.1" in availability.reason and "10" in availability.reason


def test_with_tensorrt_10_importable_a_missing_gpu_is_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", types.SimpleNamespace(__version__="10.9.0.34"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    availability = TensorRTBackend().availability("cuda")
    assert not availability.ok
    assert "CUDA" in availability.reason


def test_supports_gpu_dtypes_only() -> None:
    backend = TensorRTBackend()
    assert backend.supports(Variant("on"), "fp16", "cuda").ok
    assert backend.supports(Variant("off"), "bf16", "cuda").ok
    assert not backend.supports(Variant("on"), "fp32", "cpu").ok
    assert backend.supports(Variant("on"), "tf32", "cuda").ok
    refused = backend.supports(Variant("on"), "int8", "cuda")
    assert not refused.ok and "fp32, tf32, fp16, bf16" in refused.reason


# --- options ----------------------------------------------------------------------------------

def checked_options(options: dict[str, Any]) -> Any:
    return TensorRTBackend.variant("on", options).options


def test_options_default_and_unknown_ones_list_the_allowed() -> None:
    assert checked_options({}).model_dump() == {"workspace_mib": 4096, "builder_optimization_level": 3}
    assert checked_options({"workspace_mib": 512}).workspace_mib == 512
    with pytest.raises(BackendFailed) as failed:
        checked_options({"workspace": 512, "fp8": True})
    message = str(failed.value)
    assert "unknown option workspace; unknown option fp8" in message
    assert "(allowed: workspace_mib, builder_optimization_level)" in message


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"workspace_mib": "1G"}, "workspace_mib: Input should be a valid integer"),
        ({"workspace_mib": True}, "workspace_mib: Input should be a valid integer"),
        ({"workspace_mib": 0}, "workspace_mib: Input should be greater than 0"),
        ({"builder_optimization_level": 6}, "less than or equal to 5"),
        ({"tf32": False}, "the cell's dtype decides"),
    ],
)
def test_bad_option_values_are_refused(options: dict, words: str) -> None:
    with pytest.raises(BackendFailed, match=words):
        checked_options(options)


def test_prepare_refuses_bad_options_and_cpu_before_touching_tensorrt(tmp_path: Path) -> None:
    backend = TensorRTBackend()
    common = {"dtype": "fp32", "workdir": tmp_path, "cache_dir": tmp_path}
    with pytest.raises(BackendFailed, match="tensorrt options: got OnnxRuntimeOptions, not TensorRTOptions"):
        backend.prepare(None, None, device="cuda", variant=Variant("on", OnnxRuntimeOptions()), **common)
    with pytest.raises(BackendFailed, match="NVIDIA GPUs"):
        backend.prepare(None, None, device="cpu", variant=Variant("on"), **common)


# --- engine information -> kernel groups --------------------------------------------------------

def test_fused_layers_split_into_their_onnx_ops_and_are_classified() -> None:
    layers = engine_layers(fixture_info(), TINY_OPS)
    assert [g.ops for g in layers.groups] == [
        (REFORMAT_OP,),
        ("onnx.Conv", "onnx.BatchNormalization", "onnx.Relu"),
        ("onnx.MaxPool",),
        ("onnx.Conv", "onnx.BatchNormalization", "onnx.Relu"),
        ("onnx.Conv", "onnx.BatchNormalization", "onnx.Add", "onnx.Relu"),
        ("onnx.ReduceMean", "onnx.Reshape", "onnx.Gemm"),
        (REFORMAT_OP,),
    ]
    assert [g.fusion_class for g in layers.groups] == [
        "single", "tensor+element", "single", "tensor+element", "tensor+element", "tensor+element", "single",
    ]
    assert layers.groups[1].kernel == "node_Conv_52 + node__native_batch_norm_legit_no_training__0 + node_relu"
    assert layers.unresolved == () and layers.from_names == 0


def test_report_from_raw_inspector_text_with_control_characters() -> None:
    # The inspector's own string carries the separators as raw bytes, not as \u001f escapes.
    text = (DATA / "trt10_engine_information_tiny_resnet.json").read_text()
    text = text.replace("\\u001f", "\x1f").replace("\\u001e", "\x1e")
    assert "\x1f" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # what a strict reader would do
    report = engine_fusion_report(text, TINY_OPS, fusion="on", marked_outputs=0, activations=13).to_json()
    assert report["kernel_count"] == 7
    assert report["fusion_count"] == 4
    assert report["kernels_by_class"] == {"tensor+element+tensor": 0, "tensor+element": 4, "element": 0, "single": 3}
    assert report["approximate"] is False
    assert "matched no ONNX node" not in report["notes"]


def test_fusion_off_report_is_approximate_and_says_why() -> None:
    text = json.dumps(fixture_info())
    report = engine_fusion_report(text, TINY_OPS, fusion="off", marked_outputs=12, activations=13)
    assert report.approximate
    assert "12 of the 13 intermediate ONNX activations were marked as network outputs" in report.notes


def test_layers_without_metadata_are_read_from_their_names() -> None:
    ops = {**TINY_OPS, "node_sigmoid": "Sigmoid", "node_mul": "Mul"}
    info = {"Layers": [
        {"Name": "node_Conv_52 + node_relu", "LayerType": "CaskConvolution", "Metadata": ""},
        {"Name": "PWN(PWN(node_sigmoid), node_mul)", "LayerType": "PointWiseV2"},
        {"Name": "{ForeignNode[node_mean...node_linear]}", "LayerType": "Myelin"},
    ]}
    layers = engine_layers(info, ops)
    assert [g.ops for g in layers.groups] == [
        ("onnx.Conv", "onnx.Relu"), ("onnx.Sigmoid", "onnx.Mul"), ("onnx.ReduceMean", "onnx.Gemm"),
    ]
    assert [g.fusion_class for g in layers.groups] == ["tensor+element", "element", "tensor+element"]
    assert layers.from_names == 3


def test_layer_names_only_verbosity_still_gives_groups() -> None:
    # ProfilingVerbosity.LAYER_NAMES_ONLY: each layer is just its name.
    info = {"Layers": ["Reformatting CopyNode for Input Tensor 0 to node_Conv_52", "node_Conv_52 + node_relu"]}
    layers = engine_layers(info, TINY_OPS)
    assert [g.ops for g in layers.groups] == [(REFORMAT_OP,), ("onnx.Conv", "onnx.Relu")]


def test_unknown_names_degrade_to_the_layer_type_and_are_reported() -> None:
    info = {"Layers": [
        {"Name": "ONNXTRT_ShapeShuffle_7", "LayerType": "Shuffle", "Metadata": "[ONNX Layer: ONNXTRT_Broadcast_3]"},
        {"Name": "node_Conv_52 + mystery", "LayerType": "CaskConvolution",
         "Metadata": "[ONNX Layer: node_Conv_52]\x1f[ONNX Layer: mystery]"},
        {"Name": "__myl_Move_3", "LayerType": "kgen", "Metadata": ""},
        {"Name": "node_view", "LayerType": "NoOp", "Metadata": "[ONNX Layer: node_view]"},
    ]}
    layers = engine_layers(info, TINY_OPS)
    assert [g.ops for g in layers.groups] == [("tensorrt.Shuffle",), ("onnx.Conv",), ("tensorrt.kgen",)]
    assert layers.unresolved == ("ONNXTRT_Broadcast_3", "mystery", "__myl_Move_3")
    report = engine_fusion_report(json.dumps(info), TINY_OPS, fusion="on", marked_outputs=0, activations=0)
    assert "3 name(s) in layers matched no ONNX node (ONNXTRT_Broadcast_3, mystery, __myl_Move_3)" in report.notes
    assert "1 layer(s) carried no ONNX metadata" in report.notes


def test_a_node_named_twice_in_one_layer_counts_once() -> None:
    info = {"Layers": [{"Name": "x", "LayerType": "CaskGemmConvolution",
                        "Metadata": "[ONNX Layer: node_linear]\x1e[ONNX Layer: node_linear]\x1f[ONNX Layer: node_relu]"}]}
    assert engine_layers(info, TINY_OPS).groups[0].ops == ("onnx.Gemm", "onnx.Relu")


def test_name_parsing_drops_profile_suffix_and_wrappers() -> None:
    assert name_nodes("PWN(node_add, node_relu) [profile 0]") == ["node_add", "node_relu"]
    assert name_nodes("{ForeignNode[/layer1.0/conv1/Conv.../fc/Gemm]}") == ["/layer1.0/conv1/Conv", "/fc/Gemm"]


def test_something_else_than_engine_information_is_refused() -> None:
    with pytest.raises(ValueError, match="no 'Layers'"):
        engine_layers({"layers": []}, TINY_OPS)
    with pytest.raises(ValueError, match="has no name"):
        engine_layers({"Layers": [{"LayerType": "Reformat"}]}, TINY_OPS)


# --- the ONNX side ----------------------------------------------------------------------------

def test_onnx_op_types_and_activations_include_subgraphs_and_skip_graph_outputs() -> None:
    from onnx import TensorProto, helper

    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["input", "w"], ["x"], name="node_Conv_0"),
            helper.make_node("ReduceSum", ["x"], ["s"], name="node_sum"),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="node_gt"),
            helper.make_node("If", ["c"], ["output"], name="node_if", then_branch=then_branch, else_branch=else_branch),
        ],
        "main",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 3, 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1])],
    )
    assert onnx_op_types(graph) == {
        "node_Conv_0": "Conv", "node_sum": "ReduceSum", "node_gt": "Greater", "node_if": "If",
        "then_relu": "Relu", "else_neg": "Neg",
    }
    assert onnx_activations(graph) == {"x", "s", "c"}


# --- fusion off: which tensors become outputs ----------------------------------------------------

class FakeTensor:
    def __init__(self, name: str, dtype: str = "float", *, output: bool = False, shape_tensor: bool = False) -> None:
        self.name, self.dtype, self.is_network_output, self.is_shape_tensor = name, dtype, output, shape_tensor


class FakeLayer:
    def __init__(self, kind: str, inputs: list, outputs: list) -> None:
        self.type, self._inputs, self._outputs = kind, inputs, outputs
        self.num_inputs, self.num_outputs = len(inputs), len(outputs)

    def get_input(self, i: int) -> FakeTensor:
        return self._inputs[i]

    def get_output(self, i: int) -> FakeTensor:
        return self._outputs[i]


class FakeNetwork:
    def __init__(self, inputs: list, layers: list) -> None:
        self._inputs, self._layers = inputs, layers
        self.num_inputs, self.num_layers = len(inputs), len(layers)

    def get_input(self, i: int) -> FakeTensor:
        return self._inputs[i]

    def get_layer(self, i: int) -> FakeLayer:
        return self._layers[i]


def test_intermediate_outputs_are_the_onnx_activations_that_depend_on_the_input() -> None:
    t = {name: FakeTensor(name) for name in ("input", "w", "w_scaled", "conv2d", "conv2d_bias", "relu", "cast")}
    shape = FakeTensor("shape_of_relu", "int64", shape_tensor=True)
    out = FakeTensor("output", output=True)
    network = FakeNetwork([t["input"]], [
        FakeLayer("constant", [], [t["w"]]),
        FakeLayer("elementwise", [t["w"]], [t["w_scaled"]]),  # weights only: folded, no activation
        FakeLayer("convolution", [t["input"], t["w_scaled"]], [t["conv2d"]]),
        FakeLayer("elementwise", [t["conv2d"]], [t["conv2d_bias"]]),  # a helper inside the ONNX Conv
        FakeLayer("activation", [t["conv2d_bias"]], [t["relu"]]),
        FakeLayer("shape", [t["relu"]], [shape]),
        FakeLayer("identity", [t["relu"]], [FakeTensor("cast", "int32")]),
        FakeLayer("matmul", [t["relu"]], [out]),
    ])
    activations = {"w_scaled", "conv2d", "relu", "shape_of_relu", "cast", "output"}
    chosen = intermediate_outputs(
        network, names=activations, skip_layer_types={"constant", "shape"}, activation_types={"float", "half"},
    )
    assert [tensor.name for tensor in chosen] == ["conv2d", "relu"]


# --- the build, against a stand-in for TensorRT 11's API ------------------------------------------

class FakeTensorRT:
    """The part of TensorRT 11's Python API the build uses, as its bindings define it: no FP16/BF16
    builder flags (11 removed weak typing), STRONGLY_TYPED = 0, TF32 on by default. Records what
    the build asked for."""

    __version__ = "11.4.0.106"

    class NetworkDefinitionCreationFlag:
        STRONGLY_TYPED = 0

    class BuilderFlag:
        TF32 = "TF32"

    class MemoryPoolType:
        WORKSPACE = "WORKSPACE"

    class ProfilingVerbosity:
        DETAILED = "DETAILED"

    class LayerInformationFormat:
        JSON = "JSON"

    class ILogger:
        INTERNAL_ERROR, ERROR, WARNING = "internal error", "error", "warning"

        def __init__(self) -> None:
            pass

    def __init__(self) -> None:
        self.network_flags: list[int] = []
        trt = self

        class Config:
            def __init__(self) -> None:
                self.flags = {"TF32"}  # TensorRT's default
                self.builder_optimization_level = 3
                self.profiling_verbosity = None

            def set_flag(self, flag: str) -> None:
                self.flags.add(flag)

            def clear_flag(self, flag: str) -> None:
                self.flags.discard(flag)

            def get_flag(self, flag: str) -> bool:
                return flag in self.flags

            def set_memory_pool_limit(self, pool: str, size: int) -> None:
                self.workspace = size

        class Builder:
            def __init__(self, logger: Any) -> None:
                pass

            def create_network(self, flags: int) -> object:
                trt.network_flags.append(flags)
                return object()

            def create_builder_config(self) -> Config:
                trt.config = Config()
                return trt.config

            def build_serialized_network(self, network: object, config: Config) -> bytes:
                return b"plan"

        class OnnxParser:
            num_errors = 0

            def __init__(self, network: object, logger: Any) -> None:
                pass

            def parse_from_file(self, path: str) -> bool:
                return Path(path).exists()

        class Inspector:
            def get_engine_information(self, fmt: str) -> str:
                return json.dumps({"Layers": [], "I/O Tensors": []})

        class Engine:
            def create_engine_inspector(self) -> Inspector:
                return Inspector()

        class Runtime:
            def __init__(self, logger: Any) -> None:
                pass

            def deserialize_cuda_engine(self, plan: bytes) -> Engine:
                return Engine()

        self.Builder, self.OnnxParser, self.Runtime = Builder, OnnxParser, Runtime


@pytest.mark.parametrize(("dtype", "tf32"), [("fp32", False), ("tf32", True), ("fp16", False)])
def test_the_build_is_strongly_typed_and_sets_tf32_from_the_dtype(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, tf32: bool,
) -> None:
    import backends.tensorrt as tensorrt_backend
    from harness.precision import torch_dtype

    monkeypatch.setattr(tensorrt_backend, "_logger", None)  # one logger per process: the stand-in's here
    trt = FakeTensorRT()
    model = TinyResNet().eval().to(torch_dtype(dtype))
    example = torch.randn(2, 3, 32, 32).to(torch_dtype(dtype))
    out = tmp_path / "engine"
    out.mkdir()
    built: dict[str, Any] = {}
    tensorrt_backend._build(trt, model, example, tmp_path / "cache", out, dtype, "on",
                            checked_options({}), built)
    assert trt.network_flags == [1 << FakeTensorRT.NetworkDefinitionCreationFlag.STRONGLY_TYPED]
    assert trt.config.get_flag("TF32") is tf32  # no FP16/BF16 flag was asked for: 11 has none
    assert trt.config.profiling_verbosity == "DETAILED"
    build = json.loads((out / "build.json").read_text())
    assert build["tf32_flag"] is tf32 and build["tensorrt"] == "11.4.0.106"
    assert (out / "engine.plan").read_bytes() == b"plan"


# --- the timed call, against a stand-in execution context ---------------------------------------

def test_a_batch_at_an_unaligned_offset_is_computed_not_the_one_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """LoadGen's batches, and the check after timing's, are views at an offset into a larger stack:
    for mmoe_small (samples of 100 floats, 400 bytes) the offset is not 256-byte aligned, and
    TensorRT refuses such an address (`setTensorAddress` answers false). Ignoring the answer ran the
    engine on the address set before: the previous batch. A stand-in context that refuses
    unaligned addresses, and an engine that reads its input where the context points, check that
    each call computes its own batch (no GPU here: streams and events are stand-ins)."""
    import backends.tensorrt as tensorrt_backend

    class Mode:
        INPUT, OUTPUT = "input", "output"

    DataType = types.SimpleNamespace(**{name: name.lower() for name in (
        "FLOAT", "HALF", "BF16", "INT8", "UINT8", "INT32", "INT64", "BOOL")})
    trt = types.SimpleNamespace(TensorIOMode=Mode, DataType=DataType)
    features = 100
    tensors = {"input": ((1, features), Mode.INPUT), "output": ((1, features), Mode.OUTPUT)}
    memory: dict[int, torch.Tensor] = {}  # address -> the tensor there, for the stand-in engine to read

    class Context:
        def __init__(self) -> None:
            self.addresses: dict[str, int] = {}

        def set_tensor_address(self, name: str, address: int) -> bool:
            # the input's address only: the output buffers are the backend's own allocations, aligned
            # by torch's CUDA allocator, not by its CPU one here
            if name == "input" and address % 256:
                return False
            self.addresses[name] = address
            return True

        def execute_async_v3(self, stream: int) -> bool:  # output = input * 2
            output = memory[self.addresses["output"]]
            output.copy_(memory[self.addresses["input"]] * 2)
            return True

    class Engine:
        num_io_tensors = len(tensors)

        def get_tensor_name(self, i: int) -> str:
            return list(tensors)[i]

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            return tensors[name][0]

        def get_tensor_dtype(self, name: str) -> str:
            return DataType.FLOAT

        def get_tensor_mode(self, name: str) -> str:
            return tensors[name][1]

        def create_execution_context(self) -> Context:
            return Context()

    class Stand:  # torch.cuda's Stream and Event
        cuda_stream = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def record(self, *args: Any) -> None:
            pass

        def wait_event(self, *args: Any) -> None:
            pass

    monkeypatch.setattr(tensorrt_backend, "_trt", lambda: trt)
    monkeypatch.setattr(torch.cuda, "Stream", Stand)
    monkeypatch.setattr(torch.cuda, "Event", Stand)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: Stand())
    samples = [torch.randn(1, features) for _ in range(4)]
    example = torch.cat(samples[:1])
    prepared = tensorrt_backend.TensorRTPrepared(
        object(), Engine(), example, fusion="on", layer_info="{}", op_types={}, marked_outputs=0, activations=0,
        plan_bytes=0, tf32_flag=False)
    output = prepared.output
    memory[output.data_ptr()] = output

    def call(batch: torch.Tensor) -> torch.Tensor:
        memory[batch.data_ptr()] = batch
        for buffer in vars(prepared).values():  # a buffer of the backend's own the batch may be copied to
            if isinstance(buffer, torch.Tensor):
                memory.setdefault(buffer.data_ptr(), buffer)
        return prepared(batch).clone()

    first = tensorrt_backend._aligned_empty(samples[0]).copy_(samples[0])
    assert first.data_ptr() % 256 == 0
    assert torch.equal(call(first), samples[0] * 2)
    stack = torch.cat(samples)
    stack = tensorrt_backend._aligned_empty(stack).copy_(stack)  # its rows 1.. start 400 bytes past 256-aligned
    for row in (1, 2, 3):
        view = stack[row:row + 1]
        assert view.data_ptr() % 256, "the view should be the unaligned case"
        assert torch.equal(call(view), samples[row] * 2), f"row {row} computed another batch"


# --- on a GPU -------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_engines_match_eager_and_fusion_off_has_more_layers(tmp_path: Path, dtype: str) -> None:
    pytest.importorskip("tensorrt")
    from harness.measure.correctness import compare
    from harness.precision import torch_dtype

    torch.manual_seed(0)
    model = TinyResNet().eval().to(device="cuda", dtype=torch_dtype(dtype))
    example = torch.randn(2, 3, 32, 32, device="cuda", dtype=torch_dtype(dtype))
    other = torch.randn(2, 3, 32, 32, device="cuda", dtype=torch_dtype(dtype))
    backend = TensorRTBackend()
    assert backend.availability("cuda").ok, backend.availability("cuda").reason
    reports = {}
    for fusion in ("on", "off"):
        prepared = backend.prepare(
            model, example, device="cuda", dtype=dtype, variant=Variant(fusion), workdir=tmp_path / fusion,
            cache_dir=tmp_path / "cache",
        )
        assert prepared.prepare_cache == "cold"
        with torch.no_grad():
            for batch in (example, other):  # a different input tensor on each call
                output = prepared(batch)
                prepared.synchronize()
                verdict = compare(output, model(batch), dtype)
                assert verdict["ok"], (fusion, verdict)
        reports[fusion] = prepared.fusion_report()
        # The real engine's Metadata names every convolution and the linear layer of the graph.
        all_ops = [op for kernel in reports[fusion].kernels for op in kernel.ops]
        assert all_ops.count("onnx.Conv") == 3 and all_ops.count("onnx.Gemm") == 1, reports[fusion]
        prepared.close()
    on, off = reports["on"], reports["off"]
    assert not on.approximate and off.approximate
    assert len(off.kernels) > len(on.kernels)
    assert on.fusions > off.fusions
    assert any(k.fusion_class == "tensor+element" and "onnx.Conv" in k.ops for k in on.kernels)
    again = backend.prepare(
        model, example, device="cuda", dtype=dtype, variant=Variant("on"), workdir=tmp_path / "again",
        cache_dir=tmp_path / "cache",
    )
    assert again.prepare_cache == "warm"
    assert again.fusion_report() == on
    with torch.no_grad():
        output = again(example)
        again.synchronize()
        assert compare(output, model(example), dtype)["ok"]
    again.close()


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)


class TinyResNet(nn.Module):
    """resnet18's pattern at toy size: conv-bn-relu stem, max pool, one basic block, pool, fc."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.block = Block(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.block(self.stem(x))), 1))


def test_a_layer_of_the_models_own_attention_call_runs_it_as_one_operator() -> None:
    """TensorRT's Myelin runs the exported parts of a model's F.scaled_dot_product_attention as one layer,
    which counted a tensor+element+tensor fusion of its MatMuls, Mul and Softmax where Inductor calls the
    attention as one library call; with the exporter's record of each node's FX node it is one operator.
    A layer of the linear's MatMul and Add stays a fusion (the exporter's nodes are its unit)."""
    from onnx import helper

    def node(op: str, name: str, fx: str, target: str) -> Any:
        made = helper.make_node(op, ["a"], [name + "_out"], name=name)
        made.metadata_props.add(key="pkg.torch.onnx.fx_node",
                                value=f"%{fx} : [num_users=1] = call_function[target=torch.ops.{target}](args = (), kwargs = {{}})")
        return made

    sdpa = "aten.scaled_dot_product_attention.default"
    nodes = [node("MatMul", "node_MatMul_1", "linear", "aten.linear.default"),
             node("Add", "node_linear", "linear", "aten.linear.default"),
             node("Mul", "node_Mul_46", "scaled_dot_product_attention", sdpa),
             node("MatMul", "node_MatMul_50", "scaled_dot_product_attention", sdpa),
             node("Softmax", "node_Softmax_51", "scaled_dot_product_attention", sdpa),
             node("MatMul", "node_scaled_dot_product_attention", "scaled_dot_product_attention", sdpa)]
    graph = helper.make_graph(nodes, "g", [], [])
    calls = onnx_attention_calls(graph)
    assert calls == {name: ["scaled_dot_product_attention", "aten.scaled_dot_product_attention"]
                     for name in ("node_Mul_46", "node_MatMul_50", "node_Softmax_51", "node_scaled_dot_product_attention")}
    marker = "\x1f".join
    info = {"Layers": [
        {"Name": "node_MatMul_1 + node_linear", "LayerType": "CaskGemm",
         "Metadata": marker(["[ONNX Layer: node_MatMul_1]", "[ONNX Layer: node_linear]"])},
        {"Name": "{ForeignNode[node_Mul_46...node_scaled_dot_product_attention]}", "LayerType": "Myelin",
         "Metadata": marker(f"[ONNX Layer: {n.name}]" for n in nodes[2:])},
    ]}
    json_calls = json.loads(json.dumps(calls))  # as the engine's cache folder keeps them
    layers = engine_layers(info, onnx_op_types(graph), json_calls)
    assert [(g.ops, g.fusion_class) for g in layers.groups] == [
        (("onnx.MatMul", "onnx.Add"), "tensor+element"), (("aten.scaled_dot_product_attention",), "single")]
    assert engine_layers(info, onnx_op_types(graph)).groups[1].fusion_class == "tensor+element+tensor"
