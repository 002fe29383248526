"""The seconds of an Inductor compile that are the machine's one-time work, not the model's.

An Inductor compile on CPU does two things once per machine (per torch, C++ compiler and CPU),
whatever the model:
- the vector instruction set check: small programs built with each set's flags and loaded, to see
  which sets g++ can build and, on AVX-512, whether BF16 and VNNI do (about 12 s on one core of the
  2-core test machine). A process keeps the answer; the backend records each program that passed
  for the machine, beside the precompiled headers, so that later cells and runs build none of them
  (backends/inductor_isa.py).
- the precompiled header of the C++ kernels' prefix: built once per set of compiler flags (7 to 11 s
  there) into Inductor's default cache folder, which is outside a cell's own caches on purpose:
  Inductor holds it global, not part of a fresh-cache compile. Every later compile finds it.

So the first Inductor cell of a machine carried 20 to 30 s (measured there) that its fusion pair, and every
later cell, did not. `watch` times both where they happen inside a compile; the worker moves those
seconds out of `prepare_s` into a phase of their own (`toolchain`), so each cell's compile time is
its model's. The header's preprocessing and hashing, which every new process pays, stay in the
compile; only the header's build, or the wait for another cell's build of it, is moved.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock


class ToolchainClock:
    """Seconds spent in the watched one-time work so far; a watched call inside another is counted
    once, in the outer one."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def timed(self, function: Any, counts: Any = None) -> Any:
        """`function`, adding its calls' wall time to `seconds` (only calls for which
        `counts(*args)` is true, where given)."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth or (counts is not None and not counts(*args, **kwargs)):
                return function(*args, **kwargs)
            self._depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self._depth -= 1

        return wrapper


@contextlib.contextmanager
def watch() -> Iterator[ToolchainClock]:
    """Time the vector instruction set check and the precompiled header's build while the block runs.
    A torch without either internal (other names, or none) leaves it in the compile: nothing is
    patched for it and its seconds stay in `prepare_s`."""
    clock = ToolchainClock()
    with contextlib.ExitStack() as stack:
        try:
            from torch._inductor import cpu_vec_isa
        except ImportError:
            cpu_vec_isa = None
        check = getattr(cpu_vec_isa, "valid_vec_isa_list", None)
        if callable(check) and callable(getattr(check, "cache_info", None)) and check.cache_info().currsize == 0:
            # the check runs on the first call in a process only (the list is cached after it)
            stack.enter_context(mock.patch.object(cpu_vec_isa, "valid_vec_isa_list", clock.timed(check)))
        try:
            from torch._inductor import codecache
        except ImportError:
            codecache = None
        build = getattr(codecache, "_worker_compile_cpp", None)
        header_locks = getattr(codecache, "_HEADER_LOCK_DIR", None)
        if callable(build) and isinstance(header_locks, str):
            prefix = os.path.join(header_locks, "")

            def header_build(lock_path: Any, *args: Any, **kwargs: Any) -> bool:
                return str(lock_path).startswith(prefix)

            stack.enter_context(mock.patch.object(codecache, "_worker_compile_cpp", clock.timed(build, header_build)))
        yield clock
