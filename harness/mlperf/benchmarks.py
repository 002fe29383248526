"""Which MLPerf Inference benchmark a zoo model stands for, and that benchmark's fixed facts.

Only image classification has one here: MLPerf's `resnet` benchmark (ResNet-50 v1.5 on ImageNet
2012 validation, top-1). Any torchvision classifier may stand for it in the open division (a
submission's `model_mapping.json` maps the model to `resnet`); the closed division needs the
reference model itself, with pretrained weights, meeting the accuracy target.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.models.catalog import CLASSIFICATION_MODELS

# mlperf.conf's minimum duration of a performance run, every benchmark and scenario.
MLPERF_MIN_DURATION_S = 600.0
# mlperf.conf's samples per MultiStream query, every benchmark.
MLPERF_SAMPLES_PER_QUERY = 8
# Images in ImageNet 2012's validation set: an accuracy run of MLPerf's resnet scores all of them.
IMAGENET_VALIDATION_IMAGES = 50_000


@dataclass(frozen=True)
class Benchmark:
    name: str  # as the submission checker names it (results/<system>/<name>/...)
    conf_model: str  # the model's key in LoadGen's mlperf.conf and a user.conf
    reference_model: str  # the zoo model that is the reference implementation
    reference_top1_percent: float  # the reference model's accuracy (fp32)
    target_fraction: float  # closed division: at least this fraction of the reference accuracy
    performance_sample_count: int  # mlperf.conf's performance sample count for the benchmark
    # Edge systems must submit these scenarios in the closed division.
    edge_scenarios: tuple[str, ...] = ("SingleStream", "MultiStream", "Offline")

    @property
    def target_top1_percent(self) -> float:
        return self.reference_top1_percent * self.target_fraction


RESNET = Benchmark(
    name="resnet", conf_model="resnet50", reference_model="resnet50", reference_top1_percent=76.46,
    target_fraction=0.99, performance_sample_count=1024,
)


def benchmark_for(model: str) -> Benchmark | None:
    """The MLPerf benchmark `model` can stand for, or None."""
    return RESNET if model in CLASSIFICATION_MODELS else None
