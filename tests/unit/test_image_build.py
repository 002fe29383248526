"""The registry-less image recipe's parts, on files made here (no engine, no mmdebstrap): layers
that depend on content only, a config and id with no build time in them, the base's lock, and a
tag whose hash covers everything the image is made from, and the comparison `image verify` prints.
tests/integration/test_container_image.py builds the image again for real where an engine answers."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from harness.container import image_base, image_build, image_tar, image_verify, wheelhouse
from harness.container.image_archive import Layer, config, image_id, write_archive

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000


def tree(root: Path, mtime: int, order: list[str]) -> Path:
    """A small tree: files written in `order`, every time set to `mtime`, one hard link."""
    contents = {"usr/local/bin/tool": b"#!/usr/bin/python3\n", "usr/local/lib/a.py": b"A = 1\n",
                "usr/local/lib/b/c.py": b"C = 2\n"}
    for name in order:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(contents[name])
    (root / "usr/local/bin/tool").chmod(0o755)
    os.link(root / "usr/local/lib/a.py", root / "usr/local/lib/a-again.py")
    (root / "usr/local/lib/link").symlink_to("a.py")
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return root


def test_a_layer_depends_on_content_only(tmp_path: Path) -> None:
    names = ["usr/local/bin/tool", "usr/local/lib/a.py", "usr/local/lib/b/c.py"]
    first = tree(tmp_path / "one", EPOCH + 5000, names)
    second = tree(tmp_path / "two", EPOCH + 9000, list(reversed(names)))  # later, and made in another order
    digest = image_tar.write_from_directory(first, tmp_path / "one.tar", EPOCH, owner=(0, 0))
    assert image_tar.write_from_directory(second, tmp_path / "two.tar", EPOCH, owner=(0, 0)) == digest
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    with tarfile.open(tmp_path / "one.tar") as layer:
        members = layer.getmembers()
    names_in = [m.name for m in members]
    assert names_in == sorted(names_in, key=lambda n: n.split("/")), names_in
    assert all(m.mtime == EPOCH and (m.uid, m.gid) == (0, 0) and not m.uname and not m.pax_headers for m in members)
    first_of_two = next(m for m in members if m.name == "usr/local/lib/a-again.py")  # sorted first: the file
    link = next(m for m in members if m.name == "usr/local/lib/a.py")
    assert first_of_two.isreg() and link.islnk() and link.linkname == "usr/local/lib/a-again.py"
    assert next(m for m in members if m.name == "usr/local/lib/link").linkname == "a.py"
    assert next(m for m in members if m.name == "usr/local/bin/tool").mode & 0o777 == 0o755


def test_content_and_older_times_still_count(tmp_path: Path) -> None:
    names = ["usr/local/bin/tool", "usr/local/lib/a.py", "usr/local/lib/b/c.py"]
    base = image_tar.write_from_directory(tree(tmp_path / "one", EPOCH, names), tmp_path / "one.tar", EPOCH)
    changed = tree(tmp_path / "two", EPOCH, names)
    (changed / "usr/local/lib/a.py").write_bytes(b"A = 3\n")
    os.utime(changed / "usr/local/lib/a.py", (EPOCH, EPOCH))
    assert image_tar.write_from_directory(changed, tmp_path / "two.tar", EPOCH) != base
    older = tree(tmp_path / "three", EPOCH - 86400, names)  # a file older than the epoch keeps its time
    assert image_tar.write_from_directory(older, tmp_path / "three.tar", EPOCH) != base


def test_a_tar_is_rewritten_sorted_clamped_and_without_devices(tmp_path: Path) -> None:
    source = tmp_path / "source.tar"
    with tarfile.open(source, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mtime in (("./usr/b", b"b", EPOCH + 10), ("./usr/a", b"a", EPOCH - 10), ("./usr/b", b"B", EPOCH)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uname = len(data), mtime, "someone"
            tar.addfile(info, io.BytesIO(data))
        for name, kind in (("./dev", tarfile.DIRTYPE), ("./dev/null", tarfile.CHRTYPE), ("./usr", tarfile.DIRTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.mtime = kind, EPOCH + 99
            tar.addfile(info)
    digest = image_tar.write_from_tar(source, tmp_path / "layer.tar", EPOCH, leave_out=["dev"])
    with tarfile.open(tmp_path / "layer.tar") as layer:
        members = {m.name: m for m in layer.getmembers()}
        assert list(members) == ["dev", "usr", "usr/a", "usr/b"]
        assert layer.extractfile("usr/b").read() == b"B"  # type: ignore[union-attr]  # the later entry wins
    assert members["usr/a"].mtime == EPOCH - 10 and members["usr/b"].mtime == EPOCH and members["dev"].mtime == EPOCH
    assert all(not m.uname for m in members.values())
    assert digest == "sha256:" + __import__("hashlib").sha256((tmp_path / "layer.tar").read_bytes()).hexdigest()


def test_the_config_and_id_hold_no_build_time(tmp_path: Path) -> None:
    layers = [Layer(tmp_path / "x.tar", "sha256:" + "a" * 64, "base"), Layer(tmp_path / "y.tar", "sha256:" + "b" * 64, "pip")]
    settings = dict(epoch=EPOCH, env={"B": "2", "A": "1"}, entrypoint=["python3"], user="1000:1000", working_dir="/w",
                    labels={"z": "1", "a": "2"})
    first = config(layers, **settings)  # type: ignore[arg-type]
    assert config(layers, **{**settings, "env": {"A": "1", "B": "2"}}) == first  # type: ignore[arg-type]
    document = json.loads(first)
    assert document["created"] == "2023-11-14T22:13:20Z" == document["history"][0]["created"]
    assert document["rootfs"]["diff_ids"] == [layer.diff_id for layer in layers]
    assert document["config"]["Env"] == ["A=1", "B=2"] and document["config"]["User"] == "1000:1000"
    assert image_id(first).startswith("sha256:") and image_id(first) != image_id(config(layers[:1], **settings))  # type: ignore[arg-type]


def test_the_archive_names_the_config_and_layers_docker_load_reads(tmp_path: Path) -> None:
    (tmp_path / "x.tar").write_bytes(b"\0" * 1024)
    layers = [Layer(tmp_path / "x.tar", "sha256:" + "c" * 64, "base")]
    body = config(layers, epoch=EPOCH, env={}, entrypoint=["python3"], user="0:0", working_dir="/", labels={})
    out = io.BytesIO()
    write_archive(out, layers, body, "fusionbench-cpu:test")
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as archive:
        manifest = json.loads(archive.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert manifest == [{"Config": f"{image_id(body)[7:]}.json", "RepoTags": ["fusionbench-cpu:test"],
                             "Layers": ["c" * 64 + "/layer.tar"]}]
        assert archive.extractfile(manifest[0]["Config"]).read() == body  # type: ignore[union-attr]
        assert archive.extractfile("c" * 64 + "/layer.tar").read() == b"\0" * 1024  # type: ignore[union-attr]


def test_the_base_lock_reads_back_what_it_wrote() -> None:
    text = (REPO / "containers" / image_base.LOCK_NAME).read_text()
    lock = image_base.BaseLock.parse(text)
    assert lock.render() == text and lock.suite == "bookworm" and lock.source_date_epoch > 0
    assert {"python3", "python3-dev", "gcc", "g++", "git"} <= set(lock.include)
    assert any(name.startswith("python3.11:") for name in lock.packages)
    pinned = lock.pinned_includes()
    assert all("=" in item for item in pinned) and len(pinned) == len(lock.include)


def test_a_malformed_base_lock_is_refused_with_its_line() -> None:
    with pytest.raises(image_base.BaseImageError, match="line 2: 'not a pin'"):
        image_base.BaseLock.parse("suite: bookworm\nnot a pin\n")
    with pytest.raises(image_base.BaseImageError, match="missing mirror"):
        image_base.BaseLock.parse("suite: bookworm\nsource-date-epoch: 1\ninclude: python3\npython3:amd64=1\n")


def test_the_built_base_is_checked_against_the_lock() -> None:
    status = ("Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n"
              "Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n\n"
              "Package: tzdata\nStatus: install ok installed\nArchitecture: all\nVersion: 2025b\n")
    built = image_base.installed_packages(status)
    assert built == {"python3:amd64": "3.11.2-1+b1", "tzdata:all": "2025b"}
    locked = {"python3:amd64": "3.11.2-1+b2", "gcc:amd64": "4:12.2.0-3", "tzdata:all": "2025b"}
    assert image_base.differences(locked, built) == ["gcc:amd64: locked 4:12.2.0-3, not installed",
                                                     "python3:amd64: locked 3.11.2-1+b2, installed 3.11.2-1+b1"]
    assert image_base.differences(built, built) == []


def test_the_tag_covers_the_locks_pyproject_and_the_recipe(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "containers").mkdir(parents=True)
    for name in ("containers/requirements-cpu.lock", f"containers/{image_base.LOCK_NAME}", "pyproject.toml"):
        shutil.copy(REPO / name, repo / name)
    tag = image_build.image_tag(repo, "cpu")
    assert tag.startswith("fusionbench-cpu:") and len(tag.split(":")[1]) == 16
    for name in ("containers/requirements-cpu.lock", f"containers/{image_base.LOCK_NAME}", "pyproject.toml"):
        original = (repo / name).read_bytes()
        (repo / name).write_bytes(original + b"\n# changed\n")
        assert image_build.image_tag(repo, "cpu") != tag, name
        (repo / name).write_bytes(original)
    assert image_build.image_tag(repo, "cpu") == tag
    assert set(image_build.RECIPE) >= {Path(image_build.__file__), Path(image_tar.__file__), Path(image_base.__file__)}


def test_the_labels_name_the_kind_base_and_tensorrt() -> None:
    labels = image_build.labels(REPO, "cuda")
    assert labels["io.fusionbench.kind"] == "cuda" and labels["io.fusionbench.tensorrt"] == "off"
    assert labels["io.fusionbench.base"].startswith("debian bookworm (mmdebstrap, base-debian.lock sha256 ")


def test_the_metadata_layer_gives_the_backends_entry_points(tmp_path: Path) -> None:
    import importlib.metadata

    image_build.write_project_metadata(REPO / "pyproject.toml", tmp_path)
    site = tmp_path / image_build.PYTHON_LIB / "dist-packages"
    (found,) = importlib.metadata.distributions(path=[str(site)])
    assert found.metadata["Name"] == "fusionbench" and found.version == "0.1.0"
    backends = {point.name: point.value for point in found.entry_points if point.group == "fusionbench.backends"}
    assert backends["inductor"] == "backends.inductor:InductorBackend" and "tvm" in backends
    assert [point.value for point in found.entry_points if point.group == "console_scripts"] == ["harness.cli.main:main"]
    assert not list(site.glob("harness*")) and not list(site.glob("backends*"))  # no code: the mounted repository runs
    first = image_tar.write_from_directory(tmp_path, tmp_path.parent / "one.tar", EPOCH, owner=(0, 0))
    again = tmp_path.parent / "again"
    image_build.write_project_metadata(REPO / "pyproject.toml", again)
    assert image_tar.write_from_directory(again, tmp_path.parent / "two.tar", EPOCH, owner=(0, 0)) == first


@pytest.mark.parametrize("args, said", [(["image", "build"], "image build needs a kind: cpu or cuda"),
                                        (["image", "verify"], "image verify needs a kind: cpu or cuda"),
                                        (["image", "verify", "cpu", "--no-cache"], "image verify always builds from nothing"),
                                        (["image", "lock-base", "cpu"], "image lock-base takes no kind"),
                                        (["engine", "start", "--purge"], "--purge goes with `engine stop`")])
@pytest.mark.slow
def test_the_image_and_engine_commands_refuse_what_they_cannot_do_in_one_line(args: list[str], said: str) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _rebuilt(**changes: object) -> image_verify.Rebuilt:
    fields: dict[str, object] = dict(tag="fusionbench-cpu:0123456789abcdef", held_id="sha256:" + "1" * 64,
                                     built_id="sha256:" + "1" * 64, held_layers=["sha256:" + c * 64 for c in "abc"],
                                     built_layers=["sha256:" + c * 64 for c in "abc"], made_by=["base", "packages", "metadata"])
    fields.update(changes)
    return image_verify.Rebuilt(**fields)  # type: ignore[arg-type]


def test_a_rebuild_is_the_same_only_when_the_id_and_every_layer_are() -> None:
    same = _rebuilt()
    assert same.same and "DIFFERENT" not in "\n".join(same.lines())
    changed = _rebuilt(built_id="sha256:" + "2" * 64, built_layers=["sha256:" + c * 64 for c in "abd"])
    assert not changed.same
    said = changed.lines()
    assert "DIFFERENT" in said[0]
    assert [("DIFFERENT" in line) for line in said[1:]] == [False, False, True] and "metadata" in said[3]
    fewer = _rebuilt(held_layers=["sha256:" + c * 64 for c in "ab"])
    assert not fewer.same and "(none)" in fewer.lines()[3] and "2 layers, the build 3" in fewer.lines()[-1]


def test_verify_refuses_where_the_engine_holds_no_image_of_this_recipe(tmp_path: Path) -> None:
    from docker.errors import ImageNotFound

    class Images:
        def get(self, tag: str) -> object:
            raise ImageNotFound(tag)

    class Client:
        images = Images()

    with pytest.raises(image_build.ImageBuildError, match=r"holds no fusionbench-cpu:\S+ to compare with: build it first"):
        image_verify.rebuild_and_compare(Client(), REPO, "cpu", tmp_path, lambda _: None)
    assert list(tmp_path.iterdir()) == []  # refused before anything was built


def test_verify_refuses_an_image_under_the_tag_that_is_not_a_fusionbench_build(tmp_path: Path) -> None:
    tag = image_build.image_tag(REPO, "cpu")

    class Imported:  # `docker import` of a 24-byte tarball, tagged with the current recipe's tag
        id = "sha256:" + "9" * 64
        attrs: dict[str, object] = {"Config": {"Labels": None}, "RootFS": {"Layers": ["sha256:" + "8" * 64]}}

    class Images:
        def get(self, wanted: str) -> object:
            assert wanted == tag
            return Imported()

    class Client:
        images = Images()

    with pytest.raises(image_build.ImageBuildError, match=rf"tagged {tag} \(sha256:9+\) is not a fusionbench build.*"
                       r"io.fusionbench.base, io.fusionbench.kind, io.fusionbench.lock-sha256.*nothing was rebuilt"):
        image_verify.rebuild_and_compare(Client(), REPO, "cpu", tmp_path, lambda _: None)
    assert list(tmp_path.iterdir()) == []


def test_the_build_cache_can_be_named_apart_from_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(image_build.IMAGE_CACHE_VARIABLE, raising=False)
    assert image_build.default_build_cache() == tmp_path / "xdg" / "fusionbench-images"
    monkeypatch.setenv(image_build.IMAGE_CACHE_VARIABLE, str(tmp_path / "images"))
    assert image_build.default_build_cache() == tmp_path / "images"


def test_a_wheelhouse_that_holds_every_locked_wheel_needs_no_download(tmp_path: Path) -> None:
    import hashlib

    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    one = wheels / "zope_interface-7.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    one.write_bytes(b"wheel one")
    two = wheels / "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.whl"
    two.write_bytes(b"wheel two")
    digest = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (one, two)}
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"# a comment\nzope.interface==7.0 \\\n    --hash=sha256:{'0' * 64} \\\n    --hash=sha256:{digest[one]}\n"
                    f"pyyaml==6.0.2 \\\n    --hash=sha256:{digest[two]}\n")
    assert wheelhouse.locked_hashes(lock.read_text()) == {("zope_interface", "7.0"): {"0" * 64, digest[one]},
                                                          ("pyyaml", "6.0.2"): {digest[two]}}
    assert wheelhouse.holds(lock, wheels)
    two.write_bytes(b"a wheel changed since")  # a listed hash no longer matches: pip gathers them again
    assert not wheelhouse.holds(lock, wheels)
    two.unlink()
    assert not wheelhouse.holds(lock, wheels)
    assert not wheelhouse.holds(lock, tmp_path / "absent")
    with pytest.raises(wheelhouse.WheelhouseError, match="pins every requirement with =="):
        wheelhouse.locked_hashes("torch>=2\n")


def test_an_image_built_already_is_said_to_be_so_not_built_in_silence() -> None:
    """`image build` of an image the engine held printed its tag and layers and nothing else: the
    user could not tell a rebuild from none."""
    from harness.container.launcher import ensure_image

    tag = image_build.image_tag(REPO, "cpu")

    class Image:
        tags = [tag]
        id = "sha256:1"

    class Images:
        def get(self, name: str) -> Image:
            from docker.errors import ImageNotFound

            if name != tag:
                raise ImageNotFound(name)
            return Image()

    class Client:
        images = Images()

    said: list[str] = []
    assert ensure_image(Client(), REPO, "cpu", said.append, cache=Path("/nonexistent")).id == "sha256:1"
    assert said == [f"fusionbench: {tag} is built already from this checkout's recipe: nothing to build\n"]
