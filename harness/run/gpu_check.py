"""`fusionbench gpu-check` (`./run.sh gpu-check`): check a GPU machine end to end in minutes.

Runs scenarios/gpu-check.yaml on the GPU (every built-in backend, fusion on and off, resnet18,
Offline batch 32, IEEE fp32) through the normal run, into a normal bundle, within a time budget
(8 minutes by default: a cell not started by then is skipped, saying so), then prints one verdict
per backend, model and fusion setting: status, the math mode read back after the run, kernels
per inference, LoadGen's figure, the device-timing median and its CV, and the gap between the
two, each as the run's summary and the report write it (harness/metric_table.py). Backends that
could not run are listed with the reason (a package missing, no CUDA provider, ...). Exit 0 when
every cell that could run is valid, 1 otherwise, 4 when no cell was measured (every one skipped:
the budget spent before any ended), 2 without a GPU.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import metric_table
from harness.bundle.cell_record import CellRecord
from harness.bundle.reader import load
from harness.errors import ConfigError
from harness.plain_text import one_line, visible
from harness.run.summary import STATUS_STYLE
from harness.run.system import SOURCE_ROOT

SCENARIO = SOURCE_ROOT / "scenarios" / "gpu-check.yaml"
DEFAULT_BUDGET_S = 480.0


def check(out_dir: Path, cache_dir: Path | None, console: Console, budget_s: float = DEFAULT_BUDGET_S,
          scenario: Path = SCENARIO, command: tuple[str, ...] = ("fusionbench", "gpu-check"),
          cache_chosen: bool = True) -> int:
    """Run the check; return the exit code. `cache_chosen`: the command line gave `cache_dir` (or
    `--no-cache`), where false it is the default, which a refusal names so (harness/run/preflight.py
    `cache_option`)."""
    from harness.run import preflight
    from harness.run.run_request import RunRequest
    from harness.run.runner import run

    why_not = _why_torch_sees_no_cuda()
    if why_not:
        raise ConfigError(f"gpu-check needs an NVIDIA GPU that torch can see ({why_not}); run it on a machine with "
                          "one (here, `fusionbench run scenarios/smoke.yaml` checks the harness end to end with the "
                          "backends a CPU runs)")
    folders = preflight.MadeFolders()
    preflight.writable(out_dir, made=folders)  # made, unless inside a bundle: refused then, nothing made
    before = {p.name for p in out_dir.iterdir()}
    try:
        code = run(RunRequest(scenario_path=scenario, device="cuda", out_dir=out_dir, cache_dir=cache_dir,
                              cache_chosen=cache_chosen, budget_s=budget_s, command=command), console)
    except BaseException:  # refused before its bundle, say: no folder made for it is left, empty
        folders.remove_left_empty()
        raise
    # the bundle the run made (a new --cache-dir inside --out is a new folder too)
    made = [p for p in out_dir.iterdir() if p.name not in before and (p / "bundle.json").is_file()]
    if len(made) != 1:
        return code
    cells = load(made[0]).records
    console.print(verdict_table(cells))
    for line in could_not_run(cells):
        console.print(Text(visible(line)))
    return code


def _why_torch_sees_no_cuda() -> str:
    """Why torch sees no GPU here, or "" when it sees one. Asked in a child process: the parent
    never creates a CUDA context."""
    import os
    import subprocess
    import sys

    asked = "import torch; print(torch.cuda.is_available(), torch.version.cuda or '-', torch.__version__)"
    try:
        done = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "torch did not say whether it sees one within 300 s: a driver that hangs?"
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:]) or "no output"
        return f"asking torch failed (exit {done.returncode}): {tail}"
    said = (done.stdout.strip().splitlines() or [""])[-1].split()
    if said[:1] == ["True"]:
        return ""
    if len(said) != 3:  # a sitecustomize or a torch that prints on import can cut into the answer
        return f"torch's answer could not be read ({' '.join(said)[:200] or 'nothing printed'})"
    cuda, version = said[1:3]
    if cuda == "-":  # no driver would help: the wheel has no CUDA in it
        return f"torch {version} is a build without CUDA: install its CUDA build"
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (f"torch.cuda.is_available() is False here: torch {version} (CUDA {cuda}) finds no NVIDIA driver or GPU"
            + (f", and CUDA_VISIBLE_DEVICES={hidden!r} is set, which hides any not listed" if hidden is not None else ""))


def verdict_table(cells: list[CellRecord]) -> Table:
    """One row per backend, model and fusion setting (and scenario, batch)."""
    table = Table(title="GPU check: verdicts")
    heads = ("backend", "model", "fusion", "setting", "status", "math mode", *map(metric_table.label, metric_table.GPU_CHECK))
    for column in heads:
        table.add_column(column)
    for cell in sorted(cells, key=lambda c: (c.config.backend, c.config.model.name, c.config.variant.fusion)):
        config, math_mode = cell.config, cell.metrics.math_mode
        table.add_row(
            *(Text(visible(value)) for value in (config.backend, config.model.name, config.variant.fusion,
                                                 f"{config.scenario} b{config.batch} {config.dtype}")),
            Text(cell.status, style=STATUS_STYLE.get(cell.status, "")),
            math_mode.effective if math_mode else "-",
            *(Text(visible(metric_table.figure(column, cell))) for column in metric_table.GPU_CHECK),
        )
    return table


def could_not_run(cells: list[CellRecord]) -> list[str]:
    """One line per backend with cells that did not run, failed or were invalid, and why (first reason)."""
    reasons: dict[str, str] = {}
    for cell in cells:
        if cell.status in ("skipped", "failed", "invalid") and cell.reasons:
            reasons.setdefault(cell.config.backend, f"{cell.status}: {one_line(cell.reasons[0])}")
    return [f"{backend}: {reason}" for backend, reason in sorted(reasons.items())]
