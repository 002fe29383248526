"""The quick tier (`./run.sh test --quick`) leaves out whole folders of real runs and every test
marked slow, and keeps the rest."""

from __future__ import annotations

from pathlib import Path

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


def test_every_folder_it_leaves_out_exists() -> None:
    assert all((REPO / "tests" / folder).is_dir() for folder in NOT_QUICK)
