"""Whether a Docker engine answers here, for the tests that build and run images."""

from __future__ import annotations


def engine_reason() -> str | None:
    """Why no image can be built here (no engine answers), or None."""
    try:
        import docker
        import requests
    except ImportError as exc:  # the lock has it: only a Python set up by hand lacks it
        return f"the docker SDK is not installed ({exc}): ./run.sh installs it from requirements.lock"
    try:
        docker.from_env().ping()
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:  # no socket, refused, no answer
        return f"no Docker engine reachable ({type(exc).__name__}): `./run.sh engine start` starts one (Linux, root)"
    return None
