"""The quick tier (`./run.sh test --quick`) leaves out whole folders of real runs and every test
marked slow, and keeps the rest; each xdist worker runs on cores of its own, and the long modules
start first (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import NOT_QUICK, REPO, _quick


class _Item:
    def __init__(self, rel: str, *marks: str) -> None:
        self.fspath = REPO / "tests" / rel
        self.keywords = {Path(rel).stem: 1, **{mark: 1 for mark in marks}}


def test_the_quick_tier_leaves_out_real_runs_and_slow_tests() -> None:
    assert set(NOT_QUICK) == {"integration", "backends", "gpu"}
    assert _quick(_Item("unit/test_stats.py"))
    assert _quick(_Item("contract/test_backend_contract.py"))
    assert not _quick(_Item("unit/test_isolation.py", "slow"))
    for folder in NOT_QUICK:
        assert not _quick(_Item(f"{folder}/test_x.py"))


class _Config:
    def __init__(self, quick: bool) -> None:
        self.quick = quick

    def getoption(self, name: str) -> bool:
        assert name == "--quick"
        return self.quick


def test_the_quick_tier_does_not_even_import_the_folders_it_leaves_out() -> None:
    """Under `--quick` the folders directly under tests/ that it leaves out are not collected (their
    modules import torch, torchvision and TVM); a folder of that name elsewhere, a module, and every
    folder without `--quick` are left to pytest."""
    tests = REPO / "tests"
    for folder in NOT_QUICK:
        assert conftest.pytest_ignore_collect(tests / folder, _Config(True)) is True  # type: ignore[arg-type]
        assert conftest.pytest_ignore_collect(tests / folder, _Config(False)) is None  # type: ignore[arg-type]
        assert conftest.pytest_ignore_collect(tests / "unit" / folder, _Config(True)) is None  # type: ignore[arg-type]
    for kept in (tests / "unit", tests / "contract", tests / "unit" / "test_stats.py"):
        assert conftest.pytest_ignore_collect(kept, _Config(True)) is None  # type: ignore[arg-type]


def test_every_folder_it_leaves_out_exists() -> None:
    assert all((REPO / "tests" / folder).is_dir() for folder in NOT_QUICK)


def test_each_xdist_worker_gets_a_share_of_the_cores_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers on four cores take two each, disjoint; more workers than cores take a core each
    in turn (the suite's four on the project's two: two workers a core, one waiting while the other
    computes); no share (the whole machine) outside xdist, for a single worker, or on one core."""
    monkeypatch.setattr(conftest, "WHOLE_MACHINE", frozenset({0, 1, 2, 3}))

    def shares(count: int) -> list[frozenset[int] | None]:
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
        found = []
        for index in range(count):
            monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
            found.append(conftest._share_of_the_cores())
        return found

    assert shares(2) == [frozenset({0, 1}), frozenset({2, 3})]
    assert shares(6) == [frozenset({core}) for core in (0, 1, 2, 3, 0, 1)]
    monkeypatch.setattr(conftest, "WHOLE_MACHINE", frozenset({0, 1}))
    assert shares(4) == [frozenset({0}), frozenset({1}), frozenset({0}), frozenset({1})]
    monkeypatch.setattr(conftest, "WHOLE_MACHINE", frozenset({0}))
    assert shares(4) == [None] * 4
    monkeypatch.setattr(conftest, "WHOLE_MACHINE", frozenset({0, 1, 2, 3}))
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert conftest._share_of_the_cores() is None
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert conftest._share_of_the_cores() is None


def test_this_worker_runs_on_its_share_and_the_order_starts_the_long_modules() -> None:
    """Under xdist this process is pinned to its share (this module is not `whole_machine`), and
    the end-to-end folders come before the modules with a slow test, which come before the rest."""
    if conftest.SHARE is not None:
        assert frozenset(os.sched_getaffinity(0)) == conftest.SHARE
    items = [_Item("unit/test_stats.py"), _Item("unit/test_isolation.py", "slow"), _Item("unit/test_isolation.py"),
             _Item("integration/test_suites.py", "slow")]
    conftest._longest_first(items)  # type: ignore[arg-type]
    assert [str(item.fspath.relative_to(REPO / "tests")) for item in items] == [
        "integration/test_suites.py", "unit/test_isolation.py", "unit/test_isolation.py", "unit/test_stats.py"]
