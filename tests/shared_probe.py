"""One system probe for a module's in-process runs (harness.run.runner.run) that ask it the same.

The probe is a process of its own that imports torch and each asked backend's libraries: about
4.5 CPU-s for the null backend, and 5 s more where TVM and ONNX Runtime are asked
(docs/results/cpu-2core-amd-2026-12-04-suite-processes.md). Where what a module's tests
check is how a run handles the probe's answer (a time budget, a resume's refusals), not the probe,
its first run of a request probes for real and its later runs of that request get a copy of that
answer, as the same machine's. The probe's own process is checked by every CLI run of
tests/integration and by tests/unit/test_probe_process.py."""

from __future__ import annotations

from pathlib import Path

from harness.run import probe
from harness.run.probe_answer import ProbeAnswer


class SharedProbe:
    """A run_probe for harness.run.runner that probes once for each (device, backends, with_system)
    asked; the cache folder is left out of the key: it is where the noise probe keeps its compiled
    loop, no part of the answer."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, tuple[str, ...], bool], ProbeAnswer] = {}

    def __call__(self, device: str, backends: list[str], *, with_system: bool = True,
                 cache_dir: Path | None = None) -> ProbeAnswer:
        key = (device, tuple(backends), with_system)
        if key not in self.answers:
            self.answers[key] = probe.run_probe(device, backends, with_system=with_system, cache_dir=cache_dir)
        return self.answers[key].model_copy(deep=True)  # a run may change what it was given
