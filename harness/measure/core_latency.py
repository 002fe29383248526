"""How long two of the worker's cores take to hand a cache line back and forth, right now.

A thread pool pays this on every operator it splits across threads (hand out the work, wait for
the slowest): on the 2-core AMD VM the round trip between its two vCPUs stepped between about
50 ns and 330 ns for seconds at a time, as the host placed them on nearby or distant physical
cores, and ONNX Runtime with fusion off ran 23 or 36 ms a batch with it (correlation 0.92;
docs/results/cpu-2core-amd-2026-11-25.md). Single-threaded loops do not see it.

Python cannot ping-pong in nanoseconds, so a few lines of C do it: compiled once per machine with
the system's C compiler into the artifact cache (`load`), called through ctypes. Without a C
compiler, or with fewer than two usable cores, nothing is measured (None).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from harness.cpu_topology import physical_cores, siblings

ROUND_TRIPS = 2000
_ONE_AT_A_TIME = threading.Lock()  # the C side keeps its state in globals

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#define WARM_UP 100

static _Atomic int flag;
static int trips;
static int far_core;

static void pin(int core) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *unused) {
    (void)unused;
    pin(far_core);
    atomic_store_explicit(&flag, 2, memory_order_release); /* pinned and running: ready */
    for (int i = 0; i < WARM_UP + trips; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 1) {}
        atomic_store_explicit(&flag, 0, memory_order_release);
    }
    return 0;
}

static void trip(void) {
    atomic_store_explicit(&flag, 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 0) {}
}

/* The mean round trip in ns between this thread pinned to `near` and one pinned to `far`, timed
   once the other thread is pinned and running and after WARM_UP untimed trips; this thread's
   affinity is given back. -1 when its affinity cannot be read or the second thread cannot start. */
double round_trip_ns(int near, int far, int n) {
    cpu_set_t before;
    pthread_t other;
    struct timespec start, end;
    if (pthread_getaffinity_np(pthread_self(), sizeof before, &before) != 0) return -1;
    trips = n;
    far_core = far;
    atomic_store(&flag, 0);
    if (pthread_create(&other, 0, answer, 0) != 0) return -1;
    pin(near);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2) {}
    atomic_store_explicit(&flag, 0, memory_order_release);
    for (int i = 0; i < WARM_UP; i++) trip();
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < n; i++) trip();
    clock_gettime(CLOCK_MONOTONIC, &end);
    pthread_join(other, 0);
    pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    return ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / n;
}
"""


def load(cache_dir: Path) -> ctypes.CDLL | None:
    """The compiled ping-pong, built into `cache_dir` the first time (atomically, so workers running
    side by side can race; named by the source, the compiler and the machine's architecture, so a
    shared cache never hands one machine another's build); None without a C compiler, or where it
    does not build or load (a read-only or noexec cache, a compiler that cannot run)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    key = "\0".join((SOURCE, os.path.realpath(compiler), platform.machine(), platform.libc_ver()[0]))
    library = cache_dir / f"core-latency-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"
    try:
        if not library.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".core-latency-") as work:
                source, built = Path(work) / "core_latency.c", Path(work) / "core_latency.so"
                source.write_text(SOURCE)
                done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source), "-lpthread"],
                                      capture_output=True, timeout=120, check=False)
                if done.returncode != 0:
                    return None
                os.replace(built, library)
        lib = ctypes.CDLL(str(library))
    except (OSError, subprocess.SubprocessError):
        return None
    lib.round_trip_ns.restype = ctypes.c_double
    lib.round_trip_ns.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return lib


def pair(cpus: list[int], siblings_of: Callable[[int], set[int]] = siblings) -> tuple[int, int] | None:
    """The two usable CPUs to time: the first of each of the first two physical cores (two SMT
    siblings share their caches, and a pool's threads hand off between cores; on a machine that
    numbers siblings next to each other, CPUs 0 and 1 were one core), else two siblings of the one
    core there is; None with fewer than two CPUs."""
    groups = physical_cores(cpus, siblings_of)
    if len(groups) >= 2:
        return groups[0][0], groups[1][0]
    return (groups[0][0], groups[0][1]) if groups and len(groups[0]) >= 2 else None


def measure(lib: ctypes.CDLL | None) -> float | None:
    """The fastest of three mean round trips between the first two usable physical cores (`pair`), in ns."""
    if lib is None:
        return None
    cores = pair(sorted(os.sched_getaffinity(0)))
    if cores is None:
        return None
    with _ONE_AT_A_TIME:
        trips = [lib.round_trip_ns(cores[0], cores[1], ROUND_TRIPS) for _ in range(3)]
    usable = [ns for ns in trips if ns > 0]
    return min(usable) if usable else None
