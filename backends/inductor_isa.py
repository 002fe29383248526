"""The machine's record of Inductor's vector instruction set builds, so that a cell builds none of them.

Inductor checks which vector instruction sets g++ can build, once per process, by building small
programs with each set's flags and loading them (`VecISA.check_build`): a base program per set the
CPU's flags report and, on an AVX-512 CPU, one more with AVX-512 BF16's flag on each AVX-512 set and
one with VNNI's (AMX adds its tile program and its FP16 one). The programs' answers choose the set a
kernel is built for, and its flags: AVX-512 BF16 comes from its program alone. Torch keeps a program
that built and loaded in its cache folder, keyed on the compiler, the flags, the program and torch,
and builds none it finds there; but every cell's worker compiles into a fresh cache folder of its
own, so every Inductor cell built and loaded them all again (`cpp.vec_isa_ok`, which this record
replaced, skipped the base programs only: 3 builds a cell were left on the 2-core AMD test machine,
1.2 to 3.4 s of its `toolchain` time).

This record keeps the same passes for the machine, beside the precompiled headers in Inductor's
default cache folder, under a key of torch, the CPU's architecture and flags, and the C++ compiler.
While a cell compiles, a program the record names as passed (the set, its build macros and flags,
and the program's text, as torch's own cache keys it) answers that it builds without being built:
the check chooses what it would have chosen, from the same answers. A program that failed is not
recorded, as torch keeps none (a load can time out on a busy machine), and is built again; a record
under another key, or a program it does not name, changes nothing.

Cells of a `--jobs` run, or of two runs, add their passes at once: each reads the record, adds its
own and writes it back under an exclusive lock of its folder (harness/dirlock.py, as the artifact
cache locks an entry it builds), so that none writes over another's. A cell waits for that lock
`ISA_LOCK_WAIT_S` at most (the holder needs milliseconds): past it, a holder suspended or hung
(Ctrl-Z, a debugger, a stopped container) would stall every later cell until its time limit, so the
cell leaves its passes unrecorded, says so in its log, and goes on (a later cell builds those
programs again). The record an older
FusionBench kept there (`OLD_ISA_FILE`: the check's one answer, true or false, under a key) is read
by nothing since this one replaced it, and is removed as the record is written, where its text is
that record's; an older FusionBench still run on the machine checks again once and writes it anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from harness import dirlock
from harness.files.atomic import write_json_atomic

#: not the file `cpp.vec_isa_ok`'s record used (OLD_ISA_FILE)
ISA_FILE = "fusionbench-vector-isa-builds.json"
#: The record of the check's answer that set `cpp.vec_isa_ok` (FusionBench before 2026-12-06): a key
#: of 16 hex digits (torch, the CPU's flags, the compiler) to true or false.
OLD_ISA_FILE = "fusionbench-vector-isa-check.json"
#: The most a cell waits for the record's lock before it leaves its passes unrecorded.
ISA_LOCK_WAIT_S = 10.0


@contextlib.contextmanager
def recorded_builds(device: str) -> Iterator[None]:
    """While the block compiles (CPU only): the check's programs that the record names as passed
    answer without a build, and the programs that pass are added to the record as the block ends.
    A torch without these internals is left alone."""
    record = isa_record() if device == "cpu" else None
    try:
        from torch._inductor import cpu_vec_isa
    except ImportError:
        cpu_vec_isa = None
    vec_isa = getattr(cpu_vec_isa, "VecISA", None)
    build = getattr(vec_isa, "check_build", None)
    if record is None or not callable(build):
        yield
        return
    key = isa_key()
    passed = _passes(record, key)
    new: list[str] = []

    def check_build(isa: Any, code: str) -> Any:
        name = build_name(isa, code)
        if name in passed:
            return True
        answer = build(isa, code)
        if answer is True:
            new.append(name)
        return answer

    try:
        with mock.patch.object(vec_isa, "check_build", check_build):
            yield
    finally:
        if new:
            _add_passes(record, key, new)


def build_name(isa: Any, code: str) -> str:
    """One program of the check, as torch's cache keys it (the set's flags, the program's text) and
    more: the set, its macros, and its flags both as they stand and as it builds with them (torch
    2.11 keyed the one, 2.14 the other)."""
    macros = " ".join(isa.build_macro())
    program = hashlib.sha256(code.encode()).hexdigest()[:16]
    return f"{type(isa).__name__} [{macros}] [{getattr(isa, '_arch_flags', '')}] [{isa.build_arch_flags()}] {program}"


def isa_record() -> Path | None:
    """The file that keeps the passes: in Inductor's default cache folder, beside the precompiled
    headers it keeps there, global to the machine (and user) as the answers are, outside every
    cell's own caches; None for a torch that lays that folder out otherwise."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return None
    return Path(default_cache_dir()) / ISA_FILE


def isa_key() -> str:
    """What the answers depend on beyond the program and its flags: torch, the CPU's architecture
    and flags, and the C++ compiler (its path, size and time: another g++ installed in its place is
    another key)."""
    import torch

    flags = ""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    compiler = shutil.which(os.environ.get("CXX") or "g++") or ""
    try:
        found = os.stat(compiler)
        compiler += f" {found.st_size} {found.st_mtime_ns}"
    except OSError:
        pass
    text = "\n".join((torch.__version__, platform.machine(), flags, compiler))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _passes(record: Path, key: str) -> set[str]:
    try:
        known = json.loads(record.read_text())
    except (OSError, ValueError):
        return set()
    return _names(known.get(key) if isinstance(known, dict) else None)


def _names(passes: Any) -> set[str]:
    return {name for name in passes if isinstance(name, str)} if isinstance(passes, list) else set()


def _add_passes(record: Path, key: str, new: list[str]) -> None:
    """Add `new` to the passes `record` keeps under `key`, read and written under the lock of its folder:
    another cell adding its own at once waits (its write replaced the whole file, losing these), for
    ISA_LOCK_WAIT_S at most, then leaves them unrecorded with a warning in its log."""
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        held = dirlock.lock_within(record.parent, ISA_LOCK_WAIT_S)
    except OSError:
        return  # unrecorded: the next cell builds its programs, as before
    if held is None:
        print(f"fusionbench worker: warning: {record.parent} stayed locked by another process for {ISA_LOCK_WAIT_S:g} s: "
              f"this cell's {len(new)} passed vector instruction set check(s) are not recorded in {record.name} "
              "(a later cell builds their programs again)", file=sys.stderr)
        return
    try:
        known = json.loads(record.read_text()) if record.exists() else {}
        if not isinstance(known, dict):
            known = {}
        known[key] = sorted(_names(known.get(key)) | set(new))
        write_json_atomic(record, known)
        _remove_old_record(record.parent / OLD_ISA_FILE)
    except (OSError, ValueError):
        pass  # unrecorded: the next cell builds its programs, as before
    finally:
        os.close(held)


def _remove_old_record(old: Path) -> None:
    """Remove `old` where it holds what an older FusionBench's record held (a key of 16 hex digits to
    true or false, each): nothing reads it now. A file of any other text is not known to be that
    record, and is left alone."""
    try:
        known = json.loads(old.read_text())
    except (OSError, ValueError):
        return
    if isinstance(known, dict) and all(isinstance(answer, bool) and len(key) == 16 and all(c in "0123456789abcdef" for c in key)
                                       for key, answer in known.items()):
        old.unlink(missing_ok=True)
