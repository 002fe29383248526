"""Inductor fusion on and off on a ResNet (CPU): off must run one operator per kernel, clearly
more kernels than on, and still match eager. The ResNet is resnet18's first two stages with one
basic block each: its stem and max pool, a block that keeps the shape, a block that changes it
through a shortcut convolution, the average pool and the classifier. That is every kind of layer
and join resnet18 has, with 6 convolutions to its 20, so fewer kernels to compile
(scenarios/smoke.yaml's run compiles resnet18 itself: tests/integration/test_cli_end_to_end.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract import Variant
from harness.measure.correctness import compare

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

#: The fixture's ResNet: a stem convolution, two in each of its two blocks, and the shortcut
#: convolution of the block that changes the shape, which has no activation after it.
RESNET_CONVS, RESNET_SHORTCUTS = 1 + 2 * 2 + 1, 1


def _two_stage_resnet() -> torch.nn.Module:
    """resnet18's code with one basic block a stage, its last two stages left out: the classifier
    reads the second stage's 128 channels."""
    model = torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1])
    model.layer3, model.layer4, model.fc = torch.nn.Identity(), torch.nn.Identity(), torch.nn.Linear(128, 1000)
    return model.eval()


@pytest.fixture(scope="module")
def prepared_pair(tmp_path_factory: pytest.TempPathFactory):
    from backends.inductor import InductorBackend

    backend = InductorBackend()
    if not backend.availability("cpu").ok:
        pytest.skip(backend.availability("cpu").reason)
    torch.manual_seed(0)
    model = _two_stage_resnet()
    example = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        reference = model(example)
    out = {}
    # Inductor's precompiled header in a folder of the fixture's own, as on a machine that never compiled:
    # the first compile builds it (its build's seconds read from the files' times), the second finds it
    from torch._inductor import codecache

    headers = tmp_path_factory.mktemp("precompiled-headers")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codecache, "_HEADER_DIR", str(headers))
        patch.setattr(codecache, "_HEADER_LOCK_DIR", str(headers / "locks"))
        codecache._precompile_header.cache_clear()  # a process builds or finds a header once
        try:
            for fusion in ("on", "off"):
                work = tmp_path_factory.mktemp(f"inductor-{fusion}")
                prepared = backend.prepare(model, example, device="cpu", dtype="fp32", variant=Variant(fusion),
                                           workdir=work, cache_dir=Path(work))
                # its kernels timed now: Dynamo keeps both compiles of the one model in its cache, and a call
                # after the second may run either (a cell compiles once in a process of its own)
                out[fusion] = (prepared, prepared(example), prepared.cpu_kernel_times(example))
        finally:
            codecache._precompile_header.cache_clear()
    header_build_s = sum(gch.stat().st_mtime - gch.with_suffix("").stat().st_mtime for gch in headers.glob("*.gch"))
    return out, example, reference, header_build_s


def test_fusion_off_runs_one_operator_per_kernel(prepared_pair) -> None:
    pairs, example, _, _ = prepared_pair
    off = pairs["off"][0].fusion_report()
    assert off.fusions == 0
    assert all(k.fusion_class == "single" for k in off.kernels)
    ops = {k.ops[0] for k in off.kernels if k.ops}
    # freezing on CPU: each convolution is a oneDNN call, without post-ops
    assert {"mkldnn._convolution_pointwise", "aten.relu", "aten.add"} <= ops


def test_fusion_off_has_clearly_more_kernels_than_on(prepared_pair) -> None:
    from harness.fusion.mapping import mapping_class

    pairs, example, _, _ = prepared_pair
    on, off = (pairs[f][0].cpu_dispatches(example) for f in ("on", "off"))
    assert off >= 3 * on, (on, off)
    report_on = pairs["on"][0].fusion_report()
    assert report_on.fusions > 0
    assert any(k.fusion_class == "tensor+element" for k in report_on.kernels)
    # the report's kernels too: fusion off's that compute (not a layout's reorder) outnumber all of fusion on's
    computing_off = [k for k in pairs["off"][0].fusion_report().kernels
                     if any(mapping_class(op) not in ("shuffle", "reorganize") for op in k.ops)]
    assert len(computing_off) > len(report_on.kernels) >= 1


def test_the_generated_kernels_are_timed_under_the_names_the_report_gives_them(prepared_pair) -> None:
    """Fusion on: each generated C++ kernel the report lists is timed once a call, beside the
    oneDNN convolutions it calls, all inside the profiled call."""
    pairs, _, _, _ = prepared_pair
    prepared, _, times = pairs["on"]
    generated = sorted(name for name, _ in times.calls if name.startswith("cpp_fused"))
    assert generated and generated == sorted(k.kernel for k in prepared.fusion_report().kernels if k.kernel.startswith("cpp_fused"))
    assert any(name.startswith("mkldnn::") for name, _ in times.calls)
    assert 0 < sum(ns for _, ns in times.calls) <= times.wall_ns


def test_the_layout_copies_are_timed_as_copies_not_as_the_operators_their_names_list(prepared_pair) -> None:
    """Fusion on copies the input into channels-last in a kernel named after the relu beside it: its time
    is summed under the kind of a copy (data movement), not that of the relu kernels fusion off runs."""
    from backends.inductor_code import LAYOUT_COPY
    from harness.measure.kernel_kinds import kind_of
    from harness.reporting.op_classes import DATA_MOVEMENT, class_of

    pairs, _, _, _ = prepared_pair
    prepared, _, times = pairs["on"]
    copies = {k.kernel for k in prepared.fusion_report().kernels if k.ops == (LAYOUT_COPY,)}
    timed = {name for name, _ in times.calls}
    assert copies and copies <= timed
    assert {class_of(kind_of(name, times.kinds)) for name in copies} == {DATA_MOVEMENT}
    assert {kind_of(name, times.kinds) for name in timed - copies} & {"cpp_fused_layout_copy"} == set()


def test_the_classifiers_bias_is_timed_as_element_wise_not_as_the_matrix_multiply(prepared_pair) -> None:
    """The classifier runs as MKL's linear and a generated kernel named after `addmm` that adds its
    bias: that kernel's time is element-wise, on both sides, the matrix multiply's `mkl::_mkl_linear`'s."""
    from harness.fusion import is_part_of_tensor_op
    from harness.measure.kernel_kinds import kind_of
    from harness.reporting.op_classes import ELEMENTWISE, MATRIX_MULTIPLY, class_of

    pairs, _, _, _ = prepared_pair
    for fusion in ("on", "off"):
        prepared, _, times = pairs[fusion]
        biases = {k.kernel for k in prepared.fusion_report().kernels if any(is_part_of_tensor_op(op) for op in k.ops)}
        timed = {name for name, _ in times.calls}
        assert biases and biases <= timed and any("addmm" in name for name in biases), fusion
        assert {class_of(kind_of(name, times.kinds)) for name in biases} == {ELEMENTWISE}, fusion
        assert MATRIX_MULTIPLY in {class_of(kind_of(name, times.kinds)) for name in timed - biases}, fusion


def test_the_header_the_first_compile_built_is_not_its_compile_time(prepared_pair) -> None:
    """The first compile on a machine builds Inductor's precompiled header and checks the CPU's vector
    sets; the second finds both done. Those seconds are each compile's `toolchain_s`, which the worker
    leaves out of `prepare_s`, so the pair's compile times are their models'."""
    pairs, _, _, header_build_s = prepared_pair
    on, off = pairs["on"][0], pairs["off"][0]
    assert header_build_s > 0.5  # about 7 to 11 s on one core of the 2-core test machine
    assert on.toolchain_s >= 0.95 * header_build_s, (on.toolchain_s, header_build_s)
    assert off.toolchain_s < 0.5 * header_build_s, (off.toolchain_s, header_build_s)


def test_both_variants_match_eager(prepared_pair) -> None:
    pairs, _, reference, _ = prepared_pair
    for fusion, (_, output, _) in pairs.items():
        verdict = compare(output, reference, "fp32")
        assert verdict["ok"], (fusion, verdict["reason"])


def test_freezing_is_on_in_both_variants_and_only_its_fusions_go_with_fusion_off(prepared_pair) -> None:
    from backends.inductor import InductorOptions

    assert InductorOptions().freezing is True
    assert InductorOptions.model_validate({"freezing": False}).freezing is False
    pairs, _, _, _ = prepared_pair
    on, off = pairs["on"][0].rewrites(), pairs["off"][0].rewrites()
    for kept in ("freezing", "constant_folding", "onednn_weight_prepack"):
        assert on[kept] is True and off[kept] is True, kept
    for fusing in ("conv_bn_folding", "onednn_epilogues", "lowering_inlining", "scheduler_fusion"):
        assert on[fusing] is True and off[fusing] is False, fusing
    # with freezing kept, fusion off still runs prepacked oneDNN convolutions, each without a post-op
    convs = [k for k in pairs["off"][0].fusion_report().kernels if "_convolution_pointwise" in k.kernel]
    assert len(convs) == RESNET_CONVS and all(len(k.ops) == 1 for k in convs), convs


def test_layout_optimization_off_keeps_the_models_layout(tmp_path: Path) -> None:
    """As shipped, Inductor moves a convolution's input to channels-last and back, kernels of their
    own; `layout_optimization: false` leaves the model's layout, so those kernels are gone and the
    output is still eager's. Without freezing: on CPU, freezing's oneDNN convolutions choose
    channels-last themselves."""
    from backends.inductor import InductorBackend, InductorOptions

    assert InductorOptions().layout_optimization is True
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 3)).eval()
    example = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        reference = model(example)
    kernels = {}
    for layout in (True, False):
        work = tmp_path / str(layout)
        variant = InductorBackend.variant("on", {"freezing": False, "layout_optimization": layout})
        prepared = InductorBackend().prepare(model, example, device="cpu", dtype="fp32", variant=variant,
                                             workdir=work, cache_dir=work)
        assert prepared.rewrites()["layout_optimization"] is layout
        assert compare(prepared(example), reference, "fp32")["ok"], layout
        kernels[layout] = [k.kernel for k in prepared.fusion_report().kernels]
    # the layout's own kernels: the input moved to channels-last before the first convolution
    assert any(name.startswith("cpp_fused_convolution") for name in kernels[True]), kernels[True]
    assert not any(name.startswith("cpp_fused_convolution") for name in kernels[False]), kernels[False]
    assert len(kernels[False]) < len(kernels[True]), kernels


def test_the_compile_mode_follows_the_graphs_setting() -> None:
    from backends.inductor import compile_mode
    from harness.errors import BackendFailed

    assert compile_mode("default", "on", "cuda") == "reduce-overhead"
    assert compile_mode("max-autotune", "off", "cuda") == "max-autotune-no-cudagraphs"
    assert compile_mode("max-autotune", "off", "cpu") == "max-autotune"
    with pytest.raises(BackendFailed, match="graphs: on"):
        compile_mode("reduce-overhead", "off", "cuda")


@pytest.mark.parametrize("graphs", ["on", "off"])
def test_a_graph_inductor_will_not_capture_fails_a_graphs_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graphs: str,
) -> None:
    """Inductor's CUDA graph trees skip a graph they deem unsafe with a warning only, and the model
    then runs uncaptured under a cell that says graphs: on. With graphs on, the compile is asked to
    raise instead, and the cell fails naming why. (No GPU here: the compile's first call is a
    stand-in that raises as Inductor does when told to, and records whether it was told to.)"""
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils

    from backends.inductor import InductorBackend
    from harness.errors import BackendFailed

    if not hasattr(inductor_config.triton, "cudagraph_or_error"):
        pytest.skip("this torch's Inductor cannot be told to fail where it skips CUDA graphs")
    told: list[bool] = []

    def first_call(compiled, example):
        told.append(inductor_config.triton.cudagraph_or_error)
        raise RuntimeError("skipping cudagraphs due to mutated inputs (1 instances)" if told[-1] else "stand-in")

    monkeypatch.setattr(inductor_utils, "run_and_get_code", first_call)
    backend = InductorBackend()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval()
    expected = BackendFailed if graphs == "on" else RuntimeError
    with pytest.raises(expected) as raised:
        backend.prepare(model, torch.ones(2, 4), device="cpu", dtype="fp32", variant=backend.variant("on", graphs=graphs),
                        workdir=tmp_path, cache_dir=tmp_path / "cache")
    assert told == [graphs == "on"]
    if graphs == "on":
        assert "would not capture the model in CUDA graphs" in str(raised.value)
        assert "mutated inputs" in str(raised.value)


class _ConvNeXtBlock(torch.nn.Module):
    """Depthwise conv, then layer norm and an MLP in channels-last through permutes, plus the residual."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.dwconv = torch.nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.fc1, self.act, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


@pytest.fixture(scope="module")
def convnext_rounds(tmp_path_factory: pytest.TempPathFactory):
    """The ConvNeXt block prepared as a cell's rounds prepare it (harness/run/rounds.py): fusion off
    twice, with cache folders of the cell's own (the first compile finds them empty, the second finds
    the first's); fusion on's rounds go through the same folders. Then a one-kernel model (a ReLU)
    twice more with no folder of the cell's own: what those show is the cache's state, not the
    model's, and a cold compile of the block takes about 14 s on one core, most of it in the C++
    compiler. Each output is computed right after its compile: a later compile resets Dynamo, and a
    call after that would compile the model again, with Inductor's settings as shipped."""
    from backends.inductor import InductorBackend

    torch.manual_seed(0)
    model, example = _ConvNeXtBlock().eval(), torch.randn(2, 16, 8, 8)
    with torch.no_grad():
        reference = model(example)
    work = tmp_path_factory.mktemp("convnext")

    def prepare(model: torch.nn.Module, fusion: str) -> tuple[object, torch.Tensor]:
        prepared = InductorBackend().prepare(model, example, device="cpu", dtype="fp32", variant=Variant(fusion),
                                             workdir=work, cache_dir=work / "backend-cache")
        return prepared, prepared(example)

    rounds = {}
    with pytest.MonkeyPatch.context() as patch:
        home = work / "cell-off"
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(home / "inductor-cache"))
        patch.setenv("TRITON_CACHE_DIR", str(home / "triton-cache"))
        rounds["off"] = (prepare(model, "off"), prepare(model, "off"))
        patch.delenv("TORCHINDUCTOR_CACHE_DIR")
        # the cell's folders, with what they hold, out of reach
        uncached = [prepare(torch.nn.ReLU(), "off")[0] for _ in range(2)]
    return rounds, uncached, reference


def test_fusion_off_counts_no_fusion_where_views_are_folded_into_indexing(convnext_rounds) -> None:
    """Inductor names a kernel after the permute it reads through (`cpp_fused_native_layer_norm_permute`);
    a view computes nothing, so fusion off still has no fused kernel."""
    rounds, _, reference = convnext_rounds
    prepared, output = rounds["off"][0]
    report = prepared.fusion_report()
    assert any("aten.permute" in k.ops and len(k.ops) > 1 for k in report.kernels), report.kernels
    assert report.fusions == 0, [k for k in report.kernels if k.fusion_class != "single"]
    assert compare(output, reference, "fp32")["ok"]


def test_fusion_on_reports_the_batch_norms_freezing_folded(prepared_pair) -> None:
    pairs, _, _, _ = prepared_pair
    report = pairs["on"][0].fusion_report()
    with_bn = [k for k in report.kernels if "aten.batch_norm" in k.ops]
    assert len(with_bn) == RESNET_CONVS and all("convolution" in k.ops[0] for k in with_bn)  # every conv has its bn
    assert sum(1 for k in with_bn if "aten.relu" in k.ops) == RESNET_CONVS - RESNET_SHORTCUTS
    assert report.notes.startswith(f"{RESNET_CONVS} batch norm(s) folded into convolution weights by freezing")
    assert not any("aten.batch_norm" in k.ops for k in pairs["off"][0].fusion_report().kernels)  # off folds nothing


def test_folded_batch_norms_are_only_attributed_when_the_convolutions_line_up() -> None:
    from backends.inductor_folding import FoldWatch, _Graph
    from harness.fusion import KernelGroup

    watch = FoldWatch(graphs=[_Graph(bn_after_conv={"a": "bn_a", "b": "bn_b"}, convs=["a", "b"], remaining_bns={"bn_b"})])
    conv = KernelGroup("torch.ops.mkldnn._convolution_pointwise", ("mkldnn._convolution_pointwise", "aten.relu"))
    other = KernelGroup("cpp_fused_add_0", ("aten.add",))
    # a generated kernel adding a convolution's bias (on a GPU) is not a convolution call
    bias = KernelGroup("triton_poi_fused_convolution_relu_1", ("aten.convolution (bias or layout)", "aten.relu"))
    kernels, note = watch.attribute([[conv, bias, other, conv]])
    assert [k.ops for k in kernels] == [("mkldnn._convolution_pointwise", "aten.batch_norm", "aten.relu"), bias.ops,
                                        ("aten.add",), ("mkldnn._convolution_pointwise", "aten.relu")]  # bn_b was not folded
    assert note.startswith("1 batch norm(s) folded")
    kernels, note = watch.attribute([[conv]])  # the code calls one convolution, the graph has two
    assert kernels == [conv] and "1 more were folded but could not be matched to a kernel" in note


def test_a_model_with_no_batch_norm_after_a_convolution_has_none_to_fold_not_a_count_of_none() -> None:
    """A transformer block's note read `0 batch norm(s) folded into convolution weights`."""
    from backends.inductor_folding import FoldWatch, _Graph
    from harness.fusion import KernelGroup

    linear = KernelGroup("torch.ops.mkl._mkl_linear", ("mkl._mkl_linear",))
    watch = FoldWatch(graphs=[_Graph(convs=[])])
    kernels, note = watch.attribute([[linear]])
    assert kernels == [linear]
    assert note == "no batch norm follows a convolution in the model: none to fold into convolution weights"


def test_a_further_round_finds_the_cells_own_caches_and_compiles_warm(convnext_rounds) -> None:
    """A cell's rounds share its cache folders (harness/run/rounds.py): round 1 finds them empty and
    compiles cold, a further round compiles warm with the same kernels; with no folder of the cell's
    own (prepared outside a worker) every cache is off and each compile is cold."""
    rounds, uncached, reference = convnext_rounds
    for fusion, ((first, _), (again, output)) in rounds.items():
        assert (first.prepare_cache, again.prepare_cache) == ("cold", "warm"), fusion
        assert first.fusion_report() == again.fusion_report(), fusion  # the code generated again, alike
        assert compare(output, reference, "fp32")["ok"]
    assert [prepared.prepare_cache for prepared in uncached] == ["cold", "cold"]


def test_an_lstm_is_compiled_not_left_to_eager(tmp_path: Path) -> None:
    """Dynamo skips nn.LSTM unless told: the global-analysis suite's LSTM failed with no Inductor
    code. Traced, each layer is one oneDNN RNN call in Inductor's graph, and the output is eager's."""
    import torch

    from backends.inductor import InductorBackend
    from harness.contract import Variant

    torch.manual_seed(0)
    model = torch.nn.LSTM(8, 8, num_layers=2, batch_first=True).eval()

    class Last(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0]

    wrapped, example = Last().eval(), torch.randn(1, 5, 8)
    with torch.no_grad():
        reference = wrapped(example)
        prepared = InductorBackend().prepare(wrapped, example, device="cpu", dtype="fp32", variant=Variant("on"),
                                             workdir=tmp_path, cache_dir=tmp_path)
        try:
            assert prepared.rewrites()["rnn_modules_traced"] is True
            assert any("rnn" in op for k in prepared.fusion_report().kernels for op in k.ops)
            assert torch.allclose(prepared(example), reference, atol=1e-5)
        finally:
            prepared.close()


class _Attention(torch.nn.Module):
    """One attention head set written as BERT's eager attention writes it (matmul, scale, softmax in
    fp32, dropout, matmul): the form Inductor's attention patterns match."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.view(1, 16, 4, 16).transpose(1, 2) for t in self.qkv(x).split(64, dim=-1))
        weights = torch.matmul(q, k.transpose(2, 3)) * 0.25
        weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(q.dtype)
        weights = torch.nn.functional.dropout(weights, p=0.0, training=False)
        return torch.matmul(weights, v).transpose(1, 2).reshape(1, 16, 64)


def test_fusion_off_runs_attention_as_its_matmuls_and_softmax(tmp_path: Path) -> None:
    """Inductor's attention rewrite put BERT's matmul, softmax and matmul into one
    `_scaled_dot_product_flash_attention_for_cpu` call with fusion off, counted as no fusion (an
    independent reading of the generated code found it). With fusion on the call runs the operators
    the rewrite replaced (backends/inductor_attention.py)."""
    from backends.inductor import InductorBackend

    torch.manual_seed(0)
    model, example = _Attention().eval(), torch.randn(1, 16, 64)
    backend = InductorBackend()
    ops, calls = {}, {}
    for fusion in ("on", "off"):
        prepared = backend.prepare(model, example, device="cpu", dtype="fp32", variant=backend.variant(fusion, {}),
                                   workdir=tmp_path / fusion, cache_dir=tmp_path / "cache")
        ops[fusion] = [op for kernel in prepared.fusion_report().kernels for op in kernel.ops]
        calls[fusion] = [k for k in prepared.fusion_report().kernels if "scaled_dot_product" in k.kernel and "fused" not in k.kernel]
        with torch.no_grad():
            assert compare(prepared(example), model(example), "fp32")["ok"]
    # The rewrite is Inductor's fusion, and counts as one: its call runs the matmuls and softmax it replaced
    # (it was listed as one operator, `single`, and the count left the fused attention out).
    [call] = calls["on"]
    assert call.fusion_class == "tensor+element+tensor", call
    assert [op for op in call.ops if op in ("aten.bmm", "aten._softmax")] == ["aten.bmm", "aten._softmax", "aten.bmm"], call
    assert not calls["off"] and not any("scaled_dot_product" in op for op in ops["off"]), ops["off"]
    assert ops["off"].count("aten.bmm") == 2 and "aten._softmax" in ops["off"], ops["off"]


def test_close_lets_go_of_the_models_weights(tmp_path: Path) -> None:
    """Dynamo's cache entry, kept on the model class's code, held the compiled graph and the frozen
    weights after the cell was done with them: on a GPU, through the memory pass's child, which
    prepares a copy of its own."""
    import gc
    import weakref

    from backends.inductor import InductorBackend

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    example = torch.randn(2, 3, 16, 16)
    weights = [weakref.ref(parameter) for parameter in model.parameters()]
    prepared = InductorBackend().prepare(model, example, device="cpu", dtype="fp32", variant=Variant("on"),
                                         workdir=tmp_path, cache_dir=tmp_path)
    prepared(example)
    del model
    prepared.close()
    gc.collect()
    assert [weight() for weight in weights] == [None] * len(weights)


def test_a_nested_compile_regions_kernels_are_counted_as_the_profiler_sees_them_run(tmp_path: Path) -> None:
    """A `torch.compiler.nested_compile_region` called twice runs its matrix multiply and its fused
    kernel at each call. The report listed the one kernel after them (kernels per inference 1, the region
    named in the note only); now each call's kernels stand in order, as many as the profiler sees run."""
    from backends.inductor import InductorBackend

    @torch.compiler.nested_compile_region
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w) * 2 + 1

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(16, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(block(block(x, self.w), self.w))

    torch.manual_seed(0)
    model, example = Twice().eval(), torch.randn(4, 16)
    prepared = InductorBackend().prepare(model, example, device="cpu", dtype="fp32", variant=Variant("on"),
                                         workdir=tmp_path, cache_dir=tmp_path)
    try:
        report = prepared.fusion_report()
        fused = [k for k in report.kernels if k.kernel.startswith("cpp_fused")]
        assert [k.ops for k in fused] == [("aten.add", "aten.mul", "aten.relu")] * 2 + [("aten.sigmoid",)], report.kernels
        assert sum(1 for k in report.kernels if k.ops == ("aten.mm",)) == 2, report.kernels
        assert "repeated_subgraph0: 2 call(s)" in report.notes
        times = prepared.cpu_kernel_times(example)
        assert times is not None
        assert prepared.cpu_dispatches(example) == len(times.calls) == 5, times.calls
        with torch.no_grad():
            assert compare(prepared(example), model(example), "fp32")["ok"]
    finally:
        prepared.close()
