"""What a backend's `Prepared` answers the passes, checked: a method that raises or returns another
type than the contract's fails the cell naming the method and what it returns (an optional stub
copied as `...` returned None and the cell failed with "profile: TypeError: 'NoneType' object is
not iterable", naming nothing)."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

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


def returned(owner: Any, method: str, value: Any, returns: tuple[type, ...]) -> Any:
    """`value`, which `owner.<method>()` returned, where it is one of `returns` (a bool is no int);
    BackendFailed naming the method otherwise."""
    wrong = wrong_answer(owner, method, value, returns)
    if wrong:
        raise BackendFailed(wrong)
    return value


def raised(owner: Any, method: str, exc: Exception) -> str:
    """What is said of a plugin's method that raised `exc`, with where."""
    return f"{type(owner).__name__}.{method}() raised {type(exc).__name__}: {exc}{where_raised(exc)}"


def where_raised(exc: BaseException) -> str:
    """` (at FILE:LINE)`, the innermost frame of `exc`'s traceback in a file of neither importlib's
    frozen modules nor the harness: where a plugin broke, for a reason that no log keeps the
    traceback of (the probe's, before any cell runs); "" where no such frame is (a class the
    harness could not instantiate: its error says why)."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__)
              if not frame.filename.startswith("<") and not Path(frame.filename).resolve().is_relative_to(_HARNESS)]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


_HARNESS = Path(__file__).resolve().parents[1]


def wrong_answer(owner: Any, method: str, value: Any, returns: tuple[type, ...], expected: str = "") -> str | None:
    """What is said of `value`, which `owner.<method>()` returned, where it is none of `returns` (a
    bool is no int), naming what it returns (`expected`, else the types' names); None where it is."""
    if isinstance(value, returns) and not (isinstance(value, bool) and bool not in returns):
        return None
    expected = expected or " or ".join("None" if kind is type(None) else kind.__name__ for kind in returns)
    return f"{type(owner).__name__}.{method}() returned {type(value).__name__}; it returns {expected} ({CONTRACT})"
