"""The machine's one-time work inside an Inductor compile, timed apart (backends/inductor_toolchain.py):
the header's build counts, a kernel's build does not, a check already made in the process is not
watched, and a watched call inside another counts once. Inductor's internals are replaced here by fakes
that each take 0.1 s of a fake clock; tests/backends/test_inductor.py checks a real compile."""

from __future__ import annotations

import functools
import os
import time
import types

import pytest

pytest.importorskip("torch")

from backends import inductor_toolchain  # noqa: E402


@pytest.fixture
def internals(monkeypatch: pytest.MonkeyPatch, tmp_path):
    from torch._inductor import codecache, cpu_vec_isa

    locks = str(tmp_path / "precompiled_headers" / "locks")
    calls: list[str] = []
    # the clock the watch reads: each fake takes 0.1 s of it (real sleeps were timed 0.37 s for 0.2 s on
    # the loaded 2-core test machine, and the sum's bound failed)
    now = [0.0]
    monkeypatch.setattr(inductor_toolchain, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def build(lock_path: str, builders: tuple = ()) -> None:
        calls.append(os.path.basename(lock_path))
        now[0] += 0.1

    @functools.cache
    def check() -> list[str]:
        now[0] += 0.1
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
    assert after_check == pytest.approx(0.2)  # the check's 0.1 s and its header build's 0.1 s, once
    assert clock.seconds == pytest.approx(0.3)
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


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """The check's program builds replaced by a fake that counts them (a program whose text says
    `fails` fails), on a machine whose temporary folder is new."""
    import tempfile

    from torch._inductor import cpu_vec_isa

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    built: list[str] = []

    def check_build(isa, code: str) -> bool:
        built.append(f"{isa} {isa.build_arch_flags()}")
        return "fails" not in code

    monkeypatch.setattr(cpu_vec_isa.VecISA, "check_build", check_build)
    return cpu_vec_isa, built


def test_the_isa_checks_programs_that_passed_are_recorded_for_the_machine_beside_the_precompiled_headers(
        builds, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Each program that built and loaded is kept in Inductor's default cache folder (global to the
    machine, where the headers are), not in a cell's or run's cache: a later process, another run, a
    `--no-cache` cell answer it without building it, AVX-512's BF16 and VNNI programs among them. A
    program that failed is built again; another C++ compiler is another key; a GPU compile is left alone."""
    import shutil
    from pathlib import Path

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from backends import inductor_isa

    cpu_vec_isa, built = builds
    vnni, avx512 = cpu_vec_isa.VecAVX512VNNI(), cpu_vec_isa.VecAVX512()
    base, bf16 = cpu_vec_isa.VecISA._avx_code, cpu_vec_isa.VecAVX512._avx512_bf16_code

    def check() -> list[bool]:
        answers = [vnni.check_build(base), avx512.check_build(base), vnni.check_build(vnni._avx512_vnni_code),
                   avx512.check_build("// fails")]
        avx512._arch_flags += " -mavx512bf16"  # as torch's BF16 check does, around its build
        try:
            answers.append(avx512.check_build(bf16))
        finally:
            avx512._arch_flags = cpu_vec_isa.VecAVX512._arch_flags
        return answers

    with inductor_isa.recorded_builds("cpu"):  # nothing recorded: every program is built
        assert check() == [True, True, True, False, True]
    assert len(built) == 5 and built[-1].endswith("-mfma -mavx512bf16")
    record = inductor_isa.isa_record()
    assert record is not None and record.parent == Path(default_cache_dir())
    assert record.parent.parent == tmp_path and record.is_file()
    built.clear()
    with inductor_isa.recorded_builds("cpu"):  # the same answers; the failed program alone is built again
        assert check() == [True, True, True, False, True]
    assert built == ["avx512 -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma"]
    built.clear()
    with inductor_isa.recorded_builds("cpu"):  # the same program with other flags is another program
        assert avx512.check_build(bf16) is True
    assert built == ["avx512 -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma"]
    built.clear()
    with inductor_isa.recorded_builds("cuda"):
        assert vnni.check_build(base) is True
    monkeypatch.setenv("CXX", shutil.which("true") or "/bin/true")  # another compiler: not this record's
    with inductor_isa.recorded_builds("cpu"):
        assert vnni.check_build(base) is True
    assert len(built) == 2


def test_an_unreadable_isa_record_changes_nothing(builds) -> None:
    from backends import inductor_isa

    cpu_vec_isa, built = builds
    record = inductor_isa.isa_record()
    assert record is not None
    record.parent.mkdir(parents=True, exist_ok=True)
    for text in ("not json", "[1, 2]", '{"%s": true}' % inductor_isa.isa_key(), '{"%s": [3]}' % inductor_isa.isa_key()):
        record.write_text(text)
        with inductor_isa.recorded_builds("cpu"):
            assert cpu_vec_isa.VecAVX2().check_build(cpu_vec_isa.VecISA._avx_code) is True
    assert len(built) == 4


def test_two_cells_adding_their_passes_at_once_both_keep_them(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Two cells of a `--jobs 2` run each read the record, added the programs they had built and
    wrote it back whole: the later write dropped the other's passes, whose programs every later cell
    built again. Each reads and writes under the lock of the record's folder now: both are kept."""
    import threading

    from backends import inductor_isa

    record = tmp_path / "inductor" / inductor_isa.ISA_FILE
    write = inductor_isa.write_json_atomic

    def slow_write(path, value) -> None:  # as a busy machine may: the other writer reads meanwhile
        time.sleep(0.3)
        write(path, value)

    monkeypatch.setattr(inductor_isa, "write_json_atomic", slow_write)
    writers = [threading.Thread(target=inductor_isa._add_passes, args=(record, "k" * 16, [name])) for name in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert inductor_isa._passes(record, "k" * 16) == {"a", "b"}


def test_the_record_an_older_fusionbench_kept_is_removed_as_the_record_is_written(tmp_path) -> None:
    """The check's one answer an older FusionBench kept beside the record (read by nothing since this
    record replaced it) stayed in the folder for good; it goes as the record is written, where its
    text is that record's. A file of that name holding anything else is not known to be it: kept."""
    from backends import inductor_isa

    folder = tmp_path / "inductor"
    folder.mkdir()
    old = folder / inductor_isa.OLD_ISA_FILE
    old.write_text('{"0123456789abcdef": true, "fedcba9876543210": false}')
    inductor_isa._add_passes(folder / inductor_isa.ISA_FILE, "k" * 16, ["a"])
    assert not old.exists() and inductor_isa._passes(folder / inductor_isa.ISA_FILE, "k" * 16) == {"a"}
    for text in ('{"a key of another kind": true}', '{"0123456789abcdef": ["a"]}', "not json"):
        old.write_text(text)
        inductor_isa._add_passes(folder / inductor_isa.ISA_FILE, "k" * 16, ["b"])
        assert old.read_text() == text


def test_a_holder_of_the_records_lock_that_never_lets_go_leaves_the_cells_passes_unrecorded_not_the_cell_stalled(
        builds, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The lock was waited for without a bound: a cell holding it suspended (Ctrl-Z, a debugger) or
    hung stalled every later Inductor cell until its time limit. The wait ends at ISA_LOCK_WAIT_S:
    the compile goes on, its passes unrecorded, and its log says so."""
    from backends import inductor_isa
    from harness import dirlock

    cpu_vec_isa, built = builds
    record = inductor_isa.isa_record()
    assert record is not None
    record.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(inductor_isa, "ISA_LOCK_WAIT_S", 0.3)
    holder = dirlock.lock(record.parent)  # another cell's, which never lets go
    try:
        began = time.monotonic()
        with inductor_isa.recorded_builds("cpu"):
            assert cpu_vec_isa.VecAVX2().check_build(cpu_vec_isa.VecISA._avx_code) is True
        assert time.monotonic() - began < 5
    finally:
        os.close(holder)
    assert len(built) == 1 and not record.exists()
    said = " ".join(capsys.readouterr().err.split())
    assert f"fusionbench worker: warning: {record.parent} stayed locked by another process for 0.3 s: this cell's 1 " \
           f"passed vector instruction set check(s) are not recorded in {record.name}" in said
    with inductor_isa.recorded_builds("cpu"):  # let go: the next cell records its passes
        assert cpu_vec_isa.VecAVX2().check_build(cpu_vec_isa.VecISA._avx_code) is True
    assert record.is_file() and len(built) == 2
