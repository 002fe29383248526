"""The probe: a short-lived process that resolves `device: auto`, describes the system (with the
device's measured peaks, for the roofline) and asks each backend whether it can run here. The
parent never imports torch or creates a CUDA context itself; it runs `python -m harness.run.probe`
and reads one JSON answer from stdout.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic
from pydantic import ConfigDict

from harness.errors import ConfigError
from harness.quick_exit import quick_exit

if TYPE_CHECKING:
    from harness.run.probe_answer import ProbeAnswer

PROBE_TIMEOUT_S = 300
NOISE_PROBE_VARIABLE = "FUSIONBENCH_NOISE_PROBE_S"
NOISE_PROBE_MAX_S = 60.0
PEAK_COPY_VARIABLE = "FUSIONBENCH_PEAK_COPY_MIB"
PEAK_COPY_MAX_MIB = 4096


class ProbeRequest(pydantic.BaseModel):
    """What the parent asks the probe process (its one argument, as JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    device: str
    backends: list[str]
    with_system: bool
    noise_s: float | None
    cache_dir: str | None = None  # the run's artifact cache (None: --no-cache)
    peak_copy_bytes: int | None = None  # the peak probe's copy (None: the device's default)


#: What the probe writes to its standard error before it asks a backend something, so that a probe
#: that hangs or dies there (a plugin's `availability` that sleeps, or crashes the process) is said as
#: that backend's, not only as the probe's; the parent leaves these lines out of what it shows.
ASKING = "fusionbench probe: asking "
#: Its last such line once every backend has answered.
ANSWERED = "no backend: each answered"


def _asking(name: str, method: str) -> None:
    print(f"{ASKING}backend {name!r} {method}", file=sys.stderr, flush=True)


def _backend_report(name: str, device: str) -> dict[str, Any]:
    from harness import registry
    from harness.measure import plugin_answers

    def unavailable(why: str) -> dict[str, Any]:
        return {"available": False, "reason": f"backend {name!r} {why}", "versions": {}}

    # a broken plugin must not take the run down: it is reported as unavailable, saying where it
    # broke; a `sys.exit` in its code is its fault too, not the probe's end
    _asking(name, "(loading it)")
    try:
        backend = registry.load(name)()
    except ConfigError as exc:  # the registry's own refusal: its words say what is wrong
        return unavailable(f"failed to load: {exc}")
    except (Exception, SystemExit) as exc:
        return unavailable(f"failed to load: {type(exc).__name__}: {exc}"
                           f"{plugin_answers.where_raised(exc, registry.package_of(name))}")
    _asking(name, f"{type(backend).__name__}.availability()")
    try:
        availability = backend.availability(device)
    except (Exception, SystemExit) as exc:
        return unavailable(plugin_answers.raised(backend, "availability", exc))
    wrong = plugin_answers.wrong_availability(backend, "availability", availability)
    if wrong:
        return unavailable(wrong)
    _asking(name, f"{type(backend).__name__}.versions()")
    try:
        versions = backend.versions() if availability.ok else {}
    except (Exception, SystemExit) as exc:
        return unavailable(plugin_answers.raised(backend, "versions", exc))
    wrong = plugin_answers.wrong_answer(backend, "versions", versions, (Mapping,), "a dict")
    if wrong:
        return unavailable(wrong)
    return {
        "available": availability.ok,
        "reason": availability.reason,
        "versions": {str(name): str(version) for name, version in versions.items()},
    }


def noise_probe_s(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds each of the machine-noise probe's four passes runs: FUSIONBENCH_NOISE_PROBE_S, else
    harness/run/machine_noise.py's default. Shorter is quicker and a coarser reading of the machine
    (the bundle's `machine_noise.method` says how long it ran); the tests shorten it."""
    from harness.run import machine_noise

    text = environ.get(NOISE_PROBE_VARIABLE)
    if text is None:
        return machine_noise.DURATION_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= NOISE_PROBE_MAX_S:
        raise ConfigError(
            f"{NOISE_PROBE_VARIABLE}={text!r}: give the seconds each noise-probe pass runs, above 0 and at most {NOISE_PROBE_MAX_S:g}"
        )
    return seconds


def peak_copy_bytes(environ: Mapping[str, str] = os.environ) -> int | None:
    """The bytes of the tensor the peak probe copies for the roofline's bytes/s: FUSIONBENCH_PEAK_COPY_MIB
    (whole MiB), else None: harness/measure/roofline.py's PEAK_COPY_BYTES for the device (256 MiB on a
    CPU). Smaller is quicker, and a copy that fits a cache reads its rate rather than memory's (the
    bundle's `system.peaks.method` says the size); the tests shorten it, as they shorten the noise probe."""
    text = environ.get(PEAK_COPY_VARIABLE)
    if text is None:
        return None
    if not (text.isascii() and text.isdecimal()) or not 0 < int(text) <= PEAK_COPY_MAX_MIB:
        raise ConfigError(f"{PEAK_COPY_VARIABLE}={text!r}: give the MiB the peak probe copies, a whole number "
                          f"above 0 and at most {PEAK_COPY_MAX_MIB}")
    return int(text) << 20


def probe(device: str, backends: list[str], with_system: bool, noise_s: float,
          cache_dir: Path | None = None, copy_bytes: int | None = None) -> dict[str, Any]:
    from harness.run import system

    torch_info = system.torch_info()
    resolved = device
    if device == "auto":
        resolved = "cuda" if torch_info.get("cuda_available") else "cpu"
    answer: dict[str, Any] = {
        "device": resolved,
        "cuda_available": bool(torch_info.get("cuda_available")),
        "cuda_devices": len(torch_info.get("devices") or []),
        "backends": {name: _backend_report(name, resolved) for name in backends},
    }
    print(f"{ASKING}{ANSWERED}", file=sys.stderr, flush=True)
    # a run on cuda where torch sees no GPU is refused on this answer: nothing more to measure
    if with_system and (resolved != "cuda" or answer["cuda_available"]):
        from harness.measure.machine_speed import CACHE_FOLDER
        from harness.run import machine_noise

        described = system.describe()
        machine = cache_dir / CACHE_FOLDER if cache_dir is not None else None
        described["machine_noise"] = machine_noise.measure(noise_s, machine).recorded()  # before the peaks heat anything up
        described["peaks"] = _peaks(resolved, copy_bytes)
        answer["system"] = described
    return answer


def _peaks(device: str, copy_bytes: int | None = None) -> dict[str, Any]:
    """The device's measured peaks for the roofline (harness.measure.roofline), or why there are none."""
    from harness.measure.roofline import measure_peaks

    try:
        return measure_peaks(device, copy_bytes)
    except (RuntimeError, MemoryError) as exc:  # an accelerator too small or busy: no roofline, not no run
        return {"device": device, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def run_probe(device: str, backends: list[str], *, with_system: bool = True, cache_dir: Path | None = None) -> ProbeAnswer:
    """Run the probe in a child process and return its answer. `cache_dir` is the run's artifact
    cache, where the noise probe's compiled cross-core loop is kept (as the cells keep theirs), or
    None (`--no-cache`): built again in a temporary folder."""
    from harness.run.probe_answer import ProbeAnswer

    request = ProbeRequest(
        device=device, backends=backends, with_system=with_system, noise_s=noise_probe_s() if with_system else None,
        cache_dir=str(cache_dir) if cache_dir is not None else None,
        peak_copy_bytes=peak_copy_bytes() if with_system else None,
    ).model_dump_json()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness.run.probe", request],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:  # the machine's fault, not a finding about results: exit 2, as bad input
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        hung = _while(stderr)
        raise ConfigError(f"the system probe did not answer within {PROBE_TIMEOUT_S} s"
                          + (f"{hung}, which had not returned (a backend's availability() and versions() are cheap)"
                             if hung else "")) from None
    said = [kept for line in done.stderr.strip().splitlines() if (kept := line.partition(ASKING)[0])]
    tail = " | ".join(said[-15:]) or "no output"
    if done.returncode != 0:
        raise ConfigError(f"the system probe failed (exit {done.returncode}){_while(done.stderr)}: {tail}")
    lines = done.stdout.strip().splitlines()
    try:
        return ProbeAnswer.model_validate_json(lines[-1] if lines else "")
    except pydantic.ValidationError as exc:  # it ended (a plugin's os._exit(0)) without a whole answer
        raise ConfigError(f"the system probe gave no answer (exit 0){_while(done.stderr)}: "
                          f"{exc.errors()[0]['msg']}; standard error: {tail[-500:]}") from None


def _while(stderr: str) -> str:
    """` while asking backend 'x' availability()`: what the probe was last asking, from its standard
    error (`ASKING`); "" where it asked no backend or had its answers from them all. A line is read
    from where ASKING begins: a backend's write with no newline ("loading...") ends up in front of
    the next one, which named the method before as the one that hung."""
    asked = [line.partition(ASKING)[2] for line in stderr.splitlines() if ASKING in line]
    return f" while asking {asked[-1]}" if asked and asked[-1] != ANSWERED else ""


def main() -> int:
    request = ProbeRequest.model_validate_json(sys.argv[1])
    noise_s = request.noise_s if request.noise_s is not None else 0.0
    cache_dir = Path(request.cache_dir) if request.cache_dir is not None else None
    # the answer goes to the standard output the parent reads; what a backend or its library prints
    # there, from Python or C, goes to standard error instead of into the answer
    sys.stdout.flush()
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    answer = json.dumps(probe(request.device, request.backends, request.with_system, noise_s, cache_dir,
                              request.peak_copy_bytes))
    with os.fdopen(answer_fd, "w") as out:
        out.write(answer + "\n")
    return 0


if __name__ == "__main__":
    quick_exit(main())  # without the interpreter's teardown: harness/quick_exit.py
