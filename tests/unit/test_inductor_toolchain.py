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
