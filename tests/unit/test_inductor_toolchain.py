"""The machine's one-time work inside an Inductor compile, timed apart (backends/inductor_toolchain.py):
the header's build counts, a kernel's build does not, a check already made in the process is not
watched, and a watched call inside another counts once. Inductor's internals are replaced by sleeps
here; tests/backends/test_inductor.py checks a real compile."""

from __future__ import annotations

import functools
import os
import time

import pytest

pytest.importorskip("torch")

from backends import inductor_toolchain  # noqa: E402


@pytest.fixture
def internals(monkeypatch: pytest.MonkeyPatch, tmp_path):
    from torch._inductor import codecache, cpu_vec_isa

    locks = str(tmp_path / "precompiled_headers" / "locks")
    calls: list[str] = []

    def build(lock_path: str, builders: tuple = ()) -> None:
        calls.append(os.path.basename(lock_path))
        time.sleep(0.1)

    @functools.cache
    def check() -> list[str]:
        time.sleep(0.1)
        codecache._worker_compile_cpp(os.path.join(locks, "inside.lock"))  # counted once, in the check
        return ["avx512"]

    monkeypatch.setattr(codecache, "_HEADER_LOCK_DIR", locks)
    monkeypatch.setattr(codecache, "_worker_compile_cpp", build)
    monkeypatch.setattr(cpu_vec_isa, "valid_vec_isa_list", check)
    return codecache, cpu_vec_isa, locks, calls


def test_the_header_build_and_the_first_isa_check_are_timed_and_a_kernel_build_is_not(internals) -> None:
    codecache, cpu_vec_isa, locks, calls = internals
    with inductor_toolchain.watch() as clock:
        codecache._worker_compile_cpp("/elsewhere/kernel.lock")
        assert clock.seconds == 0
        assert cpu_vec_isa.valid_vec_isa_list() == ["avx512"]
        after_check = clock.seconds
        codecache._worker_compile_cpp(os.path.join(locks, "header.lock"))
    assert 0.2 <= after_check < 0.3  # the check's 0.1 s and its header build's 0.1 s, once
    assert 0.3 <= clock.seconds < 0.4
    assert calls == ["kernel.lock", "inside.lock", "header.lock"]
    with inductor_toolchain.watch() as again:  # the process has its answer: the check is not watched
        assert cpu_vec_isa.valid_vec_isa_list() == ["avx512"]
    assert again.seconds == 0


def test_a_torch_without_the_internals_leaves_everything_in_the_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor import codecache, cpu_vec_isa

    monkeypatch.delattr(codecache, "_HEADER_LOCK_DIR")
    monkeypatch.delattr(cpu_vec_isa, "valid_vec_isa_list")
    with inductor_toolchain.watch() as clock:
        pass
    assert clock.seconds == 0


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="the check is recorded on x86 only")
def test_the_isa_check_is_recorded_once_for_the_machine_beside_the_precompiled_headers(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The check's answer is kept in Inductor's default cache folder (global to the machine, where
    the headers are), not in a cell's or run's cache: a later process, another run, a `--no-cache`
    cell skip the check. Another C++ compiler is another key."""
    import shutil
    import tempfile
    from pathlib import Path

    from torch._inductor import cpu_vec_isa
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from backends import inductor

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a machine whose temporary folder is new
    reported = inductor._reported_isas()
    monkeypatch.setattr(cpu_vec_isa, "valid_vec_isa_list", lambda: reported)  # the check's answer, without its builds
    assert inductor._isa_settings("cpu") == {}  # nothing recorded: the compile checks
    inductor._remember_isa("cpu")
    record = inductor._isa_record()
    assert record is not None and record.parent == Path(default_cache_dir())
    assert record.parent.parent == tmp_path and record.is_file()
    assert inductor._isa_settings("cpu") == {"cpp.vec_isa_ok": True}
    assert inductor._isa_settings("cuda") == {}
    monkeypatch.setenv("CXX", shutil.which("true") or "/bin/true")  # another compiler: not this record's
    assert inductor._isa_settings("cpu") == {}
    monkeypatch.delenv("CXX")
    # the check's answer differs from the CPU's flags: recorded as such, and every compile checks
    monkeypatch.setattr(cpu_vec_isa, "valid_vec_isa_list", lambda: [*reported, "a set the flags do not name"])
    record.unlink()
    inductor._remember_isa("cpu")
    assert record.is_file() and inductor._isa_settings("cpu") == {}
