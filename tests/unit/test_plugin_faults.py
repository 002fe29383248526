"""A plugin's own faults (a method that raises, or returns what the contract does not say, as the
optional stubs of docs/adding_a_backend.md copied as `...` return None) are said as its cells'
reason, naming the method: they stopped the run with a traceback (`supports`), called the module
"failed to load" (`availability`, `versions`), or failed the cell naming nothing ("profile:
TypeError: 'NoneType' object is not iterable")."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import registry
from harness.bundle.header_record import BackendReport
from harness.contract import Availability, Backend, CpuKernelTimes
from harness.errors import BackendFailed
from harness.fusion import FusionReport
from harness.measure.plugin_answers import asked
from harness.run.probe import _backend_report
from harness.run.skips import skip_reason
from harness.scenario.cells import expand
from tests.unit.test_cells import resolved


class _Answers:
    def fusion_report(self) -> Any:
        return FusionReport(kernels=(), source="none")

    def math_mode(self) -> Any:
        return None

    def cpu_dispatches(self, batch: Any) -> Any:
        return True

    def cpu_kernel_times(self, batch: Any) -> Any:
        return CpuKernelTimes(calls=(), wall_ns=1.0)

    def rewrites(self) -> Any:
        raise KeyError("freezing")

    def profile_figures(self, batch: Any) -> Any:
        raise BackendFailed("no profiler in this build")


def test_a_prepared_methods_wrong_answer_fails_its_cell_naming_the_method(capsys: pytest.CaptureFixture[str]) -> None:
    prepared = _Answers()
    assert asked(prepared, "fusion_report", (FusionReport,)).kernels == ()
    assert asked(prepared, "cpu_kernel_times", (CpuKernelTimes, type(None)), 0).wall_ns == 1.0
    with pytest.raises(BackendFailed, match=r"^_Answers\.math_mode\(\) returned NoneType; it returns dict "
                                            r"\(harness/contract\.py\)$"):
        asked(prepared, "math_mode", (dict,))
    with pytest.raises(BackendFailed, match=r"^_Answers\.cpu_dispatches\(\) returned bool; it returns int or None"):
        asked(prepared, "cpu_dispatches", (int, type(None)), 0)
    where = rf"\(at {re.escape(str(Path(__file__).resolve()))}:{_Answers.rewrites.__code__.co_firstlineno + 1}\)"
    with pytest.raises(BackendFailed, match=rf"^_Answers\.rewrites\(\) raised KeyError: 'freezing' {where}$"):
        asked(prepared, "rewrites", (dict,))
    assert "KeyError: 'freezing'" in capsys.readouterr().err  # the traceback, for the worker's log
    with pytest.raises(BackendFailed, match="^no profiler in this build$"):  # the plugin's own refusal, as it is
        asked(prepared, "profile_figures", (dict,), 0)


def test_kernel_kinds_that_are_not_strings_by_name_fail_the_cell_naming_the_method(tmp_path: Path) -> None:
    """`CpuKernelTimes.kinds` left None (or given as a list) failed the profile pass with an
    AttributeError in the harness's own code, naming no method."""
    from harness.measure import passes

    class _Kinds(_Answers):
        kinds: Any = None
        dispatch_definition = kernel_time_definition = "one call"

        def cpu_dispatches(self, batch: Any) -> Any:
            return 1

        def cpu_kernel_times(self, batch: Any) -> Any:
            return CpuKernelTimes(calls=(("k", 0.5e6),), wall_ns=1e6, kinds=self.kinds)

        def profile_figures(self, batch: Any) -> Any:
            return {}

    prepared = _Kinds()
    for wrong in (None, [("k", "conv")], {"k": 3}):
        prepared.kinds = wrong
        with pytest.raises(BackendFailed, match=r"^_Kinds\.cpu_kernel_times\(\) returned CpuKernelTimes whose kinds are "):
            passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)  # type: ignore[arg-type]
    prepared.kinds = {"k": "Conv"}
    assert passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)["by_kind"][0]["kind"] == "Conv"  # type: ignore[arg-type]


def test_cuda_kernel_kinds_that_are_not_strings_by_name_fail_the_cell_naming_the_method(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the kinds come from `cuda_kernel_kinds`, checked as `CpuKernelTimes.kinds` is on the
    CPU: a wrong answer fails the cell naming the method, not in the harness's own code."""
    from harness.measure import passes

    class _GpuKinds(_Answers):
        kinds: Any = None

        def cuda_kernel_kinds(self) -> Any:
            return self.kinds

        def profile_figures(self, batch: Any) -> Any:
            return {}

    trace = [{"cat": "kernel", "name": "triton_poi_fused_convolution_relu_0", "ts": 0.0, "dur": 2.0}]
    monkeypatch.setattr(passes, "_cuda_trace", lambda prepared, batch, iters, workdir: trace)
    prepared = _GpuKinds()
    for wrong, said in ((None, "returned NoneType; it returns Mapping"), ({"k": 3}, "returned {'k': 3}, not a mapping")):
        prepared.kinds = wrong
        with pytest.raises(BackendFailed, match=rf"^_GpuKinds\.cuda_kernel_kinds\(\) {re.escape(said)}"):
            passes.profile(prepared, None, 1, "cuda", tmp_path, 1e6)  # type: ignore[arg-type]
    prepared.kinds = {"triton_poi_fused_convolution_relu_0": "triton_poi_fused_bias_relu"}
    assert passes.profile(prepared, None, 1, "cuda", tmp_path, 1e6)["by_kind"][0]["kind"] == (  # type: ignore[arg-type]
        "triton_poi_fused_bias_relu")


class _Broken(Backend):
    name = "broken"
    answer: Any = None

    def availability(self, device: str) -> Any:
        return Availability.yes()

    def versions(self) -> Any:
        return {"broken": "1"}

    def supports(self, variant: Any, dtype: str, device: str) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def prepare(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never prepared")


def test_a_supports_that_raises_or_answers_none_is_its_cells_reason_not_the_runs_end(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "load", lambda name: _Broken)
    cell = expand(resolved(), "cpu")[0]
    available = {cell.config.backend: BackendReport(available=True, reason="")}
    assert skip_reason(cell, available, []) == (
        "_Broken.supports() returned NoneType; it returns an Availability (harness/contract.py)")
    monkeypatch.setattr(_Broken, "answer", TypeError("supports() takes 3 positional arguments but 4 were given"))
    assert skip_reason(cell, available, []) == (
        "_Broken.supports() raised TypeError: supports() takes 3 positional arguments but 4 were given "
        f"(at {Path(__file__).resolve()}:{_Broken.supports.__code__.co_firstlineno + 2})")
    monkeypatch.setattr(_Broken, "answer", Availability.no("fp32 only"))
    assert skip_reason(cell, available, []) == "fp32 only"
    monkeypatch.setattr(_Broken, "answer", Availability.yes())
    assert skip_reason(cell, available, []) is None


def test_the_probe_says_which_method_of_a_loaded_plugin_broke(monkeypatch: pytest.MonkeyPatch) -> None:
    """An availability() or versions() that raised was reported as the module failing to load."""
    monkeypatch.setattr(registry, "load", lambda name: _Broken)
    assert _backend_report("broken", "cpu") == {"available": True, "reason": "", "versions": {"broken": "1"}}

    def raising(self: Any, device: str) -> Any:
        raise ImportError("libmylib.so: cannot open shared object file")

    monkeypatch.setattr(_Broken, "availability", raising)
    here = f"{Path(__file__).resolve()}"
    assert _backend_report("broken", "cpu")["reason"] == (
        "backend 'broken' _Broken.availability() raised ImportError: libmylib.so: cannot open shared object file "
        f"(at {here}:{raising.__code__.co_firstlineno + 1})")
    monkeypatch.setattr(_Broken, "availability", lambda self, device: None)
    assert _backend_report("broken", "cpu")["reason"] == (
        "backend 'broken' _Broken.availability() returned NoneType; it returns an Availability (harness/contract.py)")
    monkeypatch.setattr(_Broken, "availability", lambda self, device: Availability.yes())
    monkeypatch.setattr(_Broken, "versions", lambda self: ["1.0"])
    assert _backend_report("broken", "cpu") == {
        "available": False, "reason": "backend 'broken' _Broken.versions() returned list; it returns a dict (harness/contract.py)",
        "versions": {}}

    def unloadable(name: str) -> Any:
        raise ModuleNotFoundError("No module named 'mylib'")

    monkeypatch.setattr(registry, "load", unloadable)
    assert _backend_report("broken", "cpu")["reason"] == (
        "backend 'broken' failed to load: ModuleNotFoundError: No module named 'mylib' "
        f"(at {here}:{unloadable.__code__.co_firstlineno + 1})")


def test_a_plugin_that_breaks_on_import_is_named_at_the_line_it_broke(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Only "AttributeError: module 'torch._C' has no attribute ..." was kept: no file, no line, and
    a skipped cell has no log to hold the traceback."""
    package = tmp_path / "fb_deep"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "backend.py").write_text("from fb_deep import helpers\n")
    (package / "helpers.py").write_text("import math\n\nVALUE = math.no_such_function()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "load", lambda name: importlib.import_module("fb_deep.backend"))
    assert _backend_report("deep", "cpu")["reason"] == (
        "backend 'deep' failed to load: AttributeError: module 'math' has no attribute 'no_such_function' "
        f"(at {package / 'helpers.py'}:3)")

    # the standard library's frames are skipped (json's decoder raised), and the plugin's own package is
    # preferred to a library it called (fb_lib raised, from fb_deep2's line 2)
    (package / "calls.py").write_text("import json\n\nVALUE = json.loads('{')\n")
    monkeypatch.setattr(registry, "load", lambda name: importlib.import_module("fb_deep.calls"))
    reason = _backend_report("deep", "cpu")["reason"]
    assert reason.startswith("backend 'deep' failed to load: JSONDecodeError: ") and reason.endswith(
        f"(at {package / 'calls.py'}:3)"), reason
    (tmp_path / "fb_lib").mkdir()
    (tmp_path / "fb_lib" / "__init__.py").write_text("def explode():\n    raise RuntimeError('deep inside')\n")
    (tmp_path / "fb_deep2").mkdir()
    (tmp_path / "fb_deep2" / "__init__.py").write_text("")
    (tmp_path / "fb_deep2" / "backend.py").write_text("import fb_lib\nfb_lib.explode()\n")
    monkeypatch.setattr(registry, "load", lambda name: importlib.import_module("fb_deep2.backend"))
    monkeypatch.setattr(registry, "package_of", lambda name: "fb_deep2")
    assert _backend_report("deep", "cpu")["reason"] == (
        f"backend 'deep' failed to load: RuntimeError: deep inside (at {tmp_path / 'fb_deep2' / 'backend.py'}:2)")
    monkeypatch.setattr(registry, "package_of", lambda name: None)  # no package known: the innermost frame outside
    sys.modules.pop("fb_deep2.backend", None)
    assert _backend_report("deep", "cpu")["reason"].endswith(f"(at {tmp_path / 'fb_lib' / '__init__.py'}:2)")

    class Abstract(Backend):  # no availability() and the rest: instantiated in the probe, a frame of the harness
        name = "deep"

    monkeypatch.setattr(registry, "load", lambda name: Abstract)
    reason = _backend_report("deep", "cpu")["reason"]
    assert reason.startswith("backend 'deep' failed to load: TypeError: Can't instantiate abstract class Abstract")
    assert "(at " not in reason

    def refused(name: str) -> Any:  # the registry's own refusal says what is wrong: no frame of ours
        raise registry.ConfigError("backend fb_deep.backend:X is registered as 'deep' but calls itself 'other'")

    monkeypatch.setattr(registry, "load", refused)
    assert _backend_report("deep", "cpu")["reason"] == (
        "backend 'deep' failed to load: backend fb_deep.backend:X is registered as 'deep' but calls itself 'other'")


def test_the_guides_skeleton_runs_as_written() -> None:
    """Its section 1 did not import (BackendOptions and Literal were in comments), and its optional
    stubs, copied as `...`, returned None."""
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "adding_a_backend.md").read_text()
    start = guide.index("```python\n", guide.index("## 1. The contract")) + len("```python\n")
    namespace: dict[str, Any] = {}
    code = compile(guide[start:guide.index("```\n", start)], "adding_a_backend.md", "exec", dont_inherit=True)
    exec(code, namespace)  # noqa: S102 - the project's own guide, as a reader copies it
    backend = namespace["MyBackend"]()
    assert isinstance(backend, Backend) and backend.options_model().level == "fast"
    assert backend.supports(None, "fp32", "cpu") == Availability.yes() and backend.tune(
        None, None, device="cpu", dtype="fp32", variant=None, workdir=None, cache_dir=None) is None
    prepared = namespace["MyPrepared"]
    assert (prepared.rewrites(None), prepared.math_mode(None), prepared.profile_figures(None, None),
            prepared.cuda_kernel_kinds(None)) == ({}, {}, {}, {})


def test_the_profile_pass_asks_each_method_through_the_check(tmp_path: Any) -> None:
    """The check must be where the passes call the methods, not beside them."""
    from harness.measure import passes

    class Stub(_Answers):
        dispatch_definition = kernel_time_definition = "stub"

        def rewrites(self) -> Any:
            return {}

        def profile_figures(self, batch: Any) -> Any:
            return None

    with pytest.raises(BackendFailed, match=r"^Stub\.cpu_dispatches\(\) returned bool"):
        passes.profile(Stub(), None, 1, "cpu", tmp_path, 1e6)
    monkeypatched = Stub()
    monkeypatched.cpu_dispatches = lambda batch: 7  # type: ignore[method-assign]
    with pytest.raises(BackendFailed, match=r"^Stub\.profile_figures\(\) returned NoneType; it returns dict"):
        passes.profile(monkeypatched, None, 1, "cpu", tmp_path, 1e6)


def test_a_frame_of_an_installed_package_may_be_the_plugins_but_never_the_harnesss_or_the_standard_librarys() -> None:
    """A venv's platstdlib holds its site-packages, and a system Python's site-packages lie under its
    standard library's folder: a plugin installed there was taken for the standard library."""
    import json
    import sysconfig

    import torch

    from harness.measure.plugin_answers import _not_the_plugins

    assert _not_the_plugins(Path(json.__file__).resolve())
    assert _not_the_plugins(Path(__file__).resolve().parents[2] / "harness" / "run" / "probe.py")
    installed = Path(torch.__file__).resolve()
    assert installed.is_relative_to(Path(sysconfig.get_paths()["purelib"]).resolve()) and not _not_the_plugins(installed)


def test_a_dict_answer_that_is_not_json_fails_its_cell_naming_the_method() -> None:
    """A `rewrites()` that recorded a torch object (`{"memory_format": torch.channels_last}`) passed
    the type check, and the worker died writing its answer: the cell failed as "worker exited with
    code 1 without an answer (in phase memory_traffic)", naming neither the method nor its phase."""

    class Objects(_Answers):
        def rewrites(self) -> Any:
            return {"memory_format": object()}

        def math_mode(self) -> Any:
            return {"tf32": False, "setting": {1, 2}}

    with pytest.raises(BackendFailed, match=r"^Objects\.rewrites\(\) returned a dict that is not JSON: "
                                            r"Object of type object is not JSON serializable \(harness/contract\.py\)$"):
        asked(Objects(), "rewrites", (dict,))
    with pytest.raises(BackendFailed, match=r"^Objects\.math_mode\(\) returned a dict that is not JSON: "):
        asked(Objects(), "math_mode", (dict,))


def test_a_close_that_raises_fails_its_cell_naming_the_method(capsys: pytest.CaptureFixture[str]) -> None:
    """After passes that ended well, a close that raised failed the cell in the name of the last
    phase ("profile: AttributeError: ..."), naming no method."""
    from harness.measure.plugin_answers import close

    class Closing(_Answers):
        def close(self) -> None:
            raise AttributeError("'Closing' object has no attribute 'session'")

    with pytest.raises(BackendFailed, match=r"^Closing\.close\(\) raised AttributeError: "
                                            r"'Closing' object has no attribute 'session' \(at "):
        close(Closing())
    assert "no attribute 'session'" in capsys.readouterr().err


def test_a_dict_answer_holding_a_nan_fails_its_cell_naming_the_method() -> None:
    """`json.dumps` writes NaN, which no cell record holds: the worker's answer (and the answer so far)
    was unreadable, every figure of the cell lost, and its reason named neither the method nor the value."""

    class NotANumber(_Answers):
        def rewrites(self) -> Any:
            return {"folded_share": float("nan")}

    with pytest.raises(BackendFailed, match=r"^NotANumber\.rewrites\(\) returned a dict that is not JSON: "
                                            r"Out of range float values are not JSON compliant"):
        asked(NotANumber(), "rewrites", (dict,))


def test_an_availability_of_wrong_field_types_or_a_no_without_reason_is_said_naming_the_method(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """An availability() of Availability("no", 5) ended `backends` and `run` in a pydantic traceback
    (the probe's answer held an int reason), and one of Availability.no("") skipped the backend's
    cells with an empty reason; supports() likewise."""
    monkeypatch.setattr(registry, "load", lambda name: _Broken)
    monkeypatch.setattr(_Broken, "availability", lambda self, device: Availability("no", 5))  # type: ignore[arg-type]
    assert _backend_report("broken", "cpu")["reason"] == (
        "backend 'broken' _Broken.availability() returned an Availability whose ok is str and reason int; ok is a "
        "bool, reason a str (harness/contract.py)")
    monkeypatch.setattr(_Broken, "availability", lambda self, device: Availability.no(" "))
    assert _backend_report("broken", "cpu") == {
        "available": False, "versions": {}, "reason": "backend 'broken' _Broken.availability() said no without a "
                                                      "reason: give Availability.no(why) (harness/contract.py)"}
    cell = expand(resolved(), "cpu")[0]
    available = {cell.config.backend: BackendReport(available=True, reason="")}
    monkeypatch.setattr(_Broken, "answer", Availability.no(""))
    assert skip_reason(cell, available, []) == (
        "_Broken.supports() said no without a reason: give Availability.no(why) (harness/contract.py)")
    monkeypatch.setattr(_Broken, "answer", Availability(False, None))  # type: ignore[arg-type]
    assert skip_reason(cell, available, []) == (
        "_Broken.supports() returned an Availability whose ok is bool and reason NoneType; ok is a bool, reason a "
        "str (harness/contract.py)")


def test_a_profile_answer_out_of_range_fails_its_cell_naming_the_method(tmp_path: Path) -> None:
    """A cpu_dispatches() of -3, a cpu_kernel_times() holding NaN, a negative or a str time, a
    profile_figures() whose arena peak is 1.5 or -2 bytes, or a dispatch_definition that is no str
    failed the cell later in a pydantic ValidationError "for
    Kernels" (at pydantic/main.py) or a TypeError in the harness's code, naming no method."""
    from harness.measure import passes

    class _Values(_Answers):
        dispatch_definition = kernel_time_definition = "one call"
        count: Any = 1
        times: Any = CpuKernelTimes(calls=(("k", 0.5e6),), wall_ns=1e6)
        figures: Any = {}

        def cpu_dispatches(self, batch: Any) -> Any:
            return self.count

        def cpu_kernel_times(self, batch: Any) -> Any:
            return self.times

        def profile_figures(self, batch: Any) -> Any:
            return self.figures

    prepared = _Values()
    assert passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)["kernels_per_inference"] == 1  # type: ignore[arg-type]
    for count in (-3, 10**40):
        prepared.count = count
        with pytest.raises(BackendFailed, match=r"^_Values\.cpu_dispatches\(\) returned (-3|1e\+40); it returns the compute "
                                                r"dispatches of one inference, 0 to 1e\+08, or None"):
            passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)  # type: ignore[arg-type]
    prepared.count = 1
    for calls, wall_ns, said in (((("k", float("nan")),), 1e6, r"whose calls hold \('k', nan\)"),
                                 ((("k", -5.0),), 1e6, r"whose calls hold \('k', -5\.0\)"),
                                 ((("k", "500"),), 1e6, r"whose calls hold \('k', '500'\)"),
                                 ((("k", 5.0),), float("inf"), r"whose wall_ns is inf")):
        prepared.times = CpuKernelTimes(calls=calls, wall_ns=wall_ns)  # type: ignore[arg-type]
        with pytest.raises(BackendFailed, match=rf"^_Values\.cpu_kernel_times\(\) returned CpuKernelTimes {said}"):
            passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)  # type: ignore[arg-type]
    prepared.times = None
    for figure, said in ((1.5, "should be a valid integer, got a number with a fractional part"),
                         (-2, "should be greater than or equal to 0")):
        prepared.figures = {"arena_peak_in_use_bytes": figure, "own_figure": "free-form"}
        with pytest.raises(BackendFailed, match=rf"^_Values\.profile_figures\(\) returned arena_peak_in_use_bytes "
                                                rf"{figure}: input {said} \(harness/contract\.py\)$"):
            passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)  # type: ignore[arg-type]
    prepared.figures = {}
    prepared.dispatch_definition = 5  # type: ignore[assignment]
    with pytest.raises(BackendFailed, match=r"^_Values\.dispatch_definition is int 5; it is a str"):
        passes.profile(prepared, None, 1, "cpu", tmp_path, 1e6)  # type: ignore[arg-type]


def test_a_tuning_or_a_prepare_cache_the_record_refuses_fails_its_cell_naming_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Tuning with a negative count or a cache of "hot", and a prepare_cache of "hot", failed the
    cell with pydantic's whole dump ("ValidationError: 1 validation error for Metrics ... at
    pydantic/main.py"), naming neither the plugin's class nor the method."""
    from harness.contract import Tuning
    from harness.measure.protocol import WorkerRequest
    from harness.measure.worker import run_cell
    from tests.unit.test_worker import ToolchainBackend, cell_for

    class _Odd(ToolchainBackend):
        reported = 0.0
        tuning: Any = None

        def tune(self, *args: Any, **kwargs: Any) -> Any:
            return self.tuning

    monkeypatch.setattr(registry, "load", lambda name: _Odd)
    monkeypatch.chdir(tmp_path)

    def reason(folder: str) -> str:
        request = WorkerRequest(cell=cell_for("toolchain"), artifact_dir=str(tmp_path / folder),
                                phase_file=str(tmp_path / f"{folder}.phase"), timing_round=2)
        answer = run_cell(request).record()
        assert answer["status"] == "failed", answer
        return str(answer["reasons"][0])

    monkeypatch.setattr(_Odd, "tuning", Tuning(tuned=True, trials=-2, cache="hot"))  # type: ignore[arg-type]
    assert reason("tune") == (
        "after tune: _Odd.tune() returned a Tuning the cell cannot record: trials: Input should be greater than or "
        "equal to 0 (not -2); cache: Input should be 'cold', 'warm' or 'none' (not 'hot') (harness/contract.py)")
    monkeypatch.setattr(_Odd, "tuning", None)
    from tests.unit import test_worker

    monkeypatch.setattr(test_worker._Wrapped, "prepare_cache", "hot", raising=False)
    assert reason("cache") == (
        "after prepare: _Wrapped.prepare_cache is a value the cell cannot record: prepare_cache: Input should be 'cold', 'warm', "
        "'none' or 'unknown' (not 'hot') (harness/contract.py)")


def test_a_supports_that_calls_sys_exit_is_its_cells_reason_not_the_runs_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supports() that called sys.exit(0) ended `run` with exit 0, its bundle left running with no
    cell recorded, and `run --dry-run` with exit 0 and no table."""
    monkeypatch.setattr(registry, "load", lambda name: _Broken)
    cell = expand(resolved(), "cpu")[0]
    available = {cell.config.backend: BackendReport(available=True, reason="")}

    def exits(self: Any, variant: Any, dtype: str, device: str) -> Any:
        sys.exit(0)

    monkeypatch.setattr(_Broken, "supports", exits)
    assert skip_reason(cell, available, []) == (
        f"_Broken.supports() raised SystemExit: 0 (at {Path(__file__).resolve()}:{exits.__code__.co_firstlineno + 1})")


def test_a_resumes_plugin_missing_here_names_the_package_its_bundle_recorded() -> None:
    """A bundle made with a plugin (the torchscript example, say), resumed where it is not installed,
    skipped its cells as "unknown backend 'torchscript'; registered: ...", though the bundle records the
    package (the backend's versions and the run's package list)."""
    from importlib.metadata import version

    from harness.run.skips import with_plugins_to_install

    torch = version("torch")
    header = {"backends": {"tracer": {"available": True, "reason": "",
                                      "versions": {"fusionbench-tracer": "0.1.0", "torch": torch}},
                           "tvm": {"available": True, "reason": "", "versions": {"apache-tvm": "0.1"}}},
              "system": {"packages": {"fusionbench-tracer": "0.1.0", "torch": torch, "apache-tvm": "0.1"}}}
    unknown = BackendReport(available=False, reason=f"failed to load: {registry.unknown('tracer')}")
    not_here = BackendReport(available=False, reason="tvm is not installed")  # registered here: its own reason says
    said = with_plugins_to_install({"tracer": unknown, "tvm": not_here}, header)
    assert said["tracer"].reason == (f"{unknown.reason}; the run that made this bundle had it from "
                                     "fusionbench-tracer 0.1.0: pip install fusionbench-tracer==0.1.0")
    assert said["tvm"] == not_here
    assert with_plugins_to_install({"tracer": unknown}, {"backends": {}})["tracer"] == unknown
