#!/usr/bin/env bash
# FusionBench bootstrap: make .venv from the locks (first use, or when a lock changes), then hand
# over to the CLI.
#   ./run.sh scenarios/offline.yaml [fusionbench run options]   run a scenario file
#   ./run.sh test [pytest options]                              run the test suite
#   ./run.sh gpu-check                                          check a GPU machine end to end (about 8 minutes)
#   ./run.sh --resume results/<run>                             finish the cells a bundle is missing
#   ./run.sh rerun results/<run> [--only ...] [--out DIR]       run the cells a bundle ran again, here, as a new bundle
#   ./run.sh --container cpu|cuda scenarios/offline.yaml [...]  run a scenario inside the reproducible image
#   ./run.sh engine start|stop|status                          a Docker engine of its own where none runs (Linux, root)
#   ./run.sh wheels DIR --python-version 3.12 [--gpu] [--backend ...]  the wheels a machine without network needs (FUSIONBENCH_NO_VENV=1)
#   ./run.sh --install-plan                                     print what the bootstrap would install (under
#                                                               FUSIONBENCH_NO_VENV=1: what that Python lacks), install nothing
#   ./run.sh <fusionbench command> ...                          any other CLI command (backends, models, ...)
#
# Where `nvidia-smi -L` lists a GPU, the GPU stack (requirements-gpu.lock: onnxruntime-gpu in place
# of onnxruntime, TensorRT) is installed too; FUSIONBENCH_GPU_STACK=on|off overrides the detection.
# FUSIONBENCH_NO_VENV=1 uses $PYTHON (default python3) as it is, installing nothing: for a machine
# without network whose Python already has torch, with the small packages added from wheels
# (0 or unset: the virtual environment; any other value is refused, never read as either).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${FUSIONBENCH_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
stamp="$venv/.fusionbench-lock"
nvidia_index="https://pypi.nvidia.com"
# The modules the harness imports (pyproject.toml's dependencies; docker only for --container).
required_modules="torch torchvision mlperf_loadgen pydantic yaml psutil rich numpy jsonschema"

case "${FUSIONBENCH_GPU_STACK:-auto}" in
    on | off | auto) ;;
    *) echo "fusionbench: FUSIONBENCH_GPU_STACK must be on, off or auto" >&2; exit 2 ;;
esac
# `true` or `yes` was read as 0: the venv was made (torch downloaded) where $PYTHON was meant
case "${FUSIONBENCH_NO_VENV:-0}" in
    0 | 1) ;;
    *) echo "fusionbench: FUSIONBENCH_NO_VENV must be 1 (run \$PYTHON as it is) or 0 (the virtual environment)" >&2; exit 2 ;;
esac

gpu_stack() {
    case "${FUSIONBENCH_GPU_STACK:-auto}" in
        on) return 0 ;;
        off) return 1 ;;
        *) command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' ;;
    esac
}

# Runs one install step, or only prints it under --install-plan.
step() {
    if [ "$dry_run" = 1 ]; then
        printf '%q ' "$@"; echo
    else
        "$@" >&2
    fi
}

install() {
    local pip=("$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on)
    local remove=("$venv/bin/python" -m pip uninstall --disable-pip-version-check -y -q)
    local fresh=0
    if [ ! -x "$venv/bin/python" ]; then
        fresh=1
        step "$python" -m venv "$venv"
    fi
    if gpu_stack; then
        # requirements.lock without the CPU onnxruntime, which onnxruntime-gpu replaces; kept in the
        # venv, which this user has just made or owns: under a TMPDIR that is gone or not this user's
        # (a scheduler's per-job folder, another user's), the install stopped at "Permission denied"
        local host_lock="$venv/.fusionbench-requirements-host.txt"
        [ "$dry_run" = 1 ] || grep -v -i '^onnxruntime==' "$root/requirements.lock" > "$host_lock"
        [ "$fresh" = 1 ] || step "${remove[@]}" onnxruntime || true   # the CPU build of an earlier bootstrap
        step "${pip[@]}" --extra-index-url "$nvidia_index" -r "$host_lock" -r "$root/requirements-gpu.lock"
        [ "$dry_run" = 1 ] || rm -f "$host_lock"
    else
        # the GPU stack of an earlier bootstrap (FUSIONBENCH_GPU_STACK=off on a GPU host)
        [ "$fresh" = 1 ] || step "${remove[@]}" onnxruntime-gpu tensorrt-cu13 tensorrt-cu13-bindings tensorrt-cu13-libs || true
        step "${pip[@]}" -r "$root/requirements.lock"
    fi
    step "${pip[@]}" --no-deps --no-build-isolation -e "$root"
}

wanted_stamp() {
    if gpu_stack; then
        cat "$root/requirements.lock" "$root/pyproject.toml" "$root/requirements-gpu.lock" <(echo gpu) | sha256sum | cut -d' ' -f1
    else
        cat "$root/requirements.lock" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1
    fi
}

# Whether the environment was installed from the locks as they are now.
venv_current() {
    [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(wanted_stamp)" ]
}

prepare_venv() {
    local what="requirements.lock"
    if venv_current; then
        return
    fi
    # A checkout another user made and shares (a lab's): its venv is theirs, and remaking it here
    # stopped at pip's or venv's "Permission denied" part-way, naming a file inside it
    local folder="$venv"
    while [ ! -e "$folder" ]; do folder="$(dirname "$folder")"; done
    if [ ! -d "$folder" ] || [ ! -w "$folder" ]; then
        echo "fusionbench: $venv needs preparing (first run or a lock changed), and this user may not write $folder" \
             "(its owner: $(stat -c %U "$folder" 2>/dev/null || echo unknown)); FUSIONBENCH_VENV=DIR names a folder" \
             "of your own for it, or the owner runs ./run.sh once" >&2
        exit 2
    fi
    if gpu_stack; then
        # forced on, it said "nvidia-smi lists a GPU" where none may be listed, or nvidia-smi be absent
        case "${FUSIONBENCH_GPU_STACK:-auto}" in
            on) what="requirements.lock and requirements-gpu.lock (FUSIONBENCH_GPU_STACK=on)" ;;
            *) what="requirements.lock and requirements-gpu.lock (nvidia-smi lists a GPU)" ;;
        esac
    fi
    echo "fusionbench: preparing $venv from $what (first run or a lock changed; torch is large, this takes a few minutes)" >&2
    install
    wanted_stamp > "$stamp"
    echo "fusionbench: environment ready" >&2
}

# The packages $python lacks of those the harness imports, named as pip installs them
# (mlcommons-loadgen gives mlperf_loadgen, PyYAML yaml); empty where it has them all.
missing_packages() {
    "$python" - $required_modules <<'EOF'
import importlib.util, sys
package = {"mlperf_loadgen": "mlcommons-loadgen", "yaml": "PyYAML"}
print(" ".join(package.get(m, m) for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
EOF
}

# --install-plan under FUSIONBENCH_NO_VENV=1: that mode installs nothing, so the plan says what a run checks.
no_venv_plan() {
    echo "# FUSIONBENCH_NO_VENV=1: ./run.sh installs nothing; it runs $python as it is, with this checkout on PYTHONPATH"
    if ! command -v "$python" >/dev/null 2>&1; then
        echo "# there is no $python (PYTHON names the Python to use): a run stops there"
        return
    fi
    local missing
    missing="$(missing_packages)"
    if [ -n "$missing" ]; then
        echo "# $python lacks: $missing (a run stops there; ./run.sh wheels DIR gathers them on a machine with network)"
    else
        echo "# $python has every package the harness imports"
    fi
}

dry_run=0
if [ "${1:-}" = "--install-plan" ]; then
    if [ $# -gt 1 ]; then
        echo "fusionbench: --install-plan takes no other argument (given: ${*:2})" >&2
        exit 2
    fi
    if [ "${FUSIONBENCH_NO_VENV:-0}" = 1 ]; then
        no_venv_plan
        exit 0
    fi
    dry_run=1
    if gpu_stack; then echo "# GPU stack: yes"; else echo "# GPU stack: no"; fi
    if venv_current; then
        echo "# $venv matches the locks: ./run.sh installs nothing now; where a lock changes, it runs:"
    fi
    install
    exit 0
fi

if [ "${FUSIONBENCH_NO_VENV:-0}" = 1 ]; then
    if ! command -v "$python" >/dev/null 2>&1; then
        echo "fusionbench: FUSIONBENCH_NO_VENV=1 runs \$PYTHON as it is, and there is no $python (PYTHON names the Python to use)" >&2
        exit 2
    fi
    missing="$(missing_packages)"
    if [ -n "$missing" ]; then
        echo "fusionbench: FUSIONBENCH_NO_VENV=1 runs $python as it is, and it lacks: $missing" >&2
        case " $missing " in
            *" torch "* | *" torchvision "* | *" numpy "*)
                echo "  torch, torchvision and numpy are that Python's own (a GPU machine's image has them); the wheels add the rest" >&2 ;;
        esac
        echo "  add them from wheels: $python -m pip install --no-index --find-links WHEEL_DIR -r WHEEL_DIR/requirements.txt" >&2
        echo "  (gathered on a machine with network by: ./run.sh wheels WHEEL_DIR --python-version $("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'))" >&2
        exit 2
    fi
    export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
    run_python="$python"
else
    prepare_venv
    run_python="$venv/bin/python"
fi

case "${1:-}" in
    test)
        shift
        cd "$root"
        # The suite's test workers import every test module through pytest's assertion rewriting, and
        # its runs start Python processes that import the harness: with PYTHONDONTWRITEBYTECODE set (as
        # container images and CI machines often set it), each compiled them from source again. Here
        # they are compiled once, into the tree's __pycache__ folders (which git ignores).
        unset PYTHONDONTWRITEBYTECODE
        exec "$run_python" -m pytest "$@"
        ;;
    "")
        exec "$run_python" -m harness.cli --help
        ;;
    --container)
        shift
        exec "$run_python" -m harness.cli container "$@"
        ;;
    *.[yY][aA][mM][lL] | *.[yY][mM][lL] | --resume | --resume=*)
        exec "$run_python" -m harness.cli run "$@"
        ;;
    *)
        exec "$run_python" -m harness.cli "$@"
        ;;
esac
