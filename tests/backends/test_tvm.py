"""The TVM (Relax) backend on CPU: fusion on/off, the fusion report read from the IR, the compile
cache, zero-copy calls, option checking and refusals. Skipped where apache-tvm is not installed.

Compiling is the slow part (about 1.5 s for the tiny model on 2 cores), so each variant is compiled
once per module and shared by the tests that read it. What TVM fuses in resnet18 (every convolution
with its batch norm, relu and residual add) is read from the smoke run's TVM cell, which compiles it
with the same options (tests/integration/test_cli_end_to_end.py), where this module compiled it again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from backends.tvm import TVMBackend  # noqa: E402  (imports tvm only as it compiles)
from harness.contract import Variant  # noqa: E402
from harness.errors import BackendFailed  # noqa: E402
from harness.fusion import op_name  # noqa: E402
from harness.measure.correctness import compare  # noqa: E402
from tests.attention_block import attention_block  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _tvm() -> None:
    """Skips the module where apache-tvm is not installed. Imported as the module's first test runs,
    not at collection: every pytest-xdist worker collects every module, and three of the four that
    never run one of these tests imported TVM for nothing (about 2 CPU-s each)."""
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")


def _tiny() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    ).eval()
    with torch.no_grad():  # non-trivial statistics, so a wrong batch-norm lowering shows
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    return model, torch.randn(2, 3, 16, 16)


def _prepare(model: Any, example: Any, cache: Path, fusion: str = "on", **options: Any) -> Any:
    """The model prepared untuned (tuning_trials 0) unless the options say otherwise: the tuning
    tests below tune first, as the worker does."""
    options = {"tuning_trials": 0, **options}
    return TVMBackend().prepare(
        model, example, device="cpu", dtype="fp32", variant=TVMBackend.variant(fusion, options),
        workdir=cache, cache_dir=cache,
    )


def _tune(model: Any, example: Any, cache: Path, fusion: str = "on", device: str = "cpu", **options: Any) -> Any:
    return TVMBackend().tune(model, example, device=device, dtype="fp32", variant=TVMBackend.variant(fusion, options),
                             workdir=cache / "work", cache_dir=cache)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tvm-cache")


@pytest.fixture(scope="module")
def tiny(cache: Path) -> dict[str, Any]:
    """Both variants of the tiny model, compiled into one shared cache directory."""
    model, example = _tiny()
    with torch.no_grad():
        reference = model(example)
    prepared = {fusion: _prepare(model, example, cache, fusion) for fusion in ("on", "off")}
    yield {"model": model, "example": example, "reference": reference, **prepared}
    for p in prepared.values():
        p.close()


def test_fusion_off_dispatches_more_kernels_than_on(tiny: dict[str, Any]) -> None:
    x = tiny["example"]
    on, off = tiny["on"].cpu_dispatches(x), tiny["off"].cpu_dispatches(x)
    assert off > on > 0
    # Each reported kernel is called once per inference: the report and the count agree.
    assert on == len(tiny["on"].fusion_report().kernels)
    assert off == len(tiny["off"].fusion_report().kernels)


def test_each_kernels_time_is_named_as_the_report_names_it(tiny: dict[str, Any]) -> None:
    """The profiled inference times each kernel the report lists, once a call, under its name, so a
    report can say which fused kernel the time went to."""
    for fusion in ("on", "off"):
        times = tiny[fusion].cpu_kernel_times(tiny["example"])
        assert sorted(name for name, _ in times.calls) == sorted(k.kernel for k in tiny[fusion].fusion_report().kernels)
        assert all(ns > 0 for _, ns in times.calls)
        assert 0 < sum(ns for _, ns in times.calls) <= times.wall_ns


def test_fusion_on_and_off_are_set_side_by_side_kind_by_kind(tiny: dict[str, Any]) -> None:
    """TVM numbers its functions (conv2d1, fused_conv2d_subtract_add1_relu): by kind, fusion off's
    convolution and relu stand against fusion on's fused convolution (harness/measure/kernel_kinds.py)."""
    from harness.measure.kernel_kinds import KIND_METHOD_NAME, kind_method
    from harness.measure.passes import cpu_kernel_figures

    times = {fusion: tiny[fusion].cpu_kernel_times(tiny["example"]) for fusion in ("on", "off")}
    kinds = {fusion: {k["kind"] for k in cpu_kernel_figures([t], t.wall_ns)["by_kind"]} for fusion, t in times.items()}
    assert {"conv2d", "relu", "matmul"} <= kinds["off"], kinds["off"]
    assert "conv2d" not in kinds["on"] and any(k.startswith("fused_conv2d") and k.endswith("relu") for k in kinds["on"])
    assert kind_method([times["on"]]) == KIND_METHOD_NAME


def test_fusion_on_puts_conv_bn_relu_in_one_kernel(tiny: dict[str, Any]) -> None:
    report = tiny["on"].fusion_report()
    conv = [k for k in report.kernels if any(op_name(op) == "conv2d" for op in k.ops)]
    assert len(conv) == 1
    ops = {op_name(op) for op in conv[0].ops}
    # Batch norm, decomposed for inference, fuses with the conv before it and the relu after it.
    assert {"conv2d", "relu", "multiply", "add"} <= ops
    assert conv[0].fusion_class == "tensor+element"
    assert report.fusions >= 1
    assert all(op.startswith("relax.") and op.count(".") == 1 for k in report.kernels for op in k.ops)


def test_fusion_off_leaves_one_op_per_kernel(tiny: dict[str, Any]) -> None:
    report = tiny["off"].fusion_report()
    assert report.fusions == 0
    assert all(k.fusion_class == "single" for k in report.kernels)
    names = [op_name(k.ops[0]) for k in report.kernels]
    assert names[0] == "conv2d" and "relu" in names and "matmul" in names


@pytest.mark.parametrize("fusion", ["on", "off"])
def test_output_matches_eager(tiny: dict[str, Any], fusion: str) -> None:
    output = tiny[fusion](tiny["example"])
    tiny[fusion].synchronize()
    assert isinstance(output, torch.Tensor)
    verdict = compare(output, tiny["reference"], "fp32")
    assert verdict["ok"], verdict["reason"]


def test_an_output_survives_the_next_call(tiny: dict[str, Any]) -> None:
    prepared, x = tiny["on"], tiny["example"]
    first = prepared(x)
    kept = first.clone()
    second = prepared(x * 2)
    assert torch.equal(first, kept), "the VM wrote the next call's output over a returned tensor"
    assert not torch.equal(second, kept)


def test_tvms_thread_pool_has_a_thread_per_core_of_the_process(tiny: dict[str, Any]) -> None:
    """TVM's own default is half the logical CPUs on x86 (it takes every core for two hardware
    threads): one thread on a 2-core machine without SMT, where torch and ONNX Runtime ran two. The
    pool the kernels run on has a thread per core the process may use, and the profile says so."""
    cores = len(os.sched_getaffinity(0))
    for fusion in ("on", "off"):
        assert tiny[fusion].thread_pool_threads() == cores
        assert tiny[fusion].profile_figures(tiny["example"])["thread_pool_threads"] == cores


def test_a_thread_count_the_pool_was_not_made_with_fails_the_prepare(
    tiny: dict[str, Any], cache: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TVM makes its pool once: a count asked after that would be timed with the pool's, unsaid."""
    monkeypatch.setenv("TVM_NUM_THREADS", os.environ.get("TVM_NUM_THREADS", ""))  # restored afterwards
    made = tiny["on"].thread_pool_threads()
    with pytest.raises(BackendFailed, match=f"thread pool has {made} thread\\(s\\), not the {made + 1} asked"):
        _prepare(tiny["model"], tiny["example"], cache, "on", threads=made + 1)


def test_a_thread_count_the_cell_was_given_stays_and_keys_its_own_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only TVM's last guess (half the logical CPUs on x86) is replaced: a count given as
    OMP_NUM_THREADS (a `--jobs` slot's, a scenario's `env:`) or TVM_NUM_THREADS stays, the option
    wins over both, and a database tuned on another count than one per core has a key of its own."""
    from backends import tvm as tvm_backend

    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert tvm_backend.size_thread_pool(0) == cores and os.environ["TVM_NUM_THREADS"] == str(cores)
    model, example = _tiny()
    options = tvm_backend._checked_options(TVMBackend.variant("on", {"tuning_trials": 1}), "cpu")
    target = tvm_backend._target("cpu", options)
    one_per_core = tvm_backend._tuning_entry(model, example, target, "fp32", "on", options, Path("/cache")).name

    monkeypatch.delenv("TVM_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", str(cores + 1))
    assert tvm_backend.size_thread_pool(0) == cores + 1 and "TVM_NUM_THREADS" not in os.environ
    assert tvm_backend._tuning_entry(model, example, target, "fp32", "on", options, Path("/cache")).name != one_per_core
    assert tvm_backend.size_thread_pool(3) == 3 and os.environ["TVM_NUM_THREADS"] == "3"
    monkeypatch.setenv("TVM_NUM_THREADS", "many")
    assert tvm_backend.size_thread_pool(0) is None  # no number: TVM's own reading of it, not checked


def test_a_process_on_fewer_cores_than_the_machine_leaves_tvms_pool_unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """TVM's pool pins its threads to the machine's first cores whatever the process's affinity:
    confined to some of the machine's cores, the backend leaves it unpinned; a TVM_BIND_THREADS
    given stays; on the whole machine TVM pins as it always did."""
    from backends import tvm as tvm_backend

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.delenv("TVM_BIND_THREADS", raising=False)
    monkeypatch.setattr(tvm_backend, "process_cores", lambda: 4)
    tvm_backend.size_thread_pool(0)
    assert "TVM_BIND_THREADS" not in os.environ
    monkeypatch.setattr(tvm_backend, "process_cores", lambda: 2)
    tvm_backend.size_thread_pool(0)
    assert os.environ["TVM_BIND_THREADS"] == "0"
    monkeypatch.setenv("TVM_BIND_THREADS", "1")
    tvm_backend.size_thread_pool(0)
    assert os.environ["TVM_BIND_THREADS"] == "1"


def test_a_process_confined_to_a_later_core_keeps_it_through_tvms_compile_and_call() -> None:
    """Given the machine's last core alone (`taskset -c 1` on two), a process's thread ran on core 0
    after TVM made its pool, and every test after it in a pytest worker given a core of its own."""
    import subprocess
    import sys

    from tests.conftest import WHOLE_MACHINE

    if len(WHOLE_MACHINE) < 2:
        pytest.skip("one core: no later core to confine the process to")
    code = f"""
import os, tempfile
from pathlib import Path
os.sched_setaffinity(0, {{{max(WHOLE_MACHINE)}}})
import torch
from backends.tvm import TVMBackend
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).eval()
example = torch.randn(1, 3, 16, 16)
work = Path(tempfile.mkdtemp())
prepared = TVMBackend().prepare(model, example, device="cpu", dtype="fp32",
                                variant=TVMBackend.variant("on", {{"tuning_trials": 0}}), workdir=work, cache_dir=work / "cache")
prepared(example)
print(sorted(os.sched_getaffinity(0)))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_BIND_THREADS", "TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [f"[{max(WHOLE_MACHINE)}]"], done.stdout


def test_unaligned_input_is_still_computed_right(tiny: dict[str, Any]) -> None:
    x = tiny["example"]
    storage = torch.empty(x.numel() + 1)
    shifted = storage[1:].view_as(x)  # 4 bytes past a 64-byte boundary
    shifted.copy_(x)
    assert compare(tiny["on"](shifted), tiny["reference"], "fp32")["ok"]


def test_second_prepare_is_warm_and_skips_the_import(tiny: dict[str, Any], cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tiny["on"].prepare_cache == "cold" and tiny["off"].prepare_cache == "cold"

    def no_export(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a warm prepare must not export the model again")

    monkeypatch.setattr(torch.export, "export", no_export)
    warm = _prepare(tiny["model"], tiny["example"], cache, "on")
    try:
        assert warm.prepare_cache == "warm"
        assert compare(warm(tiny["example"]), tiny["reference"], "fp32")["ok"]
        assert warm.fusion_report() == tiny["on"].fusion_report()
    finally:
        warm.close()


def test_other_weights_or_options_miss_the_cache(tiny: dict[str, Any], cache: Path) -> None:
    model, example = _tiny()
    with torch.no_grad():
        model[0].weight.mul_(-1)
        reference = model(example)
    changed = _prepare(model, example, cache, "on")
    try:
        assert changed.prepare_cache == "cold"
        assert compare(changed(example), reference, "fp32")["ok"]
    finally:
        changed.close()
    level = _prepare(tiny["model"], example, cache, "on", opt_level=2)
    try:
        assert level.prepare_cache == "cold"
    finally:
        level.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"surely_not_an_option": 1}, "tvm options: unknown option surely_not_an_option.*allowed: opt_level, mcpu"),
        ({"opt_level": "3"}, "opt_level: Input should be a valid integer"),
        ({"opt_level": True}, "opt_level: Input should be a valid integer"),
        ({"opt_level": 4}, "opt_level: Input should be less than or equal to 3"),
        ({"mcpu": "znver9"}, "mcpu: Input should be 'host' or 'generic'"),
        ({"threads": -1}, "threads: Input should be greater than or equal to 0"),
    ],
)
def test_bad_options_fail_before_compiling(options: dict[str, Any], message: str, tmp_path: Path) -> None:
    model, example = _tiny()
    with pytest.raises(BackendFailed, match=message):
        _prepare(model, example, tmp_path, "on", **options)
    assert not any(tmp_path.iterdir()), "nothing may be cached for a refused option"


class _DataDependent(nn.Module):
    def forward(self, x):  # noqa: ANN001, ANN201
        return x * 2 if x.sum() > 0 else x


class _Kthvalue(nn.Module):
    def forward(self, x):  # noqa: ANN001, ANN201
        return x.kthvalue(2, dim=1).values


@pytest.mark.parametrize(
    ("model", "stage"),
    [(_DataDependent(), "torch.export failed"), (_Kthvalue(), r"Relax importer \(from_exported_program\) failed")],
)
def test_a_model_that_cannot_be_imported_names_the_stage(model: Any, stage: str, tmp_path: Path) -> None:
    with pytest.raises(BackendFailed, match=stage) as raised:
        _prepare(model.eval(), torch.randn(1, 3, 8, 8), tmp_path)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "relax").exists() or not any((tmp_path / "relax").iterdir())


def test_refusals_say_why() -> None:
    backend = TVMBackend()
    assert backend.availability("cpu").ok
    assert backend.supports(Variant("off"), "fp32", "cpu").ok
    for device in ("cpu", "cuda"):
        fp16 = backend.supports(Variant("on"), "fp16", device)
        assert not fp16.ok and "float32" in fp16.reason
    bf16 = backend.supports(Variant("on"), "bf16", "cuda")
    assert not bf16.ok and "bf16" in bf16.reason
    assert set(backend.versions()) == {"tvm", "torch"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU; tests/gpu covers it")
def test_cuda_is_refused_with_a_reason_without_a_gpu() -> None:
    available = TVMBackend().availability("cuda")
    assert not available.ok and "CUDA" in available.reason


def test_the_cuda_target_comes_from_the_compute_capability_without_a_device_query() -> None:
    from backends.tvm_pipeline import cuda_target

    target = cuda_target((9, 0))
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90"
    assert target.host is not None and target.host.kind.name == "llvm"


def test_a_model_already_on_the_host_is_not_copied_for_the_import() -> None:
    from backends.tvm import _host_copy

    model, example = _tiny()
    assert _host_copy(model, example) == (model, example)


@pytest.mark.parametrize("activation, gate", [("ReLU", "Hardsigmoid"), ("SiLU", "Sigmoid")],
                         ids=["mobilenet_v3_small", "efficientnet_b0"])
def test_a_squeeze_and_excitation_block_compiles_for_cuda_with_every_function_scheduled(
        tmp_path: Path, activation: str, gate: str) -> None:
    """The CUDA pipeline on a machine without a GPU (codegen needs none; NVRTC turns the source into
    GPU binaries where one is present). At batch 8, dlight's Matmul rule raised on the block's second
    convolution fused with its gate and the product with the block's input, which stopped every build
    of the models with such blocks (backends/tvm.py). The block alone, as each model has it, raised
    as the whole model did, and builds in 3 s where mobilenet_v3_small takes 25 on 2 cores."""
    torchvision = pytest.importorskip("torchvision")
    from backends.tvm import TVMOptions, _build
    from backends.tvm_pipeline import cuda_target

    torch.manual_seed(0)
    block = torchvision.ops.misc.SqueezeExcitation(16, 8, activation=getattr(torch.nn, activation),
                                                   scale_activation=getattr(torch.nn, gate)).eval()
    _build(block, torch.randn(8, 16, 8, 8), cuda_target((9, 0)), "on", TVMOptions(opt_level=3), tmp_path)
    assert (tmp_path / "model.so").stat().st_size > 0
    kernels = json.loads((tmp_path / "fusion_report.json").read_text())["kernels"]
    # the pool, the first convolution with its activation, then the one Matmul raised on: the second
    # convolution through the gate to the product, one kernel
    assert [k["ops"][0] for k in kernels] == ["relax.mean", "relax.conv2d", "relax.conv2d"], kernels
    assert kernels[-1]["ops"][-1] == "relax.multiply", kernels


# --- tuning (MetaSchedule, backends/tvm_tuning.py) ---------------------------------------------

@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny model tuned at one candidate a task, fusion on and off, in a cache of its own."""
    cache = tmp_path_factory.mktemp("tvm-tuning")
    model, example = _tiny()
    return {"cache": cache, "model": model, "example": example,
            **{fusion: _tune(model, example, cache, fusion, tuning_trials=1) for fusion in ("on", "off")}}


def test_tuning_records_its_budget_tasks_trials_and_database(tuned: dict[str, Any]) -> None:
    for fusion in ("on", "off"):
        tuning = tuned[fusion]
        assert tuning.tuned and tuning.cache == "cold" and tuning.trials_per_task == 1
        assert 0 < tuning.tasks_tuned <= tuning.tasks and tuning.trials == tuning.tasks  # one candidate a task
        assert len(tuning.database_sha256) == 64 and "replay-trace" in tuning.tuner
    assert tuned["off"].tasks > tuned["on"].tasks  # fusion off: more, smaller kernels, each tuned as much


def test_a_tuning_in_which_no_candidate_ran_fails_and_caches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A noexec scratch folder: no candidate's library could be loaded, every trial failed, and the
    cell was valid with `tasks_tuned: 0`, its database of failures cached and reused as tuned."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder

    from backends import tvm_tuning

    @derived_object
    class Failing(PyBuilder):  # type: ignore[misc]
        def build(self, build_inputs: list[Any]) -> list[Any]:
            return [BuilderResult(None, "OSError: failed to map segment from shared object") for _ in build_inputs]

    monkeypatch.setattr(tvm_tuning, "_in_process_builder", lambda folder: Failing())
    model, example = _tiny()
    with pytest.raises(BackendFailed, match=r"tvm: none of the \d+ tuning candidates ran .*nothing was cached"):
        _tune(model, example, tmp_path / "cache", "on", tuning_trials=1)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name == "tuning.json"], "the failed tuning was cached"


def test_a_second_tuning_reuses_the_database_whatever_the_weights(tuned: dict[str, Any]) -> None:
    again = _tune(tuned["model"], tuned["example"], tuned["cache"], "on", tuning_trials=1)
    assert again.cache == "warm" and again.database_sha256 == tuned["on"].database_sha256
    other, _ = _tiny()
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.add_(1.0)
    assert _tune(other, tuned["example"], tuned["cache"], "on", tuning_trials=1).cache == "warm"
    shape = _tune(tuned["model"], torch.randn(1, 3, 16, 16), tuned["cache"], "on", tuning_trials=1)
    assert shape.cache == "cold"  # another batch: other kernels to schedule


def _runs_per_candidate(cache: Path, model: Any, example: Any, fusion: str, **options: Any) -> list[int]:
    """How many timed runs each candidate that built and ran has in the variant's tuning database."""
    from backends import tvm as tvm_backend
    from backends import tvm_tuning

    checked = tvm_backend._checked_options(TVMBackend.variant(fusion, options), "cpu")
    entry = tvm_backend._tuning_entry(model, example, tvm_backend._target("cpu", checked), "fp32", fusion, checked,
                                      cache)
    records = [json.loads(line) for line in (entry / tvm_tuning.DATABASE_FILES[1]).read_text().splitlines() if line]
    return [len(record[1][1]) for record in records if tvm_tuning._ran(record)]


def test_a_database_tuned_under_another_torch_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's export is the graph TVM imports and tunes: another torch may give other tasks, which
    a database tuned on the old ones would leave untuned, with the cell saying `cache: warm`."""
    from backends import tvm as tvm_backend

    model, example = _tiny()
    options = tvm_backend._checked_options(TVMBackend.variant("on", {"tuning_trials": 1}), "cpu")
    target = tvm_backend._target("cpu", options)
    before = tvm_backend._tuning_entry(model, example, target, "fp32", "on", options, Path("/cache")).name
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert tvm_backend._tuning_entry(model, example, target, "fp32", "on", options, Path("/cache")).name != before


def test_tuning_repeat_times_each_candidate_that_often_in_a_database_of_its_own(tuned: dict[str, Any]) -> None:
    """`tuning_repeat: 3`: MetaSchedule's runner times each candidate 3 times (their mean ranks it),
    into a database keyed apart from the default's one run each; the default keeps the key the
    databases had before the option, so they stay valid."""
    import tvm

    from backends import tvm as tvm_backend
    from backends import tvm_tuning
    from harness.artifact_cache import structure_fingerprint

    model, example, cache = tuned["model"], tuned["example"], tuned["cache"]
    assert set(_runs_per_candidate(cache, model, example, "on", tuning_trials=1)) == {1}
    repeated = _tune(model, example, cache, "on", tuning_trials=1, tuning_repeat=3)
    assert repeated.cache == "cold" and repeated.database_sha256 != tuned["on"].database_sha256
    assert set(_runs_per_candidate(cache, model, example, "on", tuning_trials=1, tuning_repeat=3)) == {3}
    options = tvm_backend._checked_options(TVMBackend.variant("on", {"tuning_trials": 1}), "cpu")
    target = tvm_backend._target("cpu", options)
    before = structure_fingerprint(model, example, tvm=tvm.__version__, torch=torch.__version__, target=str(target),
                                   dtype="fp32", fusion="on", opt_level=3, trials=1, layout=tvm_tuning.TUNING_LAYOUT)
    assert tvm_backend._tuning_entry(model, example, target, "fp32", "on", options, cache).name == before


class _DenseLayer(nn.Module):
    """densenet121's pattern: batch norm and ReLU, then a convolution (no bias) whose output only
    feeds a concatenation, which fusion on leaves alone as fusion off does."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.conv = nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, padding=1, bias=False)

    def forward(self, x: Any) -> Any:
        return torch.cat([x, self.conv(torch.relu(self.norm(x)))], 1)


def test_a_cpu_tuning_imports_the_cpu_intrinsics_alone_and_a_cuda_one_its_own() -> None:
    """MetaSchedule imports every target's tensor intrinsics before its first task: 7.5 CPU-s on the
    2-core VM, CUDA's 5.5 of them, in every tuned cell's worker. A CPU target's import registers the
    CPU's intrinsics alone, MetaSchedule's own import of the package then adds nothing, and a CUDA
    target's import in the same process still registers CUDA's."""
    import subprocess
    import sys

    code = """
import sys
from backends import tvm_tuning
from tvm.s_tir import TensorIntrin

def loaded():
    return sorted(name.rsplit(".", 1)[1] for name in sys.modules if name.startswith("tvm.s_tir.tensor_intrin."))

def registered(name):
    return TensorIntrin.get(name, allow_missing=True) is not None

tvm_tuning.import_tensor_intrinsics("llvm")
import tvm.s_tir.tensor_intrin  # as MetaSchedule's tuning context does
print(loaded(), registered("dot_16x4_vnni"), registered("mma_ldmatrix_f16_a"))
tvm_tuning.import_tensor_intrinsics("cuda")
print(loaded(), registered("dot_16x4_vnni"), registered("mma_ldmatrix_f16_a"), registered("dp4a_s8s8s32"))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    cpu, both = done.stdout.splitlines()[-2:]
    assert cpu == "['arm_cpu', 'dot_product_common', 'riscv_cpu', 'x86'] True False", cpu
    assert both == "['arm_cpu', 'cuda', 'dot_product_common', 'riscv_cpu', 'x86'] True True True", both


def test_a_function_draws_the_same_candidates_whatever_its_variant_and_place() -> None:
    """Each task is seeded from its function's structure (backends/tvm_tuning.py `task_seed`): the
    convolution both variants have gets one seed on both sides, and the order of the tasks changes
    no seed. Seeded by their order, the same convolution drew different candidates on each side."""
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from backends import tvm as tvm_backend
    from backends import tvm_tuning

    tvm_tuning.import_tensor_intrinsics("llvm")  # as tune() does: unpatched, the import takes most of a minute
    torch.manual_seed(0)
    model, example = _DenseLayer().eval(), torch.randn(1, 4, 8, 8)
    seeded: dict[str, list[tuple[Any, int]]] = {}
    for fusion in ("on", "off"):
        options = tvm_backend._checked_options(TVMBackend.variant(fusion, {"tuning_trials": 1}), "cpu")
        target = tvm_backend._target("cpu", options)
        tasks = ms.relax_integration.extract_tasks(tvm_backend._legalized(model, example, target, fusion, options), target)
        forward, _ = tvm_tuning._contexts(tasks)
        backward, _ = tvm_tuning._contexts(tasks[::-1])
        assert {c.task_name: c.rand_state for c in forward} == {c.task_name: c.rand_state for c in backward}, fusion
        seeded[fusion] = [(c.mod, c.rand_state) for c in forward]
        assert len({seed for _, seed in seeded[fusion]}) == len(forward), fusion  # here no two tasks share an anchor
    shared = [(on, off) for mod_on, on in seeded["on"] for mod_off, off in seeded["off"]
              if tvm_ffi.structural_equal(mod_on, mod_off)]
    assert shared, "the convolution should be a task of both variants"
    assert all(on == off for on, off in shared), shared
    assert len(seeded["off"]) > len(seeded["on"])  # fusion off still has more tasks: the batch norm's and ReLU's


def _drawn(context: Any, trials: int) -> list[str]:
    """The loop structure and the draws (backends/tvm_tuning.py `trace_label`) of the first `trials`
    candidates a tuning context draws, one string a candidate."""
    from backends import tvm_tuning

    return [tvm_tuning.trace_label(candidate.sch.trace) for candidate in tvm_tuning.drawn_candidates(context, trials)]


def test_a_fused_function_draws_the_candidates_of_its_anchor_alone() -> None:
    """With fusion on, a convolution with its batch norm and ReLU is one function; with fusion off
    the convolution is a function of its own. The fused one is seeded from its anchor, the
    convolution (backends/tvm_tuning.py `anchor_block`), so it draws the same tile sizes as the
    convolution alone, candidate by candidate, and its design spaces are in the same order, so it
    gets the same loop structure with them: the pair's schedules differ by the fused epilogue only.
    Seeded from their whole functions, the two drew different tile sizes; with the design spaces
    in MetaSchedule's order, the same tile sizes came with the write stage at another tile level."""
    from tvm.s_tir import meta_schedule as ms

    from backends import tvm as tvm_backend
    from backends import tvm_tuning

    tvm_tuning.import_tensor_intrinsics("llvm")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()).eval()
    example = torch.randn(1, 4, 8, 8)
    convolution: dict[str, Any] = {}
    for fusion in ("on", "off"):
        options = tvm_backend._checked_options(TVMBackend.variant(fusion, {"tuning_trials": 1}), "cpu")
        target = tvm_backend._target("cpu", options)
        tasks = ms.relax_integration.extract_tasks(tvm_backend._legalized(model, example, target, fusion, options), target)
        contexts, _ = tvm_tuning._contexts(tasks)
        convolution[fusion] = next(c for c in contexts if "conv2d" in c.task_name)
    assert convolution["on"].task_name.startswith("fused_conv2d") and convolution["off"].task_name == "conv2d"
    assert convolution["on"].rand_state == convolution["off"].rand_state
    fused, alone = _drawn(convolution["on"], 8), _drawn(convolution["off"], 8)
    assert len(fused) == 8 and "SamplePerfectTile" in fused[0]
    assert len({candidate.split(":")[0] for candidate in fused}) > 1, fused  # more than one structure drawn
    assert fused == alone


def test_prepare_compiles_with_the_database_and_stays_correct(tuned: dict[str, Any]) -> None:
    model, example = tuned["model"], tuned["example"]
    with torch.no_grad():
        reference = model(example)
    prepared = _prepare(model, example, tuned["cache"], "on", tuning_trials=1)
    try:
        assert prepared.rewrites()["schedules"].startswith(f"MetaSchedule database {tuned['on'].database_sha256[:16]}")
        assert compare(prepared(example), reference, "fp32")["ok"]
    finally:
        prepared.close()
    untuned = _prepare(model, example, tuned["cache"], "on")
    try:
        assert untuned.rewrites()["schedules"] == "untuned"
    finally:
        untuned.close()


def test_prepare_without_its_tuning_says_so(tuned: dict[str, Any]) -> None:
    with pytest.raises(BackendFailed, match="no intact tuning database.*Backend.tune runs before prepare"):
        _prepare(tuned["model"], tuned["example"], tuned["cache"], "on", tuning_trials=3)


def test_untuned_cells_say_why(tmp_path: Path) -> None:
    model, example = _tiny()
    none = _tune(model, example, tmp_path, "on", tuning_trials=0)
    assert not none.tuned and "tuning_trials is 0" in none.reason and none.cache == "none"
    gpu = _tune(model, example, tmp_path, "on", device="cuda")
    assert not gpu.tuned and "dlight" in gpu.reason
    with pytest.raises(BackendFailed, match="tuning_trials applies to cpu cells only"):
        _tune(model, example, tmp_path, "on", device="cuda", tuning_trials=2)
    with pytest.raises(BackendFailed, match="tuning_repeat applies to cpu cells only"):
        _tune(model, example, tmp_path, "on", device="cuda", tuning_repeat=3)
    with pytest.raises(BackendFailed, match="threads applies to cpu cells only"):  # a CUDA cell runs no CPU kernel
        _tune(model, example, tmp_path, "on", device="cuda", threads=2)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_parts_of_the_models_own_attention_call_in_one_kernel_are_one_operator(tmp_path: Path) -> None:
    # The importer decomposes the call (scale, bmm, softmax and its guard against a row of all -inf, bmm);
    # FuseOps puts the softmax with the guard's where: one operator, as Inductor's one library call, where
    # the report counted an element fusion of its six Relax ops, and the guard's own kernel another.
    prepared = _prepare(*attention_block(), tmp_path)
    try:
        report = prepared.fusion_report()
    finally:
        prepared.close()
    softmax = [k for k in report.kernels if "softmax" in k.kernel]
    guard = [k for k in report.kernels if "logical_not" in k.kernel and "softmax" not in k.kernel]
    assert [(k.ops, k.fusion_class) for k in softmax + guard] == [(("relax.softmax",), "single"), (("relax.equal",), "single")]
    # the linears' matmul and add stay two operators (TVM's unit for every other operator)
    assert sum(1 for k in report.kernels if k.ops == ("relax.matmul", "relax.add")) == 2
