#!/usr/bin/env bash
# A GPU session on a machine without network whose Python brings torch (FUSIONBENCH_NO_VENV=1), run
# from the repository's root there: the GPU scenarios that have not run yet, in the order given,
# within a time budget, each left resumable by the next session where the budget ran out.
#
# Here, where PyPI answers, gather the wheels (the folder lists what to install, with their sums):
#   ./run.sh wheels .whl/w --python-version 3.12 --gpu --backend onnxruntime --backend tvm
# and, where the copy to that machine takes at most N bytes at a time, split the larger wheels into
# parts of N less the tree that goes with each (the tree without the kept bundles, docs/results/
# bundles, is about 15 MB and the small wheels 6 MB: 45 MB parts for a copy of 64 MiB):
#   mkdir -p .whl/parts && (cd .whl/w && for w in onnxruntime_gpu-*.whl apache_tvm-*.whl; do
#     split -b 45000000 "$w" "../parts/$w.part" && rm "$w"; done)
# The kept bundles (about 10 MB of the tree's 25 on 2026-12-05) are not read by the runs there,
# but for one that `run` is to resume: leave them out of the copy and put them back after it (their
# files stay on disk throughout). A bundle to resume, excluded so, travels only where the call names
# it among the ignored paths it carries; `run` looks for it in OUT (docs/results/bundles, say), and
# where it is not there starts its scenario afresh, every cell and round again:
#   echo /docs/results/bundles/ >> .git/info/exclude && git rm -r --cached -q docs/results/bundles
#   ... the calls ...
#   git reset -q -- docs/results/bundles && sed -i '\|^/docs/results/bundles/$|d' .git/info/exclude
# There:
#   docs/results/scenarios/gpu-session.sh install WHEELS [PARTS]
#       join PARTS/NAME.whl.part?? into WHEELS/NAME.whl, check WHEELS/SHA256SUMS, replace the CPU
#       build of ONNX Runtime by the GPU one where the list asks for it, install WHEELS/requirements.txt
#   docs/results/scenarios/gpu-session.sh run OUT SECONDS SCENARIO [SCENARIO ...]
#       run each scenario with --budget-s what is left of SECONDS (less MARGIN_S, 60 by default, for
#       the probe before the cells and the report after them); a bundle in OUT of that file's run (as
#       the file reads now, without --only) that is complete leaves it out, one that is not is resumed
#       instead; then validate each bundle
# The CUDA libraries of torch's wheels are put on LD_LIBRARY_PATH, since ONNX Runtime's CUDA
# provider looks for them there (docs/results/gpu-h200-2026-11-28.md). $PYTHON is the Python
# (default python3), as for run.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
python="${PYTHON:-python3}"
margin_s="${MARGIN_S:-60}"

usage() {
    sed -n '/^# There:/,/^# The CUDA libraries/p' "${BASH_SOURCE[0]}" | sed '$d' >&2
    exit 2
}

install_wheels() {
    local wheels="$1" parts="${2:-}"
    [ -d "$wheels" ] || { echo "gpu-session: $wheels is not a folder of wheels" >&2; exit 2; }
    if [ -n "$parts" ]; then
        [ -d "$parts" ] || { echo "gpu-session: $parts is not a folder of parts" >&2; exit 2; }
        local first name
        for first in "$parts"/*.whl.partaa; do
            [ -e "$first" ] || { echo "gpu-session: no NAME.whl.partaa in $parts" >&2; exit 2; }
            name="$(basename "${first%.partaa}")"
            cat "$parts/$name".part?? > "$wheels/$name.joining"
            mv "$wheels/$name.joining" "$wheels/$name"
            echo "joined $name from $(ls "$parts/$name".part?? | wc -l) parts"
        done
    fi
    (cd "$wheels" && sha256sum -c --quiet SHA256SUMS)
    if grep -q '^onnxruntime-gpu==' "$wheels/requirements.txt"; then
        "$python" -m pip uninstall -y onnxruntime  # the CPU build: both install the onnxruntime module
    fi
    "$python" -m pip install --disable-pip-version-check --no-index --find-links "$wheels" -r "$wheels/requirements.txt"
}

# The lib folders of the nvidia-* wheels (CUDA 13's share nvidia/cu13/lib, cuDNN's nvidia/cudnn/lib)
# wherever this Python imports from: every folder on its sys.path, not only the system's
# site-packages, which leave out the user's (pip install --user) and PYTHONPATH's (pip --target).
cuda_library_path() {
    "$python" - <<'EOF'
import glob, os, sys
folders = []
for packages in dict.fromkeys(os.path.abspath(entry) for entry in sys.path if entry):
    folders += sorted(glob.glob(os.path.join(packages, "nvidia", "*", "lib")))
print(":".join(folders + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]))
EOF
}

# "complete BUNDLE" or "unfinished BUNDLE" for the newest bundle in OUT of SCENARIO's run, else nothing.
# A bundle is that run's only where it stores the file's scenario as the file now reads and ran all
# its cells: one run with --only (complete for those cells alone), or of the file before an edit
# that added cells, would otherwise leave the whole file out as complete (a resume runs the stored
# scenario and its --only, never the file's other cells). Such a bundle is named and passed over, as
# is an unfinished one of another schema version than the harness writes, which `run --resume`
# refuses (it never mixes two in one bundle): the file runs afresh.
bundle_of() {
    "$python" - "$1" "$2" "$root" <<'EOF'
import json, sys
from pathlib import Path
out, scenario = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from harness.bundle.migrations import SCHEMA_VERSION
from harness.errors import ConfigError
from harness.scenario import loading
try:
    resolved = loading.resolved(loading.load(scenario), scenario.stem)
except ConfigError as exc:
    sys.exit(f"gpu-session: {exc}")
name, wanted = resolved["name"], loading.sha256(resolved)
for header in sorted(out.glob("*/bundle.json"), reverse=True):  # run ids begin with the time: newest first
    try:
        bundle = json.loads(header.read_text())
    except (OSError, ValueError):
        continue
    if bundle.get("scenario", {}).get("name") != name:
        continue
    if bundle.get("only"):
        print(f"gpu-session: {header.parent} ran {scenario} with --only: not its whole run, passed over", file=sys.stderr)
    elif bundle.get("scenario_sha256") != wanted:
        print(f"gpu-session: {header.parent} stores {scenario} as it read before an edit: passed over", file=sys.stderr)
    elif bundle.get("state") != "complete" and bundle.get("schema_version") != SCHEMA_VERSION:
        print(f"gpu-session: {header.parent} was written with schema {bundle.get('schema_version')}, and this harness "
              f"resumes only its own ({SCHEMA_VERSION}): passed over", file=sys.stderr)
    else:
        print("complete" if bundle.get("state") == "complete" else "unfinished", header.parent)
        break
EOF
}

run_scenarios() {
    local out="$1" seconds=$((10#$2))
    shift 2
    [ $# -gt 0 ] || usage
    [[ "$margin_s" =~ ^[0-9]+$ ]] || { echo "gpu-session: MARGIN_S=$margin_s: give whole seconds" >&2; exit 2; }
    mkdir -p "$out"
    export FUSIONBENCH_NO_VENV=1 LD_LIBRARY_PATH
    LD_LIBRARY_PATH="$(cuda_library_path)"
    local deadline=$((SECONDS + seconds)) scenario left found status=0
    for scenario in "$@"; do
        left=$((deadline - SECONDS - 10#$margin_s))
        if [ "$left" -lt 60 ]; then
            echo "gpu-session: ${left}s left, under a minute: $scenario and those after it not started"
            break
        fi
        if ! found="$(bundle_of "$out" "$scenario")"; then
            echo "gpu-session: $scenario: not read (above); the next one" >&2
            status=2
            continue
        fi
        case "$found" in
            complete\ *)
                echo "== $scenario: complete in ${found#complete }, left out" ;;
            unfinished\ *)
                echo "== resuming ${found#unfinished } ($scenario), budget ${left}s"
                "$root/run.sh" run --resume "${found#unfinished }" --budget-s "$left" || status=$? ;;
            *)
                echo "== $scenario, budget ${left}s"
                "$root/run.sh" run "$scenario" --budget-s "$left" --out "$out" || status=$? ;;
        esac
    done
    local bundle
    for bundle in "$out"/*/; do
        if [ -f "$bundle/bundle.json" ]; then
            "$root/run.sh" validate "$bundle" || status=$?
        fi
    done
    return "$status"
}

case "${1:-}" in
    install) shift; [ $# -ge 1 ] && [ $# -le 2 ] || usage; install_wheels "$@" ;;
    run) shift; [ $# -ge 3 ] || usage; [[ "$2" =~ ^[0-9]+$ ]] || usage; run_scenarios "$@" ;;
    *) usage ;;
esac
