"""What a backend's `Prepared` answers the passes, checked: a method that raises or returns another
type than the contract's fails the cell naming the method and what it returns (an optional stub
copied as `...` returned None and the cell failed with "profile: TypeError: 'NoneType' object is
not iterable", naming nothing)."""

from __future__ import annotations

import json
import math
import site
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from harness.contract import Availability
from harness.errors import BackendFailed

#: Where the contract says what each method returns.
CONTRACT = "harness/contract.py"


def asked(prepared: Any, method: str, returns: tuple[type, ...], *args: Any) -> Any:
    """`prepared.<method>(*args)`, checked to be one of `returns` (a bool is no int); BackendFailed
    naming the method where it raises (its traceback printed to the worker's log) or returns
    anything else. A BackendFailed it raises is its own refusal, passed on as it is."""
    try:
        value = getattr(prepared, method)(*args)
    except BackendFailed:
        raise
    except Exception as exc:  # the plugin's own fault: the log keeps where, the cell says which method
        traceback.print_exc()
        raise BackendFailed(raised(prepared, method, exc)) from None
    return returned(prepared, method, value, returns)


def close(prepared: Any) -> None:
    """`prepared.close()`, called in the `finally` after a cell's passes: where they raised, their
    failure stays the cell's reason and a close that raises too is only printed to the worker's log;
    where they did not, a close that raises fails the cell naming the method."""
    failing = sys.exc_info()[1] is not None  # in a `finally`, the exception it is passing on
    try:
        prepared.close()
    except Exception as exc:
        traceback.print_exc()
        if not failing:
            raise BackendFailed(raised(prepared, "close", exc)) from None


def returned(owner: Any, method: str, value: Any, returns: tuple[type, ...]) -> Any:
    """`value`, which `owner.<method>()` returned, where it is one of `returns` (a bool is no int)
    and, a dict, JSON (the cell records it as it is); BackendFailed naming the method otherwise."""
    wrong = wrong_answer(owner, method, value, returns)
    if wrong:
        raise BackendFailed(wrong)
    if isinstance(value, dict):  # else the worker dies writing its answer, naming nothing
        try:
            json.dumps(value, allow_nan=False)  # as the bundle writes it: no NaN or infinity
        except (TypeError, ValueError) as exc:
            raise BackendFailed(f"{type(owner).__name__}.{method}() returned a dict that is not JSON: {exc} "
                                f"({CONTRACT})") from None
    return value


def raised(owner: Any, method: str, exc: BaseException) -> str:
    """What is said of a plugin's method that raised `exc`, with where (in the plugin's own package first)."""
    package = type(owner).__module__.split(".")[0]
    return f"{type(owner).__name__}.{method}() raised {type(exc).__name__}: {exc}{where_raised(exc, package)}"


_HARNESS = Path(__file__).resolve().parents[1]
_PATHS = sysconfig.get_paths()
_STDLIB = tuple(Path(_PATHS[key]).resolve() for key in ("stdlib", "platstdlib"))
#: Where installed packages lie: inside the standard library's folder on a system Python, and a
#: venv's platstdlib holds its site-packages.
_SITES = tuple(Path(folder).resolve() for folder in {_PATHS["purelib"], _PATHS["platlib"], *site.getsitepackages()})


def _not_the_plugins(path: Path) -> bool:
    """Whether a frame's file is never where a plugin broke: the harness's own, or the standard
    library's (an installed package, even one under the standard library's folder, may be the plugin)."""
    if path.is_relative_to(_HARNESS):
        return True
    return not any(path.is_relative_to(folder) for folder in _SITES) and any(
        path.is_relative_to(folder) for folder in _STDLIB)


def where_raised(exc: BaseException, package: str | None = None) -> str:
    """` (at FILE:LINE)`: where a plugin broke, for a reason that no log keeps the traceback of (the
    probe's, before any cell runs). The innermost frame of `exc`'s traceback in `package` (the
    plugin's top-level package) where one is; else the innermost in a file of neither the harness,
    the standard library nor importlib's frozen modules (a library the plugin called); "" where none
    is (a class the harness could not instantiate, an entry point naming no class: its error says
    why)."""
    files = [(Path(frame.filename).resolve(), frame) for frame in traceback.extract_tb(exc.__traceback__)
             if not frame.filename.startswith("<")]
    outside = [(path, frame) for path, frame in files if not _not_the_plugins(path)]
    root = _package_root(package)
    own = [(path, frame) for path, frame in outside if root is not None and path.is_relative_to(root)]
    chosen = own or outside
    return f" (at {chosen[-1][1].filename}:{chosen[-1][1].lineno})" if chosen else ""


def _package_root(package: str | None) -> Path | None:
    """The folder (or file) a loaded top-level package lies in; None where it is not loaded or has no file."""
    module = sys.modules.get(package or "")
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def wrong_answer(owner: Any, method: str, value: Any, returns: tuple[type, ...], expected: str = "") -> str | None:
    """What is said of `value`, which `owner.<method>()` returned, where it is none of `returns` (a
    bool is no int), naming what it returns (`expected`, else the types' names); None where it is."""
    if isinstance(value, returns) and not (isinstance(value, bool) and bool not in returns):
        return None
    expected = expected or " or ".join("None" if kind is type(None) else kind.__name__ for kind in returns)
    return f"{type(owner).__name__}.{method}() returned {type(value).__name__}; it returns {expected} ({CONTRACT})"


def wrong_availability(owner: Any, method: str, value: Any) -> str | None:
    """What is said of `value`, which `owner.<method>()` (`availability` or `supports`) returned, where
    it is no Availability, one whose `ok` is no bool or `reason` no str (an int reason ended the
    probe in a traceback), or a "no" without a reason (its cells were skipped saying nothing); None
    where it is a proper answer."""
    wrong = wrong_answer(owner, method, value, (Availability,), "an Availability")
    if wrong:
        return wrong
    if not (isinstance(value.ok, bool) and isinstance(value.reason, str)):
        return (f"{type(owner).__name__}.{method}() returned an Availability whose ok is {type(value.ok).__name__} "
                f"and reason {type(value.reason).__name__}; ok is a bool, reason a str ({CONTRACT})")
    if not value.ok and not value.reason.strip():
        return f"{type(owner).__name__}.{method}() said no without a reason: give Availability.no(why) ({CONTRACT})"
    return None


def attribute(owner: Any, name: str, kinds: tuple[type, ...]) -> Any:
    """`owner.<name>`, a class attribute the contract types (`dispatch_definition`, a str), where it
    is one of `kinds` (a bool is no number); BackendFailed naming the attribute otherwise."""
    value = getattr(owner, name)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    expected = " or ".join(kind.__name__ for kind in kinds)
    raise BackendFailed(f"{type(owner).__name__}.{name} is {type(value).__name__} {value!r:.60}; it is a {expected} "
                        f"({CONTRACT})")


def _time_ns(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def kernel_times_fault(owner: Any, times: Any) -> None:
    """BackendFailed naming `cpu_kernel_times` where the CpuKernelTimes it returned holds a time that
    is no finite number (NaN, a str), a kernel's below 0 or one that is no (name, nanoseconds) pair:
    they failed the cell in a pydantic error or a TypeError naming no method."""
    said = f"{type(owner).__name__}.cpu_kernel_times() returned CpuKernelTimes"
    if not _time_ns(times.wall_ns):
        raise BackendFailed(f"{said} whose wall_ns is {times.wall_ns!r:.40}, not a finite number of nanoseconds ({CONTRACT})")
    for call in times.calls:
        if not (isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], str) and _time_ns(call[1])
                and call[1] >= 0):
            raise BackendFailed(f"{said} whose calls hold {call!r:.80}: each is (kernel name, nanoseconds), "
                                f"a finite time of 0 or more ({CONTRACT})")


def refused(owner: Any, what: str, error: Any) -> str:
    """What is said of a plugin's answer (`what`: "tune() returned a Tuning") that
    the cell's record refuses with pydantic's `error`: each field, what it must be and the value."""
    fields = "; ".join(f"{'.'.join(map(str, problem['loc'])) or 'value'}: {problem['msg']} (not {problem['input']!r:.40})"
                       for problem in error.errors())
    return f"{type(owner).__name__}.{what} the cell cannot record: {fields} ({CONTRACT})"
