"""How steady the machine is by itself, measured once per run by the system probe.

Two fixed single-threaded workloads, each timed in chunks of about 20 ms for about 1.5 s: a
matrix multiplication that stays in the L1 cache (the CPU's own speed) and a sum over 64 MiB
(memory bandwidth). Nothing of the harness or a model runs meanwhile, so their CV is the
machine's noise floor: on a shared virtual machine, whose neighbours and host change its speed
from second to second, no figure can be steadier than this, whatever the harness does. Above
`NOISY_FLOOR` the run warns, as pyperf's checks warn about an unstable system.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

NOISY_FLOOR = 0.03
CHUNK_S = 0.02
DURATION_S = 1.5


def _chunks(work: Callable[[], Any], duration_s: float = DURATION_S) -> list[int]:
    calls = []
    for _ in range(5):
        start = time.perf_counter_ns()
        work()
        calls.append(time.perf_counter_ns() - start)
    repeat = max(int(CHUNK_S * 1e9 / max(min(calls), 1)), 1)
    samples = []
    deadline = time.perf_counter() + duration_s
    while time.perf_counter() < deadline:
        t0 = time.perf_counter_ns()
        for _ in range(repeat):
            work()
        samples.append(time.perf_counter_ns() - t0)
    return samples


def _cv(samples: list[int]) -> float:
    return statistics.stdev(samples) / statistics.mean(samples) if len(samples) > 1 else 0.0


def measure() -> dict[str, Any]:
    """The machine's noise floor: CVs of the two fixed workloads, and a warning when high."""
    import numpy as np

    small = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    big: Any = np.ones(64 << 18, dtype=np.float32)  # 64 MiB: beyond any cache
    compute = _chunks(lambda: small @ small)
    memory = _chunks(big.sum)
    result = {
        "compute_cv": _cv(compute), "memory_cv": _cv(memory), "chunks": [len(compute), len(memory)],
        "method": (f"single-threaded: a 64x64 fp32 matmul (L1) and a sum over 64 MiB, each timed in ~{CHUNK_S * 1e3:.0f} ms "
                   f"chunks for {DURATION_S} s; CV of the chunks"),
    }
    worst = max(_cv(compute), _cv(memory))
    result["warning"] = (
        f"this machine's own speed varies: a fixed compute loop has a CV of {result['compute_cv']:.0%} and a "
        f"memory-bound one {result['memory_cv']:.0%}; no figure measured here can be steadier"
        if worst > NOISY_FLOOR else ""
    )
    return result
