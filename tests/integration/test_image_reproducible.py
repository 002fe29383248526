"""The CPU image built twice from the same commit with no cache (`fusionbench image build cpu
--no-cache --source debian`: the base again from Debian's packages, the packages installed again
from the hash-checked wheels) has the same layer digests and the same image id. Runs where an
engine answers and the base can be built (root, mmdebstrap); skipped with the reason elsewhere.
Several minutes a build on 2 cores."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run import image_base
from tests.docker_engine import engine_reason

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _reason() -> str | None:
    return engine_reason() or image_base.why_not_here()


def _build() -> tuple[str, list[str]]:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "image", "build", "cpu", "--no-cache", "--source", "debian"],
                          capture_output=True, text=True, cwd=REPO, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    image = re.search(r"^image \S+ (sha256:[0-9a-f]{64})$", done.stdout, re.MULTILINE)
    layers = re.findall(r"^  layer (sha256:[0-9a-f]{64})$", done.stdout, re.MULTILINE)
    assert image and len(layers) == 3, done.stdout[-3000:]
    return image.group(1), layers


@pytest.mark.skipif(_reason() is not None, reason=_reason() or "")
def test_two_builds_with_no_cache_give_the_same_layers_and_image_id() -> None:
    first_id, first_layers = _build()
    second_id, second_layers = _build()
    assert second_layers == first_layers
    assert second_id == first_id
