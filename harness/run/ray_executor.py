"""Cells as tasks on a Ray cluster (`fusionbench run FILE --executor ray [--address ADDR]`).

Each cell becomes one Ray task that reserves what the cell needs: one GPU (and one CPU) for a
cuda cell, `cpus_per_cell` CPUs for a CPU cell. On its node the task claims that many cores no
other cell holds (harness/run/slots.py), binds the worker to them, and runs the same worker entry
point under the same isolation, time and memory limits as a local run (harness/run/isolation.py),
in a scratch folder of its own; it sends back the worker's outcome, every file the worker wrote
and where it ran (hostname, Ray node, GPUs, the node's CPU and GPUs). The driver writes them into
the bundle as tasks finish, so the bundle is the same as a local run's. As it runs, a task tells
the driver that it started and each phase it begins (`Phases`): a cell waiting in Ray's queue is
not running, on the bar or when a stop records the cells it stopped.

A task whose Ray worker dies (a node lost, a process killed) is run once more by Ray
(`max_retries=1`); a second loss fails the cell with the reason, never loses it. Ctrl-C cancels
every task. Ray is an optional extra (`pip install .[ray]`); nodes need FusionBench installed
and the scenario's input folder and cache at the same paths.

Nothing is left waiting on a cluster that will never run the cells. Before the machine is probed
and before the bundle is made, a child process asks where Ray would take the run (`--address`,
`RAY_ADDRESS`, or the cluster the last `ray start` left) and whether a cluster answers there, and
is stopped after `--ray-connect-timeout-s` (30 s by default); the run then joins the cluster
itself, and refuses a cell no node could ever give what it reserves (`room_problem`). Each refusal
is one line and exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.errors import ConfigError, terminate
from harness.run.executors import CellTask, Finished, OnPhase, node_info
from harness.run.isolation import WorkerOutcome, run_worker
from harness.run.scratch import scratch_dir
from harness.run.slots import Slot, claimed

RETRIES = 1
WAIT_S = 0.5
TOLD_ON_STOP_S = 5.0  # how long a stopped run waits at the most for the mailbox's last news
CONNECT_TIMEOUT_S = 30.0
HOW_TO_GET_RAY = "Ray is not installed: `pip install .[ray]` adds it (./run.sh installs it with the rest)"
_ANSWER = "fusionbench-ray-probe: "  # marks the child's answer among whatever Ray prints


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray: {HOW_TO_GET_RAY}") from None
    return ray


@dataclass(frozen=True)
class NodeResult:
    """What a cell's Ray task sends back: the worker's outcome, every file the worker wrote (by its
    path under the cell's artifacts folder) and where it ran."""

    outcome: WorkerOutcome
    files: dict[str, bytes]
    node: dict[str, Any]


@dataclass(frozen=True)
class ClusterAnswer:
    """The answer of `reach`'s child process (`_probe`), one JSON line: the live nodes' resources
    (a local instance not yet started: this machine's; None where not known before joining), or
    why not: `refused` (nothing listens at the address) or `error` (Ray failed to join)."""

    nodes: list[dict[str, float]] | None = None
    refused: str | None = None
    error: str | None = None

    def line(self) -> str:
        return _ANSWER + json.dumps(asdict(self))

    @classmethod
    def parse(cls, line: str) -> ClusterAnswer:
        return cls(**json.loads(line.removeprefix(_ANSWER)))


class Phases:
    """The driver's mailbox for what a cell's task says as it runs (a Ray actor that holds no CPU):
    that it started, then each phase its worker begins. Ray tells the driver only when a task ends,
    and a cell queued behind others is not running: a Ctrl-C then recorded it interrupted with the
    time since it was sent, and the bar counted it running. Read from where the driver's last read
    ended (`since`), not emptied by it: a read a stop cut short loses nothing for the next."""

    def __init__(self) -> None:
        self.said: list[tuple[int, str]] = []
        self.instance = uuid.uuid4().hex  # a mailbox Ray restarted is another, holding only what came since

    def say(self, key: int, phase: str) -> None:
        self.said.append((key, phase))

    def since(self, count: int, instance: str) -> tuple[str, int, list[tuple[int, str]]]:
        """What was said after the first `count` things the mailbox `instance` held (all it holds,
        where it is another), with this mailbox's instance and where what it gives starts."""
        start = count if instance == self.instance else 0
        return self.instance, start, self.said[start:]


def run_on_node(task: CellTask, cpus: int, phases: Any, key: int) -> NodeResult:
    """On the node: the cell's worker in a scratch folder, on cores of its own; what came of it.
    Its start and phases are told to `phases` (a `Phases` actor) under `key`: the start before the
    worker starts, waited for, so that the driver knows of it before it knows the task ended."""
    import ray

    with scratch_dir("fusionbench-ray-cell-") as scratch:
        request = replace(task.request, artifact_dir=str(scratch))
        with claimed(cpus) as slot:
            with contextlib.suppress(ray.exceptions.RayActorError):  # a mailbox lost for good costs no cell
                ray.get(phases.say.remote(key, "start"))
            outcome = run_worker(request, timeout_s=task.timeout_s, log_path=scratch / "worker.log",
                                 memory_limit_bytes=task.memory_limit_bytes, env_names=task.env_names,
                                 scratch_env=task.scratch_env, slot=slot,
                                 on_phase=lambda phase: phases.say.remote(key, phase))
        files = {p.relative_to(scratch).as_posix(): p.read_bytes() for p in sorted(scratch.rglob("*")) if p.is_file()}
        return NodeResult(outcome=outcome, files=files, node=_node(slot))


def _node(slot: Slot) -> dict[str, Any]:
    import os

    import ray

    return {**node_info(slot, "ray"), "ray_node_id": ray.get_runtime_context().get_node_id(),
            "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def check_options(address: str | None, connect_timeout_s: float | None, cpus_per_cell: int = 1) -> None:
    """Refuse (ConfigError) an `--address` Ray could not read (it takes HOST:PORT, ray://HOST:PORT,
    auto or local), a connect timeout that is not a positive number of seconds and fewer than one
    CPU a cell."""
    if cpus_per_cell < 1:
        raise ConfigError(f"--cpus-per-cell {cpus_per_cell}: give 1 or more")
    if connect_timeout_s is not None and not 0 < connect_timeout_s < float("inf"):
        raise ConfigError(f"--ray-connect-timeout-s {connect_timeout_s:g}: give a number of seconds above 0")
    if address is None or address in ("auto", "local"):
        return
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if colon and host and port.isdigit() and 0 < int(port) < 65536 and all(c.isprintable() and not c.isspace()
                                                                            for c in address):
        return
    raise ConfigError(f"--address {address!r}: not a Ray address; give the cluster's HOST:PORT (as `ray start "
                      "--head` prints it), ray://HOST:PORT or auto")


def cell_needs(device: str, cpus_per_cell: int) -> tuple[int, int]:
    """(CPUs, GPUs) one cell's task reserves on `device`."""
    return (1, 1) if device == "cuda" else (cpus_per_cell, 0)


def room_problem(nodes: list[dict[str, float]], device: str, cpus_per_cell: int) -> str | None:
    """Why no node of `nodes` (each one's total resources, as `ray.nodes()` gives them) could ever
    run a `device` cell, or None when one could: Ray would keep such a cell waiting forever."""
    cpus, gpus = cell_needs(device, cpus_per_cell)
    if any(node.get("CPU", 0) >= cpus and node.get("GPU", 0) >= gpus for node in nodes):
        return None
    most = max((node.get("CPU", 0) for node in nodes), default=0)
    if device == "cuda":
        return (f"a cuda cell reserves a GPU and a CPU, and none of the Ray cluster's {len(nodes)} node(s) has "
                "both; give the cluster a GPU node, or run on cpu")
    fewer = f"; give --cpus-per-cell {int(most)} or fewer" if most >= 1 else ""
    return (f"a cpu cell reserves {cpus} CPU(s) (--cpus-per-cell {cpus}), and no node of the Ray cluster has that "
            f"many (the most one has is {most:g}){fewer}")


class RayExecutor:
    """Cells as Ray tasks. `reach` and `join` refuse a cluster that does not answer or could never
    run the cells; a run calls both before it makes its bundle."""

    def __init__(self, address: str | None, cpus_per_cell: int = 1, connect_timeout_s: float | None = None) -> None:
        check_options(address, connect_timeout_s, cpus_per_cell)
        self.address = address
        self.cpus_per_cell = cpus_per_cell
        self.connect_timeout_s = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
        self.ray = ray_module()

    def record(self) -> dict[str, Any]:
        return {"name": "ray", "address": self.address, "cpus_per_cell": self.cpus_per_cell}

    def reach(self, device: str) -> None:
        """Refuse (ConfigError), within `connect_timeout_s`, a cluster nothing answers for, and one
        no node of which could run a `device` cell (when the device is known: cpu or cuda). Asked
        in a child process, which is stopped when the time is up: Ray itself retries for minutes."""
        who = self._who()
        answer = self._ask_child()
        if answer is None:
            raise ConfigError(f"{who}: no Ray cluster answered within {self.connect_timeout_s:g} s "
                              "(--ray-connect-timeout-s); check the address, and that the cluster runs")
        if answer.refused is not None:
            raise ConfigError(f"{who}: {answer.refused}; start the cluster (`ray start --head`) or give "
                              "the address of one that runs")
        if answer.error is not None:
            raise ConfigError(f"{who}: Ray could not join the cluster: {answer.error}")
        nodes = answer.nodes
        problem = room_problem(nodes, device, self.cpus_per_cell) if nodes is not None and device != "auto" else None
        if problem is not None:
            raise ConfigError(f"{who}: {problem}")

    def join(self, device: str) -> None:
        """Join the cluster in this process (start the local instance), then refuse one no node of
        which could run a `device` cell (ConfigError, leaving it again)."""
        ray = self.ray
        if not ray.is_initialized():
            # Ray installs its own SIGTERM and SIGINT handlers, which end the process; keep the run's
            # own, which leave the bundle interrupted and resumable.
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            except SystemExit as exc:
                if exc.code == signal.SIGTERM:  # Ray's handler, while init runs: stop as the run's own does
                    terminate()
                raise
            except Exception as exc:  # noqa: BLE001 - whatever Ray raises here, the user gets one line
                raise ConfigError(f"{self._who()}: Ray could not join the cluster: {_first_line(exc)}") from None
            finally:
                for sig, handler in handlers.items():
                    if handler is not None:
                        signal.signal(sig, handler)
        problem = room_problem(_alive(ray.nodes()), device, self.cpus_per_cell)
        if problem is not None:
            ray.shutdown()
            raise ConfigError(f"{self._who()}: {problem}")

    def _who(self) -> str:
        """The option (or variable) that chose the cluster, as a refusal names it."""
        if self.address not in (None, "auto"):
            return f"--address {self.address}"
        chosen = os.environ.get("RAY_ADDRESS")  # Ray reads it where no address, or auto, is given
        return f"--executor ray (RAY_ADDRESS={chosen})" if chosen else "--executor ray"

    def _ask_child(self) -> ClusterAnswer | None:
        """The child's answer (`_probe`), or None when it gave none within `connect_timeout_s`."""
        child = subprocess.Popen([sys.executable, "-m", "harness.run.ray_executor", str(self.connect_timeout_s),
                                  *([self.address] if self.address is not None else [])],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        timed_out = False
        try:
            out, err = child.communicate(timeout=self.connect_timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(child)
            out, err = child.communicate()  # what it said before it was stopped
        except BaseException:  # Ctrl-C or SIGTERM while it asks: leave no process behind
            _stop(child)
            child.wait()
            raise
        for line in out.splitlines():
            if line.startswith(_ANSWER):
                return ClusterAnswer.parse(line)
        if timed_out:
            return None
        said = [line for line in err.splitlines() if line.strip()]
        return ClusterAnswer(error=f"its probe ended with code {child.returncode}: {said[-1][:300] if said else 'no output'}")

    def run(self, tasks: list[CellTask], on_phase: OnPhase) -> Iterator[Finished]:
        if not tasks:
            return
        ray = self.ray
        if not ray.is_initialized():
            self.join(tasks[0].device)
        remote = ray.remote(run_on_node)
        # Restarted, its calls retried, where its node is lost: what it held is lost with it, and a
        # cell whose start it lost is taken as started when it ends.
        phases = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(Phases).remote()
        started: set[int] = set()
        pending: dict[Any, tuple[int, CellTask]] = {}
        for key, task in enumerate(tasks):
            cpus, gpus = cell_needs(task.device, self.cpus_per_cell)
            # All are submitted at once: a further round runs whatever its cell's first round gave.
            sent = replace(task, skip=None)  # the parent's state stays here
            ref = remote.options(num_cpus=cpus, num_gpus=gpus, max_retries=RETRIES,
                                 retry_exceptions=False).remote(sent, max(1, cpus), phases, key)
            pending[ref] = (key, task)

        mailbox, passed_on = "", 0  # the mailbox read, and how much of what it holds has been passed on

        def told(timeout_s: float | None = None) -> None:
            """What the tasks told the mailbox since it was last read, passed on."""
            nonlocal mailbox, passed_on
            running = dict(pending.values())
            # a task's start is here before its end
            mailbox, passed_on, said = ray.get(phases.since.remote(passed_on, mailbox), timeout=timeout_s)
            for key, phase in said:
                if key in running:
                    if phase == "start":
                        started.add(key)
                    on_phase(running[key], phase)
                passed_on += 1

        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
                told()
                for ref in ready:
                    key, task = pending.pop(ref)
                    if key not in started:
                        on_phase(task, "start")
                    yield self._finished(task, ref)
        except BaseException:
            # a cell that started since the mailbox was last read (up to WAIT_S, longer on a loaded
            # driver), or while a read the stop cut short was under way, was not known to have started:
            # its start is read first
            try:
                with contextlib.suppress(Exception):  # noqa: BLE001 - a lost mailbox leaves the time it was sent
                    told(TOLD_ON_STOP_S)
            finally:
                for ref in pending:
                    ray.cancel(ref, force=True)
            raise
        finally:
            with contextlib.suppress(Exception):  # noqa: BLE001 - a mailbox Ray lost already is gone
                ray.kill(phases)

    def _finished(self, task: CellTask, ref: Any) -> Finished:
        ray = self.ray
        try:
            result: NodeResult = ray.get(ref)
        except ray.exceptions.RayError as exc:
            why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            return Finished(task, None, {"executor": "ray"},
                            failure=f"the Ray task running it was lost {RETRIES + 1} times ({type(exc).__name__}: {why})")
        for rel, data in result.files.items():
            path = task.artifacts / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return Finished(task, result.outcome, result.node)


def _stop(child: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it may have ended a moment ago
        os.killpg(child.pid, signal.SIGKILL)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__


def _alive(nodes: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Each live node's total resources, from `ray.nodes()`."""
    return [dict(node.get("Resources") or {}) for node in nodes if node.get("Alive")]


def _probe(address: str | None, timeout_s: float) -> ClusterAnswer:
    """In the child process of `reach`: where Ray would take `address`, and whether a cluster answers
    there: the nodes of a local instance (not started: its resources are this machine's),
    `refused` with why when nothing listens, else the nodes once joined."""
    import socket

    ray = ray_module()
    target = address.removeprefix("ray://") if address and address.startswith("ray://") else _bootstrap(address)
    if target is None:
        return ClusterAnswer(nodes=_local_node())
    host, colon, port = target.rpartition(":")
    if colon and port.isdigit():
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
        except OSError as exc:
            shown = f"{address} (Ray reads it as {target})" if address and target not in address else target
            return ClusterAnswer(refused=f"nothing answers at {shown}: {exc.strerror or exc}")
    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ClusterAnswer(nodes=_alive(ray.nodes()))


def _bootstrap(address: str | None) -> str | None:
    """HOST:PORT of the cluster `ray.init(address)` would join, or None where it would start one."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # Ray moved its private helper: judge the address as given
        return None if address in (None, "local") else address
    # None (no address) is read as Ray reads it: RAY_ADDRESS, else the cluster the last `ray start` made
    found: str | None = canonicalize_bootstrap_address(address)  # type: ignore[arg-type]
    return found


def _local_node() -> list[dict[str, float]] | None:
    """The resources a local instance would have, as Ray works them out; None where Ray's private
    helper moved (the room is then checked once the run has joined)."""
    try:
        from ray._private.resource_and_label_spec import ResourceAndLabelSpec

        spec = ResourceAndLabelSpec().resolve(is_head=True)
        return [{"CPU": float(spec.num_cpus or 0), "GPU": float(spec.num_gpus or 0)}]
    except Exception:  # noqa: BLE001 - a private API: without it, `join` checks the same thing later
        return None


def _probe_main(argv: list[str]) -> int:
    """The child of `reach`: argv is the timeout in seconds, then the address where one was given."""
    timeout_s, address = float(argv[0]), (argv[1] if len(argv) > 1 else None)
    try:
        answer = _probe(address, timeout_s)
    except Exception as exc:  # noqa: BLE001 - whatever Ray raises, the parent says it in one line
        answer = ClusterAnswer(error=_first_line(exc))
    print(answer.line(), flush=True)
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()  # leave the cluster as a driver that ended, not one that vanished
    return 0


if __name__ == "__main__":
    sys.exit(_probe_main(sys.argv[1:]))
