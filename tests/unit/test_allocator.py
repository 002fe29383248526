"""The allocator setting: what a scenario asks, what reaches the worker, what the cell records, and
that glibc really stops handing pages back when it is set."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest
from pydantic import ValidationError

from harness import allocator
from harness.run.isolation import worker_environment
from harness.scenario.cells import expand
from harness.scenario.schema import ScenarioFile


def resolved(**overrides):
    data = {"models": ["resnet18"], "backends": ["eager", "onnxruntime"], "scenarios": ["Offline"], **overrides}
    out = ScenarioFile.model_validate(data).model_dump(mode="json")
    out["name"] = "t"
    return out


def test_steady_is_the_default_and_enters_the_cell_id() -> None:
    steady = expand(resolved(), "cpu")
    system = expand(resolved(allocator="system"), "cpu")
    assert all(c.config.allocator == "steady" for c in steady)
    assert all("allocator" not in c.config.recorded() for c in system)
    assert {c.label for c in steady} == {c.label for c in system}
    assert not {c.id for c in steady} & {c.id for c in system}, "the allocator moves figures: not the same cell"


def test_a_bundle_from_before_the_setting_keeps_its_ids_and_means_system() -> None:
    old = resolved(allocator="system")
    del old["allocator"]
    assert allocator.of(old) == "system"
    assert [c.id for c in expand(old, "cpu")] == [c.id for c in expand(resolved(allocator="system"), "cpu")]


def test_the_worker_gets_the_tunables_and_a_scenario_cannot_set_them_twice(tmp_path) -> None:
    env = worker_environment({"PATH": "/bin"}, allocator.environment("steady"), {}, tmp_path)
    assert env[allocator.VARIABLE] == allocator.STEADY_TUNABLES
    assert allocator.VARIABLE not in worker_environment({"PATH": "/bin", allocator.VARIABLE: "x"},
                                                        allocator.environment("system"), {}, tmp_path)
    with pytest.raises(ValidationError, match="allocator: system"):
        resolved(env=["GLIBC_TUNABLES=glibc.malloc.trim_threshold=0"])
    assert resolved(allocator="system", env=["GLIBC_TUNABLES=glibc.malloc.trim_threshold=0"])["env"]


def test_the_record_says_whether_the_setting_took_effect() -> None:
    steady = allocator.record("steady", {allocator.VARIABLE: allocator.STEADY_TUNABLES})
    assert steady["setting"] == "steady" and steady["tunables"] == allocator.STEADY_TUNABLES
    assert steady["in_effect"] is (platform.libc_ver()[0] == "glibc")
    assert allocator.record("steady", {})["in_effect"] is False, "asked for, but the variable never arrived"
    assert allocator.record("system", {})["in_effect"] is True
    assert allocator.warnings({"setting": "steady", "libc": "musl", "in_effect": False})
    assert (allocator.warnings(steady) == []) is steady["in_effect"]
    assert allocator.warnings(None) == []


CHURN = textwrap.dedent("""
    import ctypes, resource
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    sizes = [24 << 20, 6 << 20, 40 << 20, 3 << 20, 24 << 20]  # an eager call's activations, say
    def call():
        blocks = []
        for size in sizes:
            block = libc.malloc(size)
            ctypes.memset(block, 1, size)  # touched, as a kernel writes its output
            blocks.append(block)
        for block in blocks:
            libc.free(block)
    for _ in range(3):
        call()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        call()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
""")


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is a glibc tunable")
def test_steady_stops_each_call_faulting_its_pages_in_again() -> None:
    def faults_per_call(choice: str) -> float:
        env = {"PATH": "/usr/bin:/bin", **dict(item.split("=", 1) for item in allocator.environment(choice))}
        out = subprocess.run([sys.executable, "-c", CHURN], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout)

    pages = (97 << 20) // 4096  # what one call touches
    assert faults_per_call("system") > pages / 2, "glibc's defaults map and unmap these blocks on every call"
    assert faults_per_call("steady") < pages / 100
