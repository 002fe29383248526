"""Build an image with no registry and nothing fetched inside it, bit for bit the same from the same
commit: `fusionbench image build cpu|cuda`, and `./run.sh --container` where no registry answers.

Three layers, each written by harness/container/image_tar.py (sorted, times clamped to the base lock's
SOURCE_DATE_EPOCH, owners numeric) and put together with a config that holds no build time
(harness/container/image_archive.py), then handed to the engine with `docker load`:
1. the base: Debian from its own packages (harness/container/image_base.py, containers/base-debian.lock),
   with Python 3.11 and its headers, gcc, g++ and git; kept in the cache by the lock's hash;
2. the Python packages of containers/requirements-KIND.lock: their wheels are gathered on the host
   first (`pip download --require-hashes`, into the cache's wheelhouse; checked against the lock's
   SHA-256), then installed in a container of the base with no network (`--no-index`), byte-compiled
   with hash-based .pyc (PEP 552) and PYTHONHASHSEED=0, so no timestamp or hash seed gets in;
3. the harness's distribution metadata only (its backends' entry points, read from pyproject.toml):
   the harness that runs is the repository mounted at /work/repo, so no harness code is copied
   into the image and the layer follows from pyproject.toml alone.
The wheelhouse stays on the host: the image holds no wheel, no pip cache and no host certificate.
The tag's hash covers the locks (packages and base), pyproject.toml and this recipe's own code
(`image_hash`); the image records the base and TensorRT in its labels.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from harness.container import image_base, image_tar, wheelhouse
from harness.container.image_archive import Layer, config, image_id, write_archive
from harness.errors import HarnessError

PYTHON_LIB = "usr/local/lib/python3.11"
LOAD_TIMEOUT_S = 3600
IMAGE_CACHE_VARIABLE = "FUSIONBENCH_IMAGE_CACHE"
RECIPE = (Path(__file__), Path(image_tar.__file__), Path(image_base.__file__),
          Path(__file__).with_name("image_archive.py"), Path(wheelhouse.__file__))
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPATH": "/work/repo",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
}
#: pip and compileall in a container of the base: install the wheels under /out with no index and
#: no .pyc, then byte-compile what was installed with hash-based .pyc whose paths are the image's.
#: Debian's Python puts prefix /usr's packages in /usr/local/lib/python3.11/dist-packages.
INSTALL = ("set -e; python3 -m pip install --no-index --no-deps --no-cache-dir --no-compile --break-system-packages "
           "--disable-pip-version-check --root /out --prefix /usr --require-hashes --find-links /wheels "
           "-r /lock/requirements.lock; "
           "python3 -m compileall -q -q -j 0 --invalidation-mode unchecked-hash -s /out -p / /out/usr/local || true")


class ImageBuildError(HarnessError):
    """The image could not be built; nothing is tagged."""

    exit_code = 2


def default_build_cache() -> Path:
    """Where builds keep the base's layer and the wheelhouse: $FUSIONBENCH_IMAGE_CACHE, else
    $XDG_CACHE_HOME/fusionbench-images (or ~/.cache/...), apart from the artifact cache that
    containers see."""
    if os.environ.get(IMAGE_CACHE_VARIABLE):
        return Path(os.environ[IMAGE_CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fusionbench-images"


def lock_file(repo: Path, kind: str) -> Path:
    return repo / "containers" / f"requirements-{kind}.lock"


def base_lock(repo: Path) -> Path:
    return repo / "containers" / image_base.LOCK_NAME


def image_hash(repo: Path, kind: str) -> str:
    """SHA-256 over what decides the image's content: its kind, the package and base locks,
    pyproject.toml (the entry points) and this recipe's code."""
    digest = hashlib.sha256(f"debian-base:{kind}".encode())
    for path in (lock_file(repo, kind), base_lock(repo), repo / "pyproject.toml", *RECIPE):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def image_tag(repo: Path, kind: str) -> str:
    return f"fusionbench-{kind}:{image_hash(repo, kind)[:16]}"


def labels(repo: Path, kind: str) -> dict[str, str]:
    lock = base_lock(repo)
    return {
        "org.opencontainers.image.title": f"FusionBench ({kind})",
        "org.opencontainers.image.description": "MLPerf-style harness measuring what kernel fusion does to models",
        "org.opencontainers.image.version": harness.__version__,
        "io.fusionbench.kind": kind,
        "io.fusionbench.lock-sha256": hashlib.sha256(lock_file(repo, kind).read_bytes()).hexdigest(),
        "io.fusionbench.base": f"debian {image_base.BaseLock.parse(lock.read_text()).suite} (mmdebstrap, "
                               f"{lock.name} sha256 {hashlib.sha256(lock.read_bytes()).hexdigest()[:16]})",
        "io.fusionbench.tensorrt": "off",  # its libraries come from NVIDIA's index only
    }


class Steps:
    """Says each step as it starts, with the seconds since the build began."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self.write, self.started = write, time.monotonic()

    def say(self, text: str) -> None:
        self.write(f"fusionbench: [{time.monotonic() - self.started:6.1f} s] {text}\n")


def _load(client: Any, layers: list[Layer], config_bytes: bytes, tag: str) -> str:
    """Stream the archive to the engine through a pipe; return the loaded image's id."""
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def writer() -> None:
        try:
            with os.fdopen(write_fd, "wb") as out:
                write_archive(out, layers, config_bytes, tag)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            failure.append(exc)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    waited = client.api.timeout
    client.api.timeout = LOAD_TIMEOUT_S  # the engine answers once it has stored every layer: minutes for GBs
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            for message in client.api.load_image(pipe):
                if "error" in message:
                    raise ImageBuildError(f"the engine refused the image: {str(message['error'])[:300]}")
    finally:
        client.api.timeout = waited
    thread.join()
    if failure:
        raise ImageBuildError(f"writing the image archive failed: {failure[0]}")
    loaded = client.images.get(tag)
    return str(loaded.id)


def _in_base(client: Any, base_name: str, command: str, mounts: dict[str, dict[str, str]], epoch: int) -> None:
    """Run `command` (sh -c) in a container of the base with no network, as the calling user."""
    container = client.containers.run(
        base_name, [command], entrypoint=["sh", "-c"], network_mode="none", detach=True, user=f"{os.getuid()}:{os.getgid()}",
        environment={"HOME": "/tmp", "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": str(epoch)}, volumes=mounts)
    try:
        code = int(container.wait().get("StatusCode", 1))
        if code != 0:
            log = container.logs().decode(errors="replace").strip().splitlines()[-8:]
            raise ImageBuildError(f"`{command[:80]}...` in the base failed (exit {code}): " + " | ".join(log))
    finally:
        container.remove(force=True)


def build(client: Any, repo: Path, kind: str, cache: Path, write: Callable[[str], object]) -> Any:
    """Build `image_tag(repo, kind)` as described above and return the loaded image."""
    steps = Steps(write)
    tag = image_tag(repo, kind)
    lock = image_base.BaseLock.parse(base_lock(repo).read_text())
    layer_file, digest_file = base_files(repo, cache)
    layer_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fusionbench-image-", dir=cache) as scratch_name:
        scratch = Path(scratch_name)
        if not layer_file.exists() or not digest_file.exists():
            partial = layer_file.with_name(layer_file.name + ".partial")
            diff_id = make_base(lock, scratch, partial, steps)
            partial.rename(layer_file)
            digest_file.write_text(diff_id)
        base_layer = Layer(layer_file, digest_file.read_text().strip(), base_history(lock))
        layers = upper_layers(client, repo, kind, cache, scratch, base_layer, steps, keep=True)
        image_config = image_config_bytes(repo, kind, lock, layers)
        steps.say(f"loading {tag} into the engine")
        loaded = _load(client, layers, image_config, tag)
        if loaded != image_id(image_config):
            raise ImageBuildError(f"the engine gave {tag} the id {loaded}, not the config's {image_id(image_config)}")
        steps.say(f"built {tag} ({loaded}); layers {', '.join(layer.diff_id[:19] for layer in layers)}")
    return client.images.get(tag)


def make_base(lock: image_base.BaseLock, scratch: Path, out: Path, steps: Steps) -> str:
    """mmdebstrap's base, rewritten as a layer at `out`; its diff_id."""
    steps.say(f"building the base from Debian's packages ({lock.suite}, {len(lock.packages)} packages; about a minute)")
    raw = scratch / "base.tar"
    image_base.build(lock, raw)
    diff_id = image_tar.write_from_tar(raw, out, lock.source_date_epoch, leave_out=["dev"])
    raw.unlink()
    return diff_id


def base_history(lock: image_base.BaseLock) -> str:
    return f"mmdebstrap {lock.suite} ({image_base.LOCK_NAME})"


def upper_layers(client: Any, repo: Path, kind: str, cache: Path, scratch: Path, base_layer: Layer, steps: Steps, *,
                  keep: bool) -> list[Layer]:
    """The base loaded where the engine lacks it, then the packages and metadata layers on it: kept
    in `scratch` for loading (`keep`), else only hashed."""
    lock = image_base.BaseLock.parse(base_lock(repo).read_text())
    epoch = lock.source_date_epoch
    base_name = base_tag(base_layer.diff_id)
    if existing(client, [base_name]) is None:
        steps.say(f"loading the base into the engine as {base_name}")
        base_config = config([base_layer], epoch=epoch, env=ENV, entrypoint=["python3"], user="0:0", working_dir="/",
                             labels={"io.fusionbench.base": labels(repo, kind)["io.fusionbench.base"]})
        _load(client, [base_layer], base_config, base_name)

    steps.say(f"gathering the wheels of {lock_file(repo, kind).name} on the host (hash-checked)")
    wheels = cache / "wheelhouse"
    wheelhouse.gather(lock_file(repo, kind), wheels)

    steps.say("installing the packages in a container of the base (no network, no index)")
    packages, project = scratch / "packages", scratch / "project"
    packages.mkdir()
    shutil.copy(lock_file(repo, kind), scratch / "requirements.lock")
    _in_base(client, base_name, INSTALL,
             {str(wheels): {"bind": "/wheels", "mode": "ro"}, str(scratch): {"bind": "/lock", "mode": "ro"},
              str(packages): {"bind": "/out", "mode": "rw"}}, epoch)
    steps.say("writing the packages layer" if keep else "hashing the packages layer")
    out = scratch / "packages.tar" if keep else Path(os.devnull)
    packages_layer = Layer(out, image_tar.write_from_directory(packages, out, epoch, owner=(0, 0)),
                           f"pip install --no-index --require-hashes -r {lock_file(repo, kind).name}")
    if not keep:
        shutil.rmtree(packages)

    steps.say("writing the harness's metadata layer (its backends' entry points)")
    write_project_metadata(repo / "pyproject.toml", project)
    out = scratch / "project.tar" if keep else Path(os.devnull)
    project_layer = Layer(out, image_tar.write_from_directory(project, out, epoch, owner=(0, 0)),
                          "fusionbench's distribution metadata (pyproject.toml)")
    return [base_layer, packages_layer, project_layer]


def image_config_bytes(repo: Path, kind: str, lock: image_base.BaseLock, layers: list[Layer]) -> bytes:
    return config(layers, epoch=lock.source_date_epoch, env=ENV, entrypoint=["python3", "-m", "harness.cli"],
                  user="1000:1000", working_dir="/work/repo", labels=labels(repo, kind))


def forget(client: Any, repo: Path, kind: str, cache: Path) -> None:
    """Remove this recipe's image and the base (its cached layer and its image), so that the next
    build makes them again from nothing but the locks and the wheels."""
    from docker.errors import ImageNotFound

    layer, diff_file = base_files(repo, cache)
    tags = [image_tag(repo, kind)]
    if diff_file.exists():
        tags.append(base_tag(diff_file.read_text().strip()))
    for name in tags:
        try:
            client.images.remove(name, force=True)
        except ImageNotFound:
            pass
    layer.unlink(missing_ok=True)
    diff_file.unlink(missing_ok=True)


def base_files(repo: Path, cache: Path) -> tuple[Path, Path]:
    """The cached base's layer tar and the file holding its diff_id, named by the base lock and
    the code that writes the layer."""
    key = hashlib.sha256(base_lock(repo).read_bytes() + Path(image_tar.__file__).read_bytes()).hexdigest()[:16]
    layer = cache / "image-bases" / f"{key}.layer.tar"
    return layer, layer.with_suffix(".diff_id")


def base_tag(diff_id: str) -> str:
    return f"fusionbench-base:{diff_id.removeprefix('sha256:')[:16]}"


def write_project_metadata(pyproject: Path, root: Path) -> None:
    """The project's dist-info (name, version, entry points) under `root` as Debian's Python finds
    it in /usr/local: what `importlib.metadata` reads to find the backends and the console script."""
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    info = root / f"{PYTHON_LIB}/dist-packages/{project['name']}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
                    f"Summary: {project.get('description', '')}\n",
        "entry_points.txt": "".join(f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in sorted(points.items()))
                                    + "\n" for group, points in sorted(groups.items()) if points),
        "INSTALLER": "fusionbench image build\n",
    }
    for name, text in files.items():
        (info / name).write_text(text)
    record = [f"{info.name}/{name},sha256={_urlsafe_digest(text.encode())},{len(text.encode())}" for name, text in files.items()]
    (info / "RECORD").write_text("\n".join(sorted([*record, f"{info.name}/RECORD,,"])) + "\n")


def _urlsafe_digest(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def existing(client: Any, tags: list[str]) -> Any | None:
    """The first of `tags` the engine has, or None."""
    from docker.errors import ImageNotFound

    for tag in tags:
        try:
            return client.images.get(tag)
        except ImageNotFound:
            continue
    return None
