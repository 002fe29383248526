"""One cell, measured in-process with fake backends: failures name their phase, wrong outputs make
the cell invalid, a good backend produces every metric. LoadGen runs for real, briefly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.eager import EagerBackend, EagerPrepared
from harness import registry
from harness.bundle.cell_record import Metrics
from harness.contract import Availability, Backend, Prepared, Variant
from harness.fusion import FusionReport
from harness.measure import cell_model, trust
from harness.measure.phase_clock import PhaseClock
from harness.measure.protocol import PHASES, Phase, WorkerAnswer, WorkerRequest, partial_answer_path
from harness.measure.worker import run_cell
from harness.scenario import checked_rows
from harness.scenario.cell_config import CellConfig
from tests.cell_configs import cell_config


class _Wrapped(Prepared):
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, batch: Any) -> Any:
        return self.fn(batch)

    def synchronize(self) -> None:
        pass

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(), source="fake")


class RaisingBackend(Backend):
    name = "raising"

    def availability(self, device: str) -> Availability:
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        return {"fake": "1"}

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        raise RuntimeError("compiler exploded")


class WrongBackend(RaisingBackend):
    name = "wrong"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        return _Wrapped(lambda batch: model(batch) * 1.5)


class FirstCallsOnlyBackend(RaisingBackend):
    """Right on its first call, the one the first check compares; fast and wrong from then on."""

    name = "first-calls-only"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        calls = []

        def call(batch: Any) -> Any:
            calls.append(1)
            return model(batch) if len(calls) == 1 else model(batch) * 0

        return _Wrapped(call)


class ExampleOnlyBackend(RaisingBackend):
    """A cache keyed on the input's shape: the example's output for every batch of its size."""

    name = "example-only"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        answer = model(example)
        return _Wrapped(lambda batch: answer)


class StorageStartBackend(RaisingBackend):
    """A zero-copy bug: reads its input from the storage's start, not from the tensor's offset. Right
    on the example and the timing's batches (each a tensor of its own), wrong on LoadGen's (views of
    rows of one stack)."""

    name = "storage-start"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        import torch

        return _Wrapped(lambda batch: model(torch.empty(0, dtype=batch.dtype).set_(
            batch.untyped_storage(), 0, batch.shape, batch.stride())))


def cell_for(backend: str, scenario: str = "SingleStream") -> CellConfig:
    timing = {"warmup_iters": 1, "min_iters": 5, "min_time_s": 0.1, "max_warmup_s": 0.3, "repetitions": 2}
    config = cell_config(scenario, 1 if scenario == "SingleStream" else 2, min_duration_s=0.3, min_query_count=64,
                         timing=timing, passes={"memory_iters": 2, "profile_iters": 1})
    return config.model_copy(update={"backend": backend})


class UnpreparedBackend(RaisingBackend):
    name = "unprepared"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        return model  # type: ignore[no-any-return]  # the model itself, not a Prepared: a plugin's slip


class _NoMathMode(_Wrapped):
    def math_mode(self) -> Any:
        return None  # the guide's optional stub, copied as `...`


class NoMathModeBackend(RaisingBackend):
    name = "no-math-mode"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        return _NoMathMode(model)


class _LosesItsSession(_Wrapped):
    def __call__(self, batch: Any) -> Any:
        raise RuntimeError("the runtime lost its session")

    def close(self) -> None:
        self.session.release()  # type: ignore[attr-defined]  # never made: the call failed first


class LosesItsSessionBackend(RaisingBackend):
    name = "loses-its-session"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        return _LosesItsSession(model)


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = {"raising": RaisingBackend, "wrong": WrongBackend, "eager": EagerBackend, "unprepared": UnpreparedBackend,
             "no-math-mode": NoMathModeBackend, "first-calls-only": FirstCallsOnlyBackend,
             "example-only": ExampleOnlyBackend, "storage-start": StorageStartBackend,
             "loses-its-session": LosesItsSessionBackend}
    monkeypatch.setattr(registry, "load", lambda name: fakes[name])


def run(tmp_path: Path, cell: CellConfig, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    request = WorkerRequest(cell=cell, artifact_dir=str(tmp_path / "artifacts"), phase_file=str(tmp_path / "phase"))
    return run_cell(request).record()


def test_exception_in_prepare_fails_the_cell_naming_the_phase(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = run(tmp_path, cell_for("raising"), monkeypatch)
    assert answer["status"] == "failed"
    # and where the backend raised it (its traceback is in the worker's log)
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if 'raise RuntimeError("compiler exploded")' in text)
    assert answer["reasons"] == [f"prepare: RuntimeError: compiler exploded (at {__file__}:{line})"]
    assert {"import", "build", "reference", "prepare"} <= set(answer["phases_s"])
    assert answer["environment"]["backend_versions"] == {"fake": "1"}


def test_a_prepare_that_returns_no_prepared_fails_the_cell_naming_the_method(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It failed as "prepare: AttributeError: 'ResNet' object has no attribute 'toolchain_s'"."""
    answer = run(tmp_path, cell_for("unprepared"), monkeypatch)
    assert answer["status"] == "failed"
    assert answer["reasons"] == ["prepare: UnpreparedBackend.prepare() returned ResNet; it returns Prepared (harness/contract.py)"]


def test_a_close_that_raises_after_a_failure_leaves_the_failure_the_cells_reason(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The close's AttributeError took the place of the first call's error as the cell's reason."""
    answer = run(tmp_path, cell_for("loses-its-session"), monkeypatch)
    assert answer["status"] == "failed"
    assert answer["reasons"][0].startswith("first_call: RuntimeError: the runtime lost its session"), answer["reasons"]
    assert "has no attribute 'session'" in capsys.readouterr().err  # the close's traceback, for the worker's log


def test_a_model_whose_output_is_not_one_row_a_sample_fails_every_cell_at_its_reference(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model returning its batch on dim 1 ran its eager cell valid, checked against itself; the
    check is made at eager's reference, before the backend prepares anything."""
    import torch

    from harness.models import zoo

    class BatchOnDim1(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.transpose(0, 1)

    monkeypatch.setattr(zoo, "build_model", lambda *args, **kwargs: BatchOnDim1())
    answer = run(tmp_path, cell_for("eager"), monkeypatch)
    assert answer["status"] == "failed"
    assert answer["reasons"] == [
        "reference: model 'resnet18' returned [3, 1, 32, 32] for a batch of 1, its input [1, 3, 32, 32]: the harness stacks "
        "the samples on dim 0 and reads row i of the output as sample i's, so the output's dim 0 must be the batch "
        "(docs/adding_a_model.md)"], answer["reasons"]
    assert "prepare" not in answer["phases_s"]


@pytest.mark.slow
def test_a_math_mode_that_answers_none_fails_the_cell_naming_the_method(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It failed as "TypeError: 'NoneType' object is not iterable", naming nothing."""
    answer = run(tmp_path, cell_for("no-math-mode"), monkeypatch)
    assert answer["status"] == "failed"
    # asked after the profile pass ended, not in it ("profile: ..." sent the author to the profiler)
    assert answer["reasons"][0] == "after profile: _NoMathMode.math_mode() returned NoneType; it returns dict (harness/contract.py)"


@pytest.mark.slow
def test_wrong_outputs_make_the_cell_invalid(tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = run(tmp_path, cell_for("wrong"), monkeypatch)
    assert answer["status"] == "invalid"
    assert answer["reasons"][0].startswith("correctness: output differs from eager")
    assert answer["metrics"]["loadgen"]["validity"] == "VALID", "the speed is still measured, but not trusted"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["first-calls-only", "example-only", "storage-start"])
def test_a_timed_callable_right_only_on_the_checked_call_makes_the_cell_invalid(
    backend: str, tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each was valid, with a max abs error of 0: the one check compared the first call on the
    example, and the calls that were timed (LoadGen's, for storage-start) computed something else."""
    answer = run(tmp_path, cell_for(backend, "Offline"), monkeypatch)
    assert answer["status"] == "invalid"
    assert answer["reasons"][0].startswith("correctness after timing: output differs from eager"), answer["reasons"]
    correctness = answer["metrics"]["correctness"]
    assert correctness["ok"] and correctness["max_abs_error"] == 0.0 and correctness["samples"] == [0, 1]
    assert correctness["after_timing"]["samples"] == [2, 3] and not correctness["after_timing"]["ok"]
    assert "correctness_after_timing" in answer["phases_s"]


def test_the_later_check_takes_other_samples_than_the_examples_where_there_are_any() -> None:
    assert checked_rows.example_rows(8, 2) == [0, 1] and checked_rows.later_rows(8, 2) == [2, 3]  # the timing's 2nd batch
    assert checked_rows.later_rows(3, 2) == [2, 0]  # wrapping round, as the timing's batches do
    assert checked_rows.later_rows(2, 2) == [1, 0] and checked_rows.later_rows(1, 2) == [0, 0]
    assert checked_rows.example_rows(1, 2) == [0, 0]
    import torch

    batch = cell_model.later_batch([torch.full((1, 2), float(i)) for i in range(4)], [2, 3])
    assert batch.tolist() == [[2.0, 2.0], [3.0, 3.0]] and batch.storage_offset() == 2  # a view, as LoadGen's are


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["SingleStream", "Offline"])
def test_eager_cell_has_every_metric(
    scenario: str, tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = run(tmp_path, cell_for("eager", scenario), monkeypatch)
    assert answer["status"] == "valid", answer["reasons"]
    m = answer["metrics"]
    assert m["correctness"]["ok"] and m["correctness"]["max_abs_error"] == 0.0
    after = m["correctness"]["after_timing"]
    assert after["ok"] and after["max_abs_error"] == 0.0 and after["samples"] != m["correctness"]["samples"]
    timing = m["device_time"]
    assert len(timing["samples_ns"]) == timing["summary"]["n"] >= 5 and len(timing["warmup_samples_ns"]) >= 2
    assert all(s > 0 for s in timing["samples_ns"])
    # half the timed calls before LoadGen, half after; what ran beside each is read around it
    assert [r["when"] for r in timing["repetitions"]] == ["before loadgen", "after loadgen"]
    assert all(r["beside"]["cpu"]["wall_s"] > 0 for r in timing["repetitions"])
    assert timing["warmup"]["calls"] == len(timing["warmup_samples_ns"])
    agreement = m["latency_agreement"]
    statistic = "mean" if scenario == "Offline" else "median"
    assert agreement["device_ns_per_batch"] == timing["summary"][f"{statistic}_ns"] and agreement["gap"] is not None
    assert agreement["gap"] == pytest.approx(agreement["loadgen_ns_per_batch"] / agreement["device_ns_per_batch"] - 1)
    assert agreement["device_statistic"] == statistic and agreement["limit"] > 0
    assert agreement["within"] == (abs(agreement["gap"]) <= agreement["limit"])  # one batch in flight on a CPU
    assert bool(agreement["why"]) == (not agreement["within"])  # a gap beyond the limit is said with its why
    assert m["math_mode"]["effective"] == "ieee" and m["math_mode"]["problems"] == []
    assert m["rewrites"] == {}
    assert m["first_call_ratio"] == pytest.approx(m["first_call_s"] * 1e9 / timing["summary"]["median_ns"], rel=1e-9)
    said = trust.warnings(Metrics.model_validate(m))  # what the figures say of themselves comes first
    assert answer["warnings"][:len(said)] == said and all(answer["warnings"])
    assert answer["environment"]["cpu_affinity"] and "torch_interop_threads" in answer["environment"]
    lg = m["loadgen"]
    assert lg["validity"] == "VALID" and lg["metric"]["value"] > 0
    assert (tmp_path / "artifacts" / lg["log_dir"] / "mlperf_log_summary.txt").exists()
    memory = m["memory"]
    assert memory["peak_rss_bytes"] >= memory["rss_baseline_bytes"] > 0
    assert memory["peak_rss_bytes"] >= memory["inference_peak_rss_bytes"] > 0
    assert m["kernels"]["kernels_per_inference"] > 20  # resnet18: convs, bns, relus, adds, pool, linear
    assert m["fusion_report"]["fusion_count"] == 0
    assert m["first_call_s"] > 0 and m["prepare_s"] > 0 and m["prepare_cache"] == "none"
    assert timing["host_samples_ns"] is None, "on CPU the samples are host time already"
    if scenario == "Offline":
        assert lg["results"]["result_samples_per_second"] == lg["metric"]["value"]


@pytest.mark.slow
def test_an_accuracy_run_without_labelled_images_fails_the_cell_with_the_reason(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request the scenario schema would refuse (accuracy on synthetic inputs) fails its cell in
    one line naming the phase, not with an assert (which `python -O` would skip)."""
    cell = cell_for("eager")
    cell = cell.model_copy(update={"loadgen": cell.loadgen.model_copy(update={"accuracy": True})})
    answer = run(tmp_path, cell, monkeypatch)
    assert answer["status"] == "failed"
    assert len(answer["reasons"]) == 1
    assert answer["reasons"][0].startswith("accuracy: loadgen.accuracy needs labelled images"), answer["reasons"]
    assert "loadgen" in answer["metrics"], "what was measured before the accuracy run stays in the answer"


class _RecompilesWhenTimed(EagerPrepared):
    """Eager's model, beside a step compiled through torch.compile (Dynamo's `eager` backend: no code
    generated) given a shape first met once the warm-up has ended (`warmed`): one frame compiled again
    in the timed calls."""

    warmed = [False]

    def __init__(self, model: Any, device: str, example: Any) -> None:
        import torch

        super().__init__(model, device, example)
        self.step = torch.compile(lambda t: t * 2, backend="eager", dynamic=False)

    def __call__(self, batch: Any) -> Any:
        import torch

        self.step(torch.ones(3 if self.warmed[0] else 2))
        return super().__call__(batch)


class RecompilesWhenTimedBackend(EagerBackend):
    name = "recompiles-when-timed"

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        return _RecompilesWhenTimed(model, device, example)


@pytest.mark.slow
def test_a_further_round_times_the_steady_state_and_measures_nothing_else_but_its_recompiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only round 1's timed calls were watched for Dynamo's recompiles: a further round that compiled a
    frame again in its timed calls recorded none and said nothing (harness/run/rounds.py keeps both)."""
    import torch

    from harness.measure import timing

    warm_up = timing.DeviceTiming.warm_up

    def warmed(self: Any) -> Any:
        done = warm_up(self)
        _RecompilesWhenTimed.warmed[0] = True
        return done

    monkeypatch.setattr(timing.DeviceTiming, "warm_up", warmed)
    monkeypatch.setattr(_RecompilesWhenTimed, "warmed", [False])
    monkeypatch.setattr(registry, "load", lambda name: RecompilesWhenTimedBackend)
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    request = WorkerRequest(cell=cell_for(RecompilesWhenTimedBackend.name), artifact_dir=str(tmp_path / "round-2"),
                            phase_file=str(tmp_path / "phase"), timing_round=2)
    answer = run_cell(request).record()
    torch._dynamo.reset()
    assert answer["status"] == "valid", answer["reasons"]
    m = answer["metrics"]
    timing = m["device_time"]
    assert [r["when"] for r in timing["repetitions"]] == ["round 2", "round 2"]  # every repetition, none around LoadGen
    assert len(timing["samples_ns"]) == timing["summary"]["n"] >= 5 and timing["summary"]["median_ns"] > 0
    assert m["prepare_cache"] == "none" and m["first_call_s"] > 0
    for skipped in ("correctness", "loadgen", "memory", "kernels", "roofline", "first_call_ratio"):
        assert m.get(skipped) is None, skipped
    assert set(answer["phases_s"]) == {"import", "build", "reference", "tune", "prepare", "first_call", "timing",
                                       "correctness_after_timing"}
    assert m["dynamo"]["recompiles_timed"] == 1
    assert [w for w in answer["warnings"] if w.startswith("recompiled: Dynamo compiled 1 frame again during the timed calls")]


def test_a_further_round_whose_timed_callable_is_wrong_gives_no_time(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round checked no output, as round 1 had: but its prepare runs again, and a backend's warm
    cache may hold another artefact than the one round 1 checked (a plugin whose warm prepare
    answered zeros was timed 3,000 times faster in rounds 2 and 3, both valid)."""
    monkeypatch.chdir(tmp_path)
    wrong = WorkerRequest(cell=cell_for("wrong"), artifact_dir=str(tmp_path / "wrong"), phase_file=str(tmp_path / "p2"),
                          timing_round=2)
    answer = run_cell(wrong)
    assert answer.status == "invalid"  # harness/run/rounds.py records such a round failed, with this reason
    assert len(answer.reasons) == 1, answer.reasons
    assert answer.reasons[0].startswith("correctness after timing (samples [1]): output differs from eager")


class ToolchainBackend(RaisingBackend):
    """Its compile takes 0.3 s, of which it reports `reported` as its one-time work for the machine."""

    name = "toolchain"
    reported = 0.2

    def prepare(self, model, example, *, device, dtype, variant: Variant, workdir: Path, cache_dir: Path) -> Prepared:
        import time

        time.sleep(0.3)
        prepared = _Wrapped(model)
        prepared.toolchain_s = self.reported
        return prepared


def test_the_toolchains_one_time_work_is_moved_out_of_the_compile_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `prepare` reports as the machine's one-time work is its own phase, not `prepare_s`; a
    report longer than the compile itself fails the cell, naming it."""
    monkeypatch.setattr(registry, "load", lambda name: ToolchainBackend)
    monkeypatch.chdir(tmp_path)

    def answer(reported: float, folder: str) -> dict[str, Any]:
        monkeypatch.setattr(ToolchainBackend, "reported", reported)
        request = WorkerRequest(cell=cell_for("toolchain"), artifact_dir=str(tmp_path / folder),
                                phase_file=str(tmp_path / f"{folder}.phase"), timing_round=2)
        return run_cell(request).record()

    moved = answer(0.2, "moved")
    assert moved["status"] == "valid", moved["reasons"]
    phases = moved["phases_s"]
    assert phases["toolchain"] == 0.2
    assert moved["metrics"]["prepare_s"] == phases["prepare"] and 0.1 <= phases["prepare"] < 0.3
    none = answer(0.0, "none")
    assert "toolchain" not in none["phases_s"] and none["metrics"]["prepare_s"] >= 0.3
    # a NaN or a str failed it as "nan s of prepare reported as toolchain" or a TypeError, naming no attribute
    for reported, said in ((5.0, "5.0: the seconds of prepare() spent"), (float("nan"), "nan: the seconds"),
                           ("0.1", "str '0.1'; it is a int or float")):
        wrong = answer(reported, f"wrong-{reported}")  # type: ignore[arg-type]
        assert wrong["status"] == "failed"
        assert wrong["reasons"][0].startswith(f"after prepare: _Wrapped.toolchain_s is {said}"), wrong["reasons"]


def test_a_worker_killed_in_any_phase_keeps_every_figure_worked_out_before_it(
    tmp_path: Path, fake_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the parent reads of a worker killed in each phase (`checkpoint`'s file, as the phase
    runs) holds every figure set before the phase began, also those worked out between phases: a
    cell stopped by its memory limit in the memory pass lost its finished device timing and
    roofline, one stopped in its first call its compile time, one stopped in memory_traffic its
    math mode."""
    monkeypatch.chdir(tmp_path)
    answer_file = tmp_path / "answer.json"
    kept: dict[str, WorkerAnswer] = {}
    timed = PhaseClock.phase

    @contextmanager
    def phase(clock: PhaseClock, which: Phase) -> Iterator[None]:
        with timed(clock, which):
            partial = partial_answer_path(answer_file)
            kept[which.name] = WorkerAnswer.from_json(partial.read_text()) if partial.exists() else WorkerAnswer()
            yield

    monkeypatch.setattr(PhaseClock, "phase", phase)
    request = WorkerRequest(cell=cell_for("eager"), artifact_dir=str(tmp_path / "artifacts"),
                            phase_file=str(tmp_path / "phase"), answer_file=str(answer_file))
    final = run_cell(request)
    assert final.status == "valid", final.reasons
    whole = final.metrics.recorded()
    expected_before = {"first_call": {"prepare_s", "prepare_cache"}, "correctness": {"first_call_s"},
                       "memory": {"device_time", "first_call_ratio", "latency_agreement", "roofline"},
                       "memory_traffic": {"math_mode", "rewrites"}}
    for name, figures in expected_before.items():
        metrics = kept[name].metrics.recorded()
        assert figures <= set(metrics), (name, sorted(metrics))
    assert kept["memory"].metrics.recorded()["device_time"] == whole["device_time"]
    assert kept["correctness"].metrics.recorded()["first_call_s"] == whole["first_call_s"]
    for name, partial in kept.items():  # only phases that ended, and no figure the whole answer lacks
        assert name not in partial.phases_s and set(partial.phases_s) < set(final.phases_s), name
        assert set(partial.metrics.recorded()) <= set(whole), name


def test_the_answer_is_kept_outside_the_phase_it_times(tmp_path: Path) -> None:
    """`keep` (the checkpoint: 40 ms for an answer with a 14,000-kernel fusion report) runs as a
    phase begins and as it ends, never inside the time the phase records."""
    calls: list[str] = []
    clock = PhaseClock(tmp_path / "phase", lambda: (calls.append(clock.current), time.sleep(0.2)))
    with clock.phase(PHASES[0]):
        pass
    assert calls == ["start", f"after {PHASES[0].name}"]
    assert clock.durations_s[PHASES[0].name] < 0.1, clock.durations_s


_BOUND_WORKER = """
import json, os, sys
os.sched_setaffinity(0, range(os.cpu_count()))  # every CPU, whatever share the test's own process has
given = sorted(os.sched_getaffinity(0))
from harness import registry
from harness.measure.protocol import WorkerRequest
from harness.measure.worker import run_cell
from tests.unit.test_worker import RaisingBackend, cell_for
registry.load = lambda name: RaisingBackend
folder = sys.argv[1]
request = WorkerRequest(cell=cell_for("raising"), artifact_dir=folder + "/a", phase_file=folder + "/p")
print(json.dumps([given, run_cell(request).record()["environment"]["cpu_affinity"]]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs two CPUs to be given, to see one taken away")
@pytest.mark.parametrize("variable", ["OMP_PROC_BIND=true", "GOMP_CPU_AFFINITY=0-1"])
def test_a_worker_records_the_cpus_it_was_given_not_those_openmp_bound_it_to(variable: str, tmp_path: Path) -> None:
    """A scenario with `env: [OMP_PROC_BIND=true]`: OpenMP, loaded by `import torch`, binds the
    worker's main thread to its first place, the cell recorded CPU 0 alone, read as "1 of the
    machine's 2 CPUs", and the run's own resume was refused as another share."""
    repo = Path(__file__).resolve().parents[2]
    name, _, value = variable.partition("=")
    done = subprocess.run([sys.executable, "-c", _BOUND_WORKER, str(tmp_path)], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, name: value, "PYTHONPATH": str(repo)}, timeout=300)
    given, recorded = json.loads(done.stdout.strip().splitlines()[-1])
    assert recorded == given and len(given) >= 2, (variable, given, recorded, done.stderr[-2000:])


_BASELINE_WORKER = """
import json, sys
from harness import registry
from harness.measure import memory
from harness.measure.protocol import WorkerRequest
from harness.measure.worker import run_cell
from tests.unit.test_worker import RaisingBackend, cell_for

class Preloading(RaisingBackend):
    preload = ("colorsys",)

def baseline():
    print(json.dumps([m for m in ("torchvision", "mlperf_loadgen", "colorsys") if m not in sys.modules]))
    raise RuntimeError("the baseline was read: nothing more to see")

registry.load = lambda name: Preloading
memory.current_rss_bytes = baseline
folder = sys.argv[1]
run_cell(WorkerRequest(cell=cell_for("raising"), artifact_dir=folder + "/a", phase_file=folder + "/p"))
"""


@pytest.mark.slow
def test_a_fresh_worker_reads_its_memory_baseline_after_the_imports_a_preloaded_parent_makes(tmp_path: Path) -> None:
    """A fresh worker (`--fresh-workers`, Ray) read its baseline before torchvision was imported,
    which its model's build then did: a fresh resnet18 cell's peak_rss_delta_bytes was 253 MiB, of
    which torchvision's import was about 170 MiB, where a forked worker's (its parent imported
    torchvision) was 99 MiB. Its backend's `preload` counted in the delta likewise."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _BASELINE_WORKER, str(tmp_path)], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(repo)}, timeout=300)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs two CPUs to be given, to see one taken away")
@pytest.mark.parametrize("start", ["fresh", "preloaded"])
def test_the_cpus_a_worker_records_do_not_depend_on_how_it_started(
        start: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A preloaded parent imported torch under `OMP_PROC_BIND=true` before it forked: its main
    thread was bound to CPU 0, every forked worker inherited it and recorded one CPU, and the run's
    own resume was refused as another share."""
    from harness.run.isolation import run_worker
    from harness.run.preloaded_parents import PreloadedParents
    from tests.cell_configs import cell_config

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    share = os.sched_getaffinity(0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # every CPU, whatever a pytest-xdist worker's share is
    try:
        given = sorted(os.sched_getaffinity(0))
        parents = PreloadedParents() if start == "preloaded" else None
        try:
            outcome = run_worker(WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / "a")), timeout_s=120,
                                 log_path=tmp_path / "log", module="tests.affinity_worker",
                                 env_names=["OMP_PROC_BIND=true"], parents=parents)
        finally:
            if parents is not None:
                parents.close()
    finally:
        os.sched_setaffinity(0, share)
    assert outcome.answer is not None, (tmp_path / "log").read_text()[-2000:]
    assert outcome.answer.environment["cpu_affinity"] == given, start

