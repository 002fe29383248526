"""The conv+bn+relu pattern on ONNX Runtime and TVM (CPU): fusion off runs more compute kernels
than fusion on, the fusion report finds conv+bn+relu in one kernel where the backend fuses it, and
both variants match eager. (resnet18 is checked the same way in each backend's own test file.)
Inductor's is checked on tests/backends/test_inductor.py's ResNet pair, whose fusion-on report puts
each of its five convolutions followed by a relu in one kernel with its batch norm and relu: a
compile of the pattern here, fusion on and off, cost about 11 CPU-s more and checked nothing that
pair does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import registry
from harness.fusion import op_name
from harness.fusion.mapping import mapping_class
from harness.measure.correctness import compare
from harness.models import zoo
from tests.backend_calls import tuned_and_prepared

torch = pytest.importorskip("torch")
BACKENDS = ["onnxruntime", "tvm"]
# What each backend calls batch norm once it fused it: ONNX Runtime keeps its node name, TVM
# decomposes it into its arithmetic before fusing.
BATCH_NORM = {"batchnormalization", "subtract"}
#: Each backend's options here. TVM's loops are left untuned: which operators a kernel holds is decided
#: before its schedule is searched, and a tuned variant's output against eager is the contract tests'
#: (tests/contract/test_backend_contract.py, at the default budget, fusion on and off); its search here
#: took about half the TVM fixture's CPU.
OPTIONS: dict[str, dict[str, Any]] = {"tvm": {"tuning_trials": 0}}


def _compute_kernels(report: Any) -> list[Any]:
    """Kernels that compute something: not layout reorders (ONNX Runtime's NCHWc ReorderInput/Output)."""
    return [k for k in report.kernels if any(mapping_class(op) not in ("shuffle", "reorganize") for op in k.ops)]


@pytest.fixture(scope="module", params=BACKENDS)
def variants(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    backend = registry.load(request.param)()
    if not backend.availability("cpu").ok:
        pytest.skip(f"{request.param}: {backend.availability('cpu').reason}")
    model = zoo.build_model("pattern_conv_bn_relu", pretrained=False, seed=0, device="cpu", dtype="fp32")
    example = torch.cat(zoo.make_samples(2, seed=0, model="pattern_conv_bn_relu",
                                         input_size=32, device="cpu", dtype="fp32"))
    with torch.no_grad():
        reference = model(example)
    out: dict[str, Any] = {"name": request.param, "example": example, "reference": reference}
    for fusion in ("on", "off"):
        work = Path(tmp_path_factory.mktemp(f"{request.param}-{fusion}"))
        out[fusion] = tuned_and_prepared(backend, model, example, variant=backend.variant(fusion, OPTIONS.get(request.param)),
                                         workdir=work, cache_dir=work)
    yield out
    for fusion in ("on", "off"):
        out[fusion].close()


def test_fusion_off_runs_more_compute_kernels(variants: dict[str, Any]) -> None:
    on, off, x = variants["on"], variants["off"], variants["example"]
    assert len(_compute_kernels(off.fusion_report())) > len(_compute_kernels(on.fusion_report())) >= 1
    assert off.cpu_dispatches(x) >= on.cpu_dispatches(x)
    assert off.fusion_report().fusions == 0


def test_fusion_on_puts_conv_bn_relu_in_one_kernel(variants: dict[str, Any]) -> None:
    report = variants["on"].fusion_report()
    groups = [{op_name(op).lower() for op in k.ops} for k in report.kernels]
    fused = [g for g in groups if any("conv" in op for op in g) and "relu" in g and g & BATCH_NORM]
    assert len(fused) == 1, (variants["name"], report.kernels)


@pytest.mark.parametrize("fusion", ["on", "off"])
def test_both_variants_match_eager(variants: dict[str, Any], fusion: str) -> None:
    verdict = compare(variants[fusion](variants["example"]), variants["reference"], "fp32")
    assert verdict["ok"], (variants["name"], fusion, verdict["reason"])
