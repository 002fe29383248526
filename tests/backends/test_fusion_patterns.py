"""The conv+bn+relu pattern on ONNX Runtime (CPU): fusion off runs more compute kernels than
fusion on, the fusion report finds conv+bn+relu in one kernel, and both variants match eager.
(resnet18 is checked the same way in each backend's own test file.)

The other compilers' are checked in their own test files, on models that hold the pattern, where
this module compiled it again (about 11 CPU-s for Inductor and 5 for TVM, fusion on and off) and
checked nothing those do not:
- Inductor on tests/backends/test_inductor.py's ResNet pair, whose fusion-on report puts each of its
  five convolutions followed by a relu in one kernel with its batch norm and relu;
- TVM on tests/backends/test_tvm.py's tiny model (a convolution, batch norm and relu, untuned as
  here), whose fusion-on report has one convolution kernel, the batch norm's arithmetic and the
  relu in it, and fusion off one operator a kernel.
A tuned variant's output against eager is the contract tests' (tests/contract/test_backend_contract.py)."""

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
BACKENDS = ["onnxruntime"]
# What each backend calls batch norm once it fused it: ONNX Runtime keeps its node name.
BATCH_NORM = {"batchnormalization"}


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
        out[fusion] = tuned_and_prepared(backend, model, example, variant=backend.variant(fusion),
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
