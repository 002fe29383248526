"""`./run.sh --container cpu|cuda scenarios/offline.yaml ...`: the same `fusionbench run`, inside
a reproducible image, through the Docker SDK for Python.

The image holds the environment: compilers and the hash-locked packages of
containers/requirements-<kind>.lock. It is tagged `fusionbench-<kind>:<hash>` and built when no
image has that tag, one of two ways (`image_source`):
- where the pinned base image can be pulled (a registry answers), from containers/Dockerfile;
  the hash covers the lock, pyproject.toml (the backends' entry points) and the Dockerfile;
- where none answers, with no registry and nothing fetched inside the build, bit for bit the same
  from the same commit (harness/container/image_build.py); the hash also covers the base's lock and
  the recipe's code.
The container then runs:
- as the calling user (under sudo, the user who called it: results belong to them), with no network;
- with the repository mounted read-only at /work/repo (the harness that runs is the checkout's),
  the results directory read-write at /work/results and the artifact cache at /work/cache (`--out`
  and `--cache-dir`, in either form, `--out PATH` or `--out=PATH`; never the host's root or a
  system folder, which are refused before anything is created);
- with the GPU requested (all devices) for `cuda`;
- with the image's tag, id, digest, layer digests and base in its environment, which the bundle
  records (`system.container`).
Its output is streamed as it comes; Ctrl-C is passed on as SIGINT, so the run inside stops the
way a native one does. Where no Docker engine answers and this machine can start one of the
project's own (harness/container/engine.py: Linux, root, DOCKER_HOST unset), it is started for the run
and stopped after it; elsewhere one line says so and how to run natively, before anything is
created.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import harness
from harness.container import image_build
from harness.container.engine import OwnEngine, own_engine_here
from harness.container.engine_socket import refused, socket_of
from harness.container.host_folders import system_folder
from harness.errors import ConfigError, HarnessError, interrupted_exit_code

KINDS = ("cpu", "cuda")
REPO_MOUNT = "/work/repo"
RESULTS_MOUNT = "/work/results"
CACHE_MOUNT = "/work/cache"
DOCKERFILE = "containers/Dockerfile"
REGISTRY_BASE = "python@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91"  # the Dockerfile's


class ContainerError(HarnessError):
    """No Docker engine, or an image that does not build; nothing was created."""

    exit_code = 2


def lock_file(repo: Path, kind: str) -> Path:
    return repo / "containers" / f"requirements-{kind}.lock"


def image_hash(repo: Path, kind: str) -> str:
    """SHA-256 over what decides the image's content: its lock, pyproject.toml and the Dockerfile."""
    digest = hashlib.sha256(kind.encode())
    for path in (lock_file(repo, kind), repo / "pyproject.toml", repo / DOCKERFILE):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def image_tag(repo: Path, kind: str) -> str:
    return f"fusionbench-{kind}:{image_hash(repo, kind)[:16]}"


#: The `fusionbench run` options the launcher reads or replaces, which may come as `--out=PATH`.
PATH_OPTIONS = ("--out", "--cache-dir", "--resume")


def split_options(args: list[str]) -> list[str]:
    """`--out=PATH` as `--out PATH` (and so for each of PATH_OPTIONS), everything else as it is."""
    out: list[str] = []
    for arg in args:
        name, equals, value = arg.partition("=")
        out += [name, value] if equals and name in PATH_OPTIONS else [arg]
    return out


def container_arguments(args: list[str], repo: Path, results: Path) -> list[str]:
    """The `fusionbench run` arguments as the container sees them: the scenario file relative to
    the mounted repository, bundles under the mounted results directory, the cache mounted."""
    out: list[str] = []
    resumed: Path | None = None
    chosen = False  # --cache-dir given (--no-cache is kept in `out`)
    rest = iter(split_options(args))
    for arg in rest:
        if arg in ("--out", "--cache-dir"):
            chosen = chosen or arg == "--cache-dir"
            next(rest, None)  # replaced by the mounts below
        elif arg == "--resume":
            run_dir = resumed = Path(next(rest, "")).resolve()
            if not run_dir.is_relative_to(results):
                raise ConfigError(f"--resume {run_dir}: in a container a bundle must be under the results directory {results}; "
                                  f"name its folder with --out {run_dir.parent}")
            out += ["--resume", f"{RESULTS_MOUNT}/{run_dir.relative_to(results).as_posix()}"]
        elif arg.lower().endswith((".yaml", ".yml")) and not arg.startswith("-"):  # as run.sh takes it
            path = Path(arg).resolve()
            if not path.is_relative_to(repo):
                raise ConfigError(f"{arg}: in a container the scenario file must be inside the repository {repo}")
            out.append(path.relative_to(repo).as_posix())
        else:
            out.append(arg)
    no_cache = "--no-cache" in out or (resumed is not None and not chosen and made_without_the_cache(resumed))
    into = [] if "--resume" in out else ["--out", RESULTS_MOUNT]  # a resume writes into its bundle
    return ["run", *out, *into, *(["--no-cache"] if no_cache and "--no-cache" not in out else []),
            *([] if no_cache else ["--cache-dir", CACHE_MOUNT])]


def made_without_the_cache(run_dir: Path) -> bool:
    """Whether the bundle at `run_dir` says its run was made with `--no-cache` (bundle.json's
    `artifact_cache` null): its resume, given neither cache option, runs without the cache, as a
    resume outside a container does. A bundle that cannot be read so is left to the run inside,
    which refuses it with the reason."""
    header = _stored_header(run_dir)
    return header is not None and "artifact_cache" in header and header["artifact_cache"] is None


def _stored_header(run_dir: Path) -> dict[str, Any] | None:
    """The bundle.json of the bundle at `run_dir` as stored (bounded, a regular file only), or None
    where it cannot be read so: the run inside then refuses the bundle with the reason."""
    from harness.bundle.files import HEADER
    from harness.bundle.safe_json import MAX_JSON_BYTES, parse_json
    from harness.bundle.snapshot import Snapshot
    from harness.errors import BundleError

    try:
        header = parse_json(Snapshot(run_dir).text(HEADER, max_bytes=MAX_JSON_BYTES), HEADER)
    except (BundleError, OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


#: The harness's own settings a run reads from its environment, passed into the image as they are here.
HARNESS_VARIABLES = ("FUSIONBENCH_NOISE_PROBE_S", "FUSIONBENCH_PEAK_COPY_MIB", "FUSIONBENCH_NCU")


_HOST_TOOLKIT = ("CUDA_HOME", "CUDA_PATH")


def passed_variables(args: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` the run in the image gets, as a native run would see them: the
    harness's own settings (HARNESS_VARIABLES), and each the scenario's `env:` names without a
    value (`NAME` passes the value where the run starts; the run's whitelist keeps every other
    variable from the cells, here as natively). The scenario is the file `args` name, or the one
    the bundle they resume stores; one that cannot be read passes none (the run inside refuses it)."""
    named = [*HARNESS_VARIABLES, *_named_variables(args)]
    return {name: environ[name] for name in named if name in environ}


def left_behind(environ: Mapping[str, str], given: Mapping[str, str]) -> list[str]:
    """The variables of `environ` that can move a figure and that the run in the image, whose
    environment is `given` (the request's), does not get (`OMP_NUM_THREADS=4 ./run.sh --container
    cpu ...` with no `env: [OMP_NUM_THREADS]`, or a CUDA_VISIBLE_DEVICES, which a native worker
    inherits), as a native run names those its cells do not get; not the host's CUDA toolkit's
    folder, which the image has its own of."""
    from harness.run.unseen_environment import moves_figures

    return sorted(name for name in environ if moves_figures(name) and name not in given and name not in _HOST_TOOLKIT)


def _named_variables(args: list[str]) -> list[str]:
    """The names a scenario's `env:` passes on from where the run starts (its items without `=`)."""
    rest = split_options(args)
    resumed = _option(rest, "--resume")
    if resumed is not None:
        header = _stored_header(Path(resumed))
        scenario = header.get("scenario") if header is not None else None
        env = scenario.get("env") if isinstance(scenario, dict) else None
    else:
        from harness.scenario import loading

        path = next((a for a in rest if a.lower().endswith((".yaml", ".yml")) and not a.startswith("-")), None)
        try:
            env = loading.load(Path(path)).env if path is not None else None
        except (HarnessError, OSError):
            env = None
    from harness.scenario.schema import passed_on

    return passed_on(env)


def _option(args: list[str], name: str) -> str | None:
    args = split_options(args)
    for i, arg in enumerate(args[:-1]):
        if arg == name:
            return args[i + 1]
    return None


def mountable(folder: Path, option: str) -> Path:
    """`folder` resolved, once it is known not to be the host's root or a system folder (it is
    mounted read-write into the container); ConfigError otherwise, before anything is created."""
    why = system_folder(folder)
    if why:
        raise ConfigError(f"{option} {why}: the container would get it read-write; give a folder of its own")
    return folder.resolve()


def invoking_user(environ: dict[str, str] | None = None) -> str:
    """`uid:gid` the container runs as: the calling user's, and under sudo the user who called sudo
    (so the results are theirs, and root's only where root itself called)."""
    environ = dict(os.environ) if environ is None else environ
    if os.getuid() == 0 and environ.get("SUDO_UID", "").isdigit() and environ.get("SUDO_GID", "").isdigit():
        return f"{environ['SUDO_UID']}:{environ['SUDO_GID']}"
    return f"{os.getuid()}:{os.getgid()}"


def connect() -> Any:
    """A client of the engine DOCKER_HOST (else the usual socket) names, or ContainerError."""
    import docker

    return _client(docker.from_env)


def _client(make_client: Callable[[], Any]) -> Any:
    try:
        client = make_client()
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests' and socket errors alike
        refusal = refused(socket_of(os.environ))
        if refusal:  # an engine runs there: starting another would not help, and needs root
            raise ContainerError(refusal) from None
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ContainerError(
            f"no Docker engine is reachable ({first}); start one of fusionbench's own with ./run.sh engine start "
            "(Linux, root), or run natively instead: ./run.sh SCENARIO.yaml"
        ) from None
    return client


def image_source(client: Any, wanted: str, write: Callable[[str], object]) -> str:
    """"registry" (the Dockerfile on the pinned base) or "debian" (no registry): `wanted`, or
    for "auto" whether the pinned base is here or can be pulled."""
    if wanted != "auto":
        return wanted
    from docker.errors import ImageNotFound

    try:
        client.images.get(REGISTRY_BASE)
        return "registry"
    except ImageNotFound:
        pass
    try:
        client.images.pull(REGISTRY_BASE)
        return "registry"
    except Exception as exc:  # noqa: BLE001 - no registry, no DNS, a proxy: all mean the same here
        said = str(getattr(exc, "explanation", None) or exc).strip()  # the engine's own words, where it gave them
        first = (said.splitlines() or [type(exc).__name__])[0][:160]
        write(f"fusionbench: the pinned base cannot be pulled ({first}): building with no registry\n")
        return "debian"


def ensure_image(client: Any, repo: Path, kind: str, write: Callable[[str], object], *, cache: Path,
                 source: str = "auto") -> Any:
    """The image to run: one already built from this commit's recipe (either way), else built now."""
    tags = {"registry": [image_tag(repo, kind)], "debian": [image_build.image_tag(repo, kind)]}
    found = image_build.existing(client, tags["registry"] + tags["debian"] if source == "auto" else tags[source])
    if found is not None:
        write(f"fusionbench: {recipe_tag(found, repo, kind)} is built already from this checkout's recipe: "
              "nothing to build\n")
        return found
    if image_source(client, source, write) == "debian":
        write(f"fusionbench: building {tags['debian'][0]} with no registry (first use of this recipe; "
              "several GB and minutes)\n")
        return image_build.build(client, repo, kind, cache, write)
    return _build_from_dockerfile(client, repo, kind, write)


def recipe_tag(image: Any, repo: Path, kind: str) -> str:
    """The tag of this checkout's recipe that `image` carries. Two recipes can build the same image
    (a change that leaves every layer as it was, like moving the builder's code): the engine then
    holds one image under both tags, and the first it lists may be the older recipe's."""
    ours = (image_tag(repo, kind), image_build.image_tag(repo, kind))
    tags = list(image.tags or [])
    return next((tag for tag in ours if tag in tags), tags[0] if tags else str(image.id))


def _build_from_dockerfile(client: Any, repo: Path, kind: str, write: Callable[[str], object]) -> Any:
    tag = image_tag(repo, kind)
    write(f"fusionbench: building {tag} from {DOCKERFILE} (first use of this lock; this takes a while)\n")
    build_args = {"KIND": kind, "LOCK_SHA256": image_hash(repo, kind), "HARNESS_VERSION": harness.__version__,
                  "TENSORRT": "on" if kind == "cuda" else "off"}
    for chunk in client.api.build(path=str(repo), dockerfile=DOCKERFILE, tag=tag, buildargs=build_args,
                                  decode=True, rm=True):
        if "error" in chunk:
            raise ContainerError(f"building {tag} failed: {str(chunk['error']).strip()[:300]}")
        if chunk.get("stream"):
            write(chunk["stream"])
    return client.images.get(tag)


def run_request(kind: str, image: Any, args: list[str], repo: Path, results: Path, cache: Path,
                environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The keyword arguments of `containers.run` for a cell run (kept apart so tests read them);
    `environ` (default: this process's) gives the variables `passed_variables` passes in. The
    cache is mounted only where the run uses it (not under --no-cache)."""
    from docker.types import DeviceRequest

    digests = image.attrs.get("RepoDigests") or []
    layers = (image.attrs.get("RootFS") or {}).get("Layers") or []
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    base = labels.get("io.fusionbench.base") or f"registry {REGISTRY_BASE}"
    environment = {
        # first: a name the scenario passes on never replaces the launcher's own below (HOME, the image record)
        **passed_variables(args, os.environ if environ is None else environ),
        "FUSIONBENCH_IMAGE": recipe_tag(image, repo, kind),
        "FUSIONBENCH_IMAGE_ID": image.id,
        "FUSIONBENCH_IMAGE_DIGEST": digests[0] if digests else image.id,
        "FUSIONBENCH_IMAGE_LAYERS": ",".join(layers),
        "FUSIONBENCH_IMAGE_BASE": base,
        "FUSIONBENCH_IMAGE_TENSORRT": labels.get("io.fusionbench.tensorrt") or ("on" if kind == "cuda" else "off"),
        "HOME": "/tmp",
        # The mounted checkout belongs to another user inside: let git read its commit anyway.
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": REPO_MOUNT,
    }
    command = container_arguments(args, repo, results)
    volumes = {str(repo): {"bind": REPO_MOUNT, "mode": "ro"}, str(results): {"bind": RESULTS_MOUNT, "mode": "rw"}}
    if "--no-cache" not in command:
        volumes[str(cache)] = {"bind": CACHE_MOUNT, "mode": "rw"}
    request: dict[str, Any] = {
        "image": image.id,
        "command": command,
        "user": invoking_user(),
        "volumes": volumes,
        "working_dir": REPO_MOUNT,
        "environment": environment,
        "network_mode": "none",
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if kind == "cuda":
        request["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return request


def launch(kind: str, args: list[str], *, repo: Path, cache: Path, make_client: Callable[[], Any] | None = None,
           write: Callable[[str], object] = sys.stdout.write, own_engine: OwnEngine | None = None) -> int:
    """Build the image if needed, run `fusionbench run ARGS` in it, stream its output, return its
    exit code. `cache` is the artifact cache to mount unless ARGS name one with --cache-dir. Where
    no engine answers, `own_engine` (by default the one this machine can start, for the real Docker
    SDK only) is started for the run and stopped after it."""
    if kind not in KINDS:
        raise ConfigError(f"--container {kind!r}; allowed: {', '.join(KINDS)}")
    if make_client is None:
        import docker

        make_client = docker.from_env
        own_engine = own_engine or own_engine_here(write)
    repo = repo.resolve()
    results = mountable(Path(_option(args, "--out") or "results"), "--out")
    cache = mountable(Path(_option(args, "--cache-dir") or cache), "--cache-dir")
    container_arguments(args, repo, results)  # a path the container cannot see fails here, not in it
    started = False
    try:
        try:
            client = _client(make_client)  # before anything is created
        except ContainerError:
            if own_engine is None:
                raise
            write("fusionbench: no Docker engine answers; starting one of fusionbench's own for this run\n")
            started = own_engine.start()
            client = _client(make_client)
        return _run_in_image(client, kind, args, repo, results, cache, write)
    finally:
        if started and own_engine is not None:
            own_engine.stop()


class HostPaths:
    """Passes the container's output on line by line with its mount points (`/work/results/...`)
    written as the host folders they are, so a printed bundle path is one the user can open."""

    def __init__(self, write: Callable[[str], object], mounts: dict[str, Path]) -> None:
        self._write, self._mounts, self._pending = write, mounts, ""

    def write(self, text: str) -> None:
        *complete, self._pending = (self._pending + text).split("\n")
        if complete:
            self._write(self._host("\n".join(complete) + "\n"))

    def flush(self) -> None:
        if self._pending:
            self._write(self._host(self._pending))
            self._pending = ""

    def _host(self, text: str) -> str:
        for mount, folder in self._mounts.items():
            text = text.replace(mount + "/", f"{folder}/")
        return text


def _run_in_image(client: Any, kind: str, args: list[str], repo: Path, results: Path, cache: Path,
                  write: Callable[[str], object]) -> int:
    from harness.run.preflight import MadeFolders

    image = ensure_image(client, repo, kind, write, cache=image_build.default_build_cache())
    request = run_request(kind, image, args, repo, results, cache)
    unseen = left_behind(os.environ, request["environment"]) if "--dry-run" not in args else []
    if unseen:
        from harness.run.unseen_environment import warning

        write(f"fusionbench: warning: {warning(unseen, 'the run in the image gets only the variables the scenario names')}\n")
    # The folders mounted read-write that are not there are made before the run (the engine would
    # make them root's); a dry run writes nothing, so those it made go again, as a native dry run
    # leaves none.
    made = MadeFolders()
    for host, mount in request["volumes"].items():
        if mount["mode"] == "rw":
            made.note(Path(host))
            Path(host).mkdir(parents=True, exist_ok=True)
    try:
        return _run_container(client, request, results, cache, write)
    finally:
        if "--dry-run" in args:
            made.remove_left_empty()


def _run_container(client: Any, request: dict[str, Any], results: Path, cache: Path,
                   write: Callable[[str], object]) -> int:
    container = client.containers.run(**request)
    lines = HostPaths(write, {RESULTS_MOUNT: results, CACHE_MOUNT: cache})
    shown = 0  # bytes of the container's output written so far
    try:
        for chunk in container.logs(stream=True, follow=True):
            shown += len(chunk)
            lines.write(chunk.decode(errors="replace"))
        lines.flush()
        return int(container.wait().get("StatusCode", 1))
    except KeyboardInterrupt as stop:
        container.kill(signal="SIGINT")
        container.wait()
        # what the run inside said as it stopped ("interrupted: ... complete with --resume ..."), which
        # the stream cut by Ctrl-C no longer carried
        lines.write(container.logs(stream=False, follow=False)[shown:].decode(errors="replace"))
        lines.flush()
        return interrupted_exit_code(stop)
    finally:
        container.remove(force=True)
