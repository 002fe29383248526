"""The CPU image for real, where a Docker engine answers (`.ci/run` starts one where it can);
skipped with the reason elsewhere. The first test builds the image when the engine lacks it and
runs a scenario in it through `fusionbench container`. The second builds it again from nothing
(`fusionbench image verify`: the base again by mmdebstrap, the packages installed again from the
hash-checked wheels) and finds the same layer digests and image id: about 4 minutes on 2 cores, an
eighth of the suite's work, so it runs when FUSIONBENCH_TEST_IMAGE_REBUILD=1 asks for it, and `.ci/run`
runs `image verify cpu` itself before the suite, as a step of its own. The build cache (base layer,
wheelhouse) is the machine's own (tests/conftest.py keeps it out of the session's temporary cache):
the wheels are inputs checked against the lock's hashes, not build output. The CUDA image's build
(TensorRT off: its libraries come from NVIDIA's index only) runs when FUSIONBENCH_TEST_CUDA_IMAGE=1
asks for it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.container import image_base
from tests.docker_engine import engine_reason

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
CUDA_OPT_IN = "FUSIONBENCH_TEST_CUDA_IMAGE"
REBUILD_OPT_IN = "FUSIONBENCH_TEST_IMAGE_REBUILD"


def _cli(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def _run_reason() -> str | None:
    """Why the CPU image can neither be found nor built here, or None: an engine must answer, and
    where it lacks this recipe's image, the base must be buildable (mmdebstrap, root)."""
    reason = engine_reason()
    if reason is not None:
        return reason
    from harness.container import image_build, launcher

    tags = [image_build.image_tag(REPO, "cpu"), launcher.image_tag(REPO, "cpu")]
    if image_build.existing(launcher.connect(), tags) is not None:
        return None
    return image_base.why_not_here()


@pytest.mark.skipif(_run_reason() is not None, reason=_run_reason() or "")
def test_the_cpu_image_builds_and_runs_a_scenario(tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = _cli("container", "cpu", str(REPO / "scenarios" / "smoke.yaml"), "--device", "cpu",
                "--only", "backend=eager,scenario=Offline", "--out", str(out), timeout=7200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    container = json.loads((bundle / "bundle.json").read_text())["system"]["container"]
    assert container["in_container"] and container["image"].startswith("fusionbench-cpu:")
    assert container["image_id"].startswith("sha256:") and container["base"]
    assert container["layers"] and all(layer.startswith("sha256:") for layer in container["layers"])
    check = _cli("validate", str(bundle), timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def _rebuild_reason() -> str | None:
    return engine_reason() or image_base.why_not_here()


def _asked_reason(variable: str, what: str) -> str | None:
    """Why a long image build is skipped: `variable`=1 did not ask for it (`what` says what runs
    and where), or the engine or the base's build is missing here."""
    if os.environ.get(variable) != "1":
        return f"{what} when asked: {variable}=1"
    return _rebuild_reason()


def _cpu_rebuild_reason() -> str | None:
    return _asked_reason(REBUILD_OPT_IN, "the CPU image's rebuild from nothing (about 4 minutes on 2 cores) runs in "
                                         ".ci/run as a step of its own (./run.sh image verify cpu), and here")


@pytest.mark.skipif(_cpu_rebuild_reason() is not None, reason=_cpu_rebuild_reason() or "")
def test_the_image_built_again_from_nothing_has_the_same_layers_and_id() -> None:
    built = _cli("image", "build", "cpu", "--source", "debian", timeout=3600)  # nothing to do when the test above built it
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    held = re.search(r"^image (\S+) (sha256:[0-9a-f]{64})$", built.stdout, re.MULTILINE)
    assert held, built.stdout[-3000:]
    again = _cli("image", "verify", "cpu", timeout=3600)
    said = again.stdout[-3000:] + again.stderr[-3000:]
    assert again.returncode == 0, said
    assert re.search(rf"^image {re.escape(held.group(1))}: held {held.group(2)}, built again {held.group(2)}: the same$",
                     again.stdout, re.MULTILINE), said
    assert len(re.findall(r"^  layer \d \(.*\): the same held (sha256:[0-9a-f]{64}) built \1$", again.stdout, re.MULTILINE)) == 3, said


def _cuda_reason() -> str | None:
    return _asked_reason(CUDA_OPT_IN, "the CUDA image's build (about 5.5 minutes and 7.6 GB on 2 cores, base cached) runs")


@pytest.mark.skipif(_cuda_reason() is not None, reason=_cuda_reason() or "")
def test_the_cuda_image_builds_with_tensorrt_off_and_lists_the_gpu_providers() -> None:
    import docker

    built = _cli("image", "build", "cuda", "--source", "debian", timeout=3600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    tag = re.search(r"^image (\S+) sha256:[0-9a-f]{64}$", built.stdout, re.MULTILINE)
    assert tag and tag.group(1).startswith("fusionbench-cuda:"), built.stdout[-3000:]
    image = docker.from_env().images.get(tag.group(1))
    labels = image.attrs["Config"]["Labels"]
    assert labels["io.fusionbench.kind"] == "cuda" and labels["io.fusionbench.tensorrt"] == "off"
    said = docker.from_env().containers.run(
        tag.group(1), ["-c", "import onnxruntime, torch; print(onnxruntime.get_available_providers(), torch.version.cuda)"],
        entrypoint=["python3"], network_mode="none", remove=True).decode()
    assert "CUDAExecutionProvider" in said and "None" not in said, said  # the CUDA builds, whether or not a GPU is here
