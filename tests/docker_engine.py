"""Whether a Docker engine answers here, for the tests that build and run images."""

from __future__ import annotations


def engine_reason() -> str | None:
    """Why no image can be built here (no engine answers), or None."""
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure to reach the engine is a reason to skip
        return f"no Docker engine reachable ({type(exc).__name__}): `./run.sh engine start` starts one (Linux, root)"
    return None
