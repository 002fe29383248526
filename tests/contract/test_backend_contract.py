"""The backend contract, checked on every registered backend: built-in ones and the example
out-of-tree plugin (installed by tests/conftest.py). A backend that cannot run here is skipped
with the reason it gives; nothing is faked.

The model is small (conv+bn+relu, a residual add, pooling and a linear layer), so every backend
compiles it in seconds, yet it has the patterns whose fusion the harness reports. Each backend's
two variants are compiled once for the module (`prepared`) and closed at its end: the checks of
one compile read it, none changes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import registry
from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import CLASSES, FusionReport
from harness.measure.correctness import compare
from tests.backend_calls import tuned_and_prepared

torch = pytest.importorskip("torch")
nn = torch.nn

NAMES = registry.names()
CACHE_STATES = {"cold", "warm", "none", "unknown"}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(8, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _model_and_input() -> tuple[object, object]:
    torch.manual_seed(0)
    model = Block().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics, so folding them matters
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return model, torch.randn(2, 3, 16, 16)


def _backend(name: str) -> Backend:
    backend = registry.load(name)()
    available = backend.availability("cpu")
    # a plugin's stub that returns nothing fails here, saying what to return, not with an AttributeError
    assert isinstance(available, Availability), (
        f"{name}: availability('cpu') returned {type(available).__name__}; it returns an Availability (harness/contract.py)")
    if not available.ok:
        pytest.skip(f"{name} cannot run on this machine's CPU: {available.reason}")
    return backend


def _prepare(backend: Backend, fusion: str, tmp_path: Path, **options: object) -> Prepared:
    variant = backend.variant(fusion, options)
    support = backend.supports(variant, "fp32", "cpu")
    if not support.ok:
        pytest.skip(f"{backend.name} fusion={fusion}: {support.reason}")
    model, example = _model_and_input()
    workdir = tmp_path / f"work-{fusion}"
    workdir.mkdir(exist_ok=True)
    return tuned_and_prepared(backend, model, example, variant=variant, workdir=workdir, cache_dir=tmp_path / "cache")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], Prepared]]:
    """`prepared(name, fusion)`: the backend's variant of the model, compiled on first use in this
    module (a skip or failure is not kept: the next test asks again) and closed at its end."""
    made: dict[tuple[str, str], Prepared] = {}

    def get(name: str, fusion: str) -> Prepared:
        if (name, fusion) not in made:
            made[name, fusion] = _prepare(_backend(name), fusion, tmp_path_factory.mktemp(f"{name}-{fusion}"))
        return made[name, fusion]

    yield get
    for variant in made.values():
        variant.close()


@pytest.mark.parametrize("name", NAMES)
def test_registration_and_static_answers(name: str) -> None:
    cls = registry.load(name)
    assert cls.name == name
    # harness/contract.py asks for lower case: a scenario file, --only and the cell ids write it as registered
    assert name == name.lower(), f"{name}: a backend's registered name is lower case (harness/contract.py)"
    backend = cls()
    for device in ("cpu", "cuda"):
        available = backend.availability(device)
        assert isinstance(available, Availability), (
            f"{name}: availability({device!r}) returned {type(available).__name__}; it returns an Availability "
            "(harness/contract.py)")
        if not available.ok:
            assert len(available.reason) > 10, f"{name} on {device}: a refusal needs a reason a user can act on"
    if backend.availability("cpu").ok:
        versions = backend.versions()
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items())
        if backend.computes_model:
            assert versions, f"{name} must report the versions of the libraries it runs"
    for dtype in ("fp32", "fp16", "bf16"):
        support = backend.supports(Variant("on"), dtype, "cpu")
        assert isinstance(support, Availability)
        assert support.ok or len(support.reason) > 10, f"{name} {dtype}: a refusal needs a reason a user can act on"


@pytest.mark.slow
@pytest.mark.parametrize("fusion", ["on", "off"])
@pytest.mark.parametrize("name", NAMES)
def test_prepare_call_report(name: str, fusion: str, prepared: Callable[[str, str], Prepared]) -> None:
    backend = _backend(name)
    variant = prepared(name, fusion)
    assert isinstance(variant, Prepared)
    assert variant.prepare_cache in CACHE_STATES
    model, example = _model_and_input()
    with torch.no_grad():
        reference = model(example)
    output = variant(example)
    variant.synchronize()
    if backend.computes_model:
        assert tuple(output.shape) == tuple(reference.shape)
        verdict = compare(output, reference, "fp32")
        assert verdict["ok"], f"{name} fusion={fusion}: {verdict['reason']}"

    report = variant.fusion_report()
    assert isinstance(report, FusionReport)
    as_json = report.to_json()
    assert as_json["kernel_count"] == len(report.kernels)
    assert set(as_json["kernels_by_class"]) == set(CLASSES)
    for kernel in report.kernels:
        assert isinstance(kernel.kernel, str) and kernel.kernel
        assert all(isinstance(op, str) and op for op in kernel.ops)
    if backend.computes_model:
        assert report.kernels, f"{name} reported no kernels for a model that computes"

    dispatches = variant.cpu_dispatches(example)
    if dispatches is not None:
        assert isinstance(dispatches, int) and dispatches >= 0
        if backend.computes_model:
            assert dispatches > 0
        assert variant.dispatch_definition, "a dispatch count needs its definition"
    times = variant.cpu_kernel_times(example)
    if times is not None:  # every kernel inside the one profiled call
        assert variant.kernel_time_definition, "kernel times need their definition"
        assert all(isinstance(kernel, str) and kernel and ns >= 0 for kernel, ns in times.calls), times
        assert sum(ns for _, ns in times.calls) <= times.wall_ns
        if backend.computes_model:
            assert times.calls
    kinds = variant.cuda_kernel_kinds()  # on a GPU, by the names CUPTI gives the kernels
    assert all(isinstance(kernel, str) and kernel and isinstance(kind, str) and kind for kernel, kind in kinds.items()), kinds
    figures = variant.profile_figures(example)  # units in the names, recorded as JSON
    assert isinstance(figures, dict) and all(isinstance(key, str) and key for key in figures), figures
    json.dumps(figures)

    # Recorded in the cell as they are: JSON, and an fp32 cell's own library never runs TF32.
    rewrites, math = variant.rewrites(), variant.math_mode()
    assert isinstance(rewrites, dict) and isinstance(math, dict)
    json.dumps({"rewrites": rewrites, "math_mode": math})
    assert not math.get("tf32"), f"{name} fusion={fusion}: an fp32 cell's library must run IEEE fp32"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_fusion_off_dispatches_more_where_fusion_on_fused(name: str, prepared: Callable[[str, str], Prepared]) -> None:
    backend = _backend(name)
    if not backend.computes_model:
        pytest.skip(f"{name} computes no model")
    counts, fusions = {}, {}
    _, example = _model_and_input()
    for fusion in ("on", "off"):
        variant = prepared(name, fusion)
        counts[fusion] = variant.cpu_dispatches(example)
        fusions[fusion] = variant.fusion_report().fusions
    assert fusions["off"] == 0, f"{name} fusion=off still reports {fusions['off']} fused kernel(s)"
    if counts["on"] is None:
        pytest.skip(f"{name} does not count CPU dispatches")
    assert counts["off"] is not None
    if fusions["on"]:  # each fused kernel is one dispatch where fusion off runs two or more
        assert counts["off"] > counts["on"], (name, counts, fusions)
    else:
        assert counts["off"] >= counts["on"], (name, counts)


@pytest.mark.parametrize("name", NAMES)
def test_unknown_option_is_a_clear_failure(name: str, tmp_path: Path) -> None:
    backend = _backend(name)
    with pytest.raises(BackendFailed, match="surely_not_an_option"):
        _prepare(backend, "on", tmp_path, surely_not_an_option=1)
