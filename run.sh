#!/usr/bin/env bash
# FusionBench bootstrap: make .venv from requirements.lock (first use, or when the lock changes),
# then hand over to the CLI.
#   ./run.sh scenarios/offline.yaml [fusionbench run options]   run a scenario file
#   ./run.sh test [pytest options]                              run the test suite
#   ./run.sh --resume results/<run>                            finish the cells a bundle is missing
#   ./run.sh --container cpu|cuda scenarios/offline.yaml [...]  run a scenario inside the reproducible image
#   ./run.sh <fusionbench command> ...                          any other CLI command (backends, models, ...)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${FUSIONBENCH_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
stamp="$venv/.fusionbench-lock"
want="$(cat "$root/requirements.lock" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)"

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "fusionbench: preparing $venv from requirements.lock (first run or lock changed; torch is large, this takes a few minutes)" >&2
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on -r "$root/requirements.lock" >&2
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e "$root" >&2
    echo "$want" > "$stamp"
    echo "fusionbench: environment ready" >&2
fi

case "${1:-}" in
    test)
        shift
        cd "$root"
        exec "$venv/bin/python" -m pytest "$@"
        ;;
    "")
        exec "$venv/bin/fusionbench" --help
        ;;
    --container)
        shift
        exec "$venv/bin/fusionbench" container "$@"
        ;;
    *.yaml | *.yml | --resume | --resume=*)
        exec "$venv/bin/fusionbench" run "$@"
        ;;
    *)
        exec "$venv/bin/fusionbench" "$@"
        ;;
esac
