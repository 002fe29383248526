"""`fusionbench`: the command line.

Expected errors (a bad scenario file, an unknown option, no such bundle) print one line and
exit non-zero without a traceback; exit code 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

import harness
from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli import standard_output
from harness.cli.bundle_commands import COMMANDS as BUNDLE_COMMANDS
from harness.cli.bundle_commands import add_parsers as add_bundle_parsers
from harness.cli.image_commands import COMMANDS as IMAGE_COMMANDS
from harness.cli.os_error_line import os_error_line
from harness.cli.parser import OneLineParser
from harness.cli.path_argument import file_path_argument, path_argument
from harness.cli.rerun_command import add_parser as add_rerun_parser
from harness.cli.rerun_command import cmd_rerun
from harness.errors import EXIT_BROKEN_PIPE, ConfigError, HarnessError, interrupted_exit_code, terminate
from harness.plain_text import one_line, visible
from harness.scenario.cells import ONLY_KEYS
from harness.scenario.settings import MAX_ROUNDS

if TYPE_CHECKING:
    from harness.run.run_request import RunRequest

DEVICES = ("auto", "cpu", "cuda")
MAX_BUDGET_S = 7 * 86_400
#: What every file `schema --out` writes holds: a file without it, there already, is not replaced.
_JSON_SCHEMA = b'"$schema": "https://json-schema.org/'


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/fusionbench, or ~/.cache/fusionbench."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fusionbench"


def _escaped(path: Path) -> str:
    """`path` as argparse's help shows it as written (it formats help with %)."""
    return str(path).replace("%", "%%")


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="fusionbench",
        description="Measure what kernel fusion does to vision models, backend by backend, under MLPerf LoadGen.",
        epilog="Examples: fusionbench run scenarios/smoke.yaml | fusionbench validate results/RUN | "
        "fusionbench rerun results/RUN | "
        "fusionbench compare results/A results/B | fusionbench report results/RUN",
    )
    parser.add_argument("--version", action="version", version=f"fusionbench {harness.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a scenario file and write a result bundle")
    run.add_argument("scenario", nargs="?", type=path_argument, help="scenario file (YAML); optional with --resume")
    run.add_argument("--device", choices=DEVICES, help="override the file's device")
    run.add_argument("--rounds", type=int, metavar="N",
                     help=f"override the file's timing.rounds (1 to {MAX_ROUNDS}): time each cell in N fresh processes, "
                     "for a confidence interval and a verdict on every fusion speedup (docs/metrics.md)")
    run.add_argument(
        "--only", metavar="KEY=VALUE,...", action="append",
        help=f"run only matching cells; keys: {', '.join(ONLY_KEYS)} "
        "(repeat a key to allow several values: model=resnet18,model=vgg11)",
    )
    run.add_argument("--budget-s", type=float, metavar="S",
                     help="seconds the cells may take: a cell that would start later, or that is still running then, "
                     "or whose twin (its other fusion setting) took longer than is left as it would start, is left "
                     "out of the bundle for --resume, and a cell's further round (--rounds) is not started where its "
                     "rounds say it takes longer than is left (its longest further round, else round 1 less its "
                     "LoadGen and passes), its cell left for --resume to time afresh (a GPU booked by the hour; "
                     "default: no budget)")
    run.add_argument("--out", type=path_argument, help="directory for result bundles (default: results; a resume writes into "
                     "the bundle it resumes)")
    run.add_argument("--resume", type=path_argument, metavar="RUN_DIR", help="finish the cells a bundle is missing")
    cache = run.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache-dir", type=path_argument,
        help=f"where backends keep exported and compiled artifacts between runs (default: {_escaped(default_cache_dir())}; a "
             "resume of a run made with --no-cache: none)",
    )
    cache.add_argument("--no-cache", action="store_true", help="prepare every cell from scratch (cold)")
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="where cells run: here (default), or as tasks on a Ray cluster (docs/scale-out.md)")
    run.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="local: run N cells at a time, each on cores (and a GPU) of its own (default: 1)")
    run.add_argument("--dry-run", action="store_true",
                     help="list the cells the file would run here (or skip, and why) and a floor on the time; "
                          "run nothing, write nothing")
    run.add_argument("--fresh-workers", action="store_true",
                     help="local: start each cell's worker as a new Python (about 5 s of imports a cell on "
                     "2 cores) instead of forking it from a parent that imported torch once")
    run.add_argument("--address", metavar="ADDR", help="ray: the cluster to join (default: RAY_ADDRESS, else the cluster "
                     "the last `ray start` on this machine made, else a local Ray instance)")
    run.add_argument("--cpus-per-cell", type=int, default=1, metavar="N",
                     help="ray: cores a CPU cell reserves and is bound to (default: 1)")
    run.add_argument("--ray-connect-timeout-s", type=float, metavar="S",
                     help="ray: seconds the cluster has to answer before the run is refused (exit 2) "
                     "(default: 30)")

    add_rerun_parser(sub)

    gpu = sub.add_parser(
        "gpu-check", help="check a GPU machine end to end (every backend, fusion on and off; about 8 minutes)",
        description="Run scenarios/gpu-check.yaml on the GPU within a time budget and print a verdict per backend "
        "and fusion setting: status, math mode, kernels per inference, LoadGen's figure, device time and its CV.",
    )
    gpu.add_argument("--out", type=path_argument, default=Path("results"), help="directory for the bundle (default: results)")
    gpu.add_argument("--budget-s", type=float, default=480.0,
                     help="seconds the cells may take; later cells are skipped, saying so (default: 480)")
    gpu_cache = gpu.add_mutually_exclusive_group()
    gpu_cache.add_argument("--cache-dir", type=path_argument,
                           help=f"backends' artifact cache (default: {_escaped(default_cache_dir())})")
    gpu_cache.add_argument("--no-cache", action="store_true", help="prepare every cell from scratch (cold)")

    backends = sub.add_parser("backends", help="registered backends, whether they can run here, and their versions")
    backends.add_argument("--device", choices=DEVICES, default="auto")
    backends.add_argument("--json", action="store_true", help="print JSON instead of a table")

    models = sub.add_parser("models", help="the models the zoo offers")
    models.add_argument("--family", help="only this family (e.g. resnet, mobilenetv3)")

    add_bundle_parsers(sub)

    container = sub.add_parser(
        "container", help="run `fusionbench run ...` inside the reproducible cpu or cuda image (needs a Docker engine)",
        description="Build the image when missing (tagged by its lock's hash) and run the scenario in it; "
        "./run.sh --container KIND ... calls this.",
    )
    container.add_argument("kind", choices=("cpu", "cuda"))
    container.add_argument("run_args", nargs=argparse.REMAINDER, metavar="RUN_ARGS",
                           help="what `fusionbench run` takes: SCENARIO.yaml [--device ...] [--only ...] [--out DIR] ...")

    image = sub.add_parser(
        "image", help="build the container image (no registry needed), check it rebuilds bit for bit, or write the "
        "base's lock again",
        description="build KIND: build fusionbench-KIND:<hash> unless it exists (--source auto: from "
        "containers/Dockerfile where the pinned base can be pulled, else with no registry, bit for bit the same "
        "from the same commit); prints its tag, id and layer digests. verify KIND: build the image of this recipe "
        "again from nothing (the base again by mmdebstrap, the packages installed again from the hash-checked wheels; "
        "about 4 minutes on 2 cores), load nothing, and compare its layer digests and id with the image the engine "
        "holds under the same tag: exit 0 when they are the same, 1 when not. prune: remove the fusionbench images of "
        "recipes this checkout no longer builds (an older lock or recipe; any can be built again bit for bit from "
        "its commit), keeping the newest of each name and any built within a day unless told (--keep, --keep-days), "
        "saying what it removes and why it keeps the rest (--dry-run: removes nothing). lock-base: write containers/base-debian.lock "
        "again from a base built now (when Debian has replaced a pinned package). lock-packages: write "
        "containers/requirements-{cpu,cuda}.lock again from requirements.lock, each pin with its wheels' SHA-256 from "
        "PyPI (--check: write nothing, exit 1 when they no longer match requirements.lock).",
    )
    image.add_argument("action", choices=("build", "verify", "prune", "lock-base", "lock-packages"))
    image.add_argument("kind", nargs="?", choices=("cpu", "cuda"), help="build, verify: the image's kind")
    image.add_argument("--source", choices=("auto", "registry", "debian"), default="auto",
                       help="build: where the base comes from (default: auto)")
    image.add_argument("--no-cache", action="store_true",
                       help="build: remove this recipe's image and base first and build them again (the wheels "
                       "already gathered are reused: they are checked against the lock's hashes)")
    image.add_argument("--dry-run", action="store_true", help="prune: say what would be removed, remove nothing")
    image.add_argument("--check", action="store_true",
                       help="lock-packages: only check that the image locks match requirements.lock")
    image.add_argument("--keep", type=int, default=None, metavar="N",
                       help="prune: keep the N newest images of other recipes of each name (default: 1)")
    image.add_argument("--keep-days", type=float, default=None, metavar="DAYS",
                       help="prune: keep images of other recipes built within DAYS days (default: 1)")

    engine = sub.add_parser(
        "engine", help="start or stop a Docker engine of fusionbench's own where none runs (Linux, root)",
        description="start: where no engine answers, install Debian's docker.io and mmdebstrap if needed and start "
        "dockerd with its own data root and no changes to the host's network; stop: end it and what it started "
        "(the packages stay installed); "
        "status: say which engine answers. Images are kept under $FUSIONBENCH_ENGINE_ROOT "
        "(default /var/lib/fusionbench-engine).",
    )
    engine.add_argument("action", choices=("start", "stop", "status"))
    engine.add_argument("--purge", action="store_true", help="stop: also delete the engine's images and data "
                        "(those a stopped one left, after a plain stop)")

    wheels = sub.add_parser(
        "wheels", help="gather here the wheels a machine without network needs to run with its own torch "
        "(FUSIONBENCH_NO_VENV=1)",
        description="Download, for the target's Python version, the harness's small packages (LoadGen, pydantic, "
        "PyYAML, psutil, rich, jsonschema) and each --backend's runtime, at the locks' versions, with what they need, "
        "into DIR with the list of what to install there (requirements.txt) and a SHA256SUMS file of both; then print "
        "what to run there. The target's Python must bring torch, "
        "torchvision and numpy.",
    )
    wheels.add_argument("dest", type=path_argument, metavar="DIR", help="the folder to fill (made if missing)")
    wheels.add_argument("--python-version", default="3.12", help="the target's CPython version, 3.10 or newer (default: 3.12)")
    wheels.add_argument("--glibc", default="2.28",
                        help="the target's glibc (`ldd --version`): newer wheels would not install there (default: 2.28)")
    wheels.add_argument("--backend", action="append", default=[], choices=("onnxruntime", "tvm"),
                        help="add a backend's runtime (repeat for several)")
    wheels.add_argument("--gpu", action="store_true",
                        help="the target has an NVIDIA GPU: onnxruntime-gpu in place of onnxruntime for --backend "
                        "onnxruntime; nothing else changes (the target's torch brings CUDA)")

    schema = sub.add_parser("schema", help="print the JSON Schema of scenario files or of a bundle's files")
    schema.add_argument("--file", choices=("scenario", "bundle", "cell"), default="scenario",
                        help="scenario file (default), bundle.json, or cells/<id>.json")
    schema.add_argument("--version", type=int, default=None,
                        help=f"bundle schema version (default: {SCHEMA_VERSION}, the one this harness writes)")
    schema.add_argument("--out", type=file_path_argument, help="write it to this file instead")
    return parser


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    from harness.run.runner import run

    request = _run_request(args)
    if args.dry_run:
        from harness.run.plan import dry_run

        return dry_run(request, console)
    return run(request, console)


def _run_request(args: argparse.Namespace) -> RunRequest:
    """`run`'s options as a request, once checked against each other (ConfigError otherwise): what
    needs neither the scenario file nor the machine."""
    from harness.run.run_request import RunRequest
    from harness.scenario.cells import only_option

    if args.scenario is None and args.resume is None:
        raise ConfigError("run needs a scenario file (or --resume RUN_DIR)")
    ray_only = args.address is not None or args.cpus_per_cell != 1 or args.ray_connect_timeout_s is not None
    if args.executor == "local" and ray_only:
        raise ConfigError("--address, --cpus-per-cell and --ray-connect-timeout-s are for --executor ray")
    if args.executor == "ray" and args.jobs != 1:
        raise ConfigError("--jobs is for --executor local; Ray runs as many cells at once as the cluster has room for")
    if args.executor == "ray" and args.budget_s is not None:
        raise ConfigError("--budget-s is for --executor local; on Ray the cluster's scheduler decides when cells start")
    if args.executor == "ray" and args.fresh_workers:
        raise ConfigError("--fresh-workers is for --executor local; on Ray every cell's worker starts fresh")
    if args.budget_s is not None and not 0 < args.budget_s <= MAX_BUDGET_S:  # nan and inf fail this too
        raise ConfigError(f"--budget-s must be a number of seconds above 0 and at most {MAX_BUDGET_S:g} (a week)")
    if args.rounds is not None and not 1 <= args.rounds <= MAX_ROUNDS:
        raise ConfigError(f"--rounds {args.rounds}: a number from 1 to {MAX_ROUNDS}")
    if args.executor == "ray":  # refused here, before the scenario is even read
        from harness.run.ray_executor import check_options

        check_options(args.address, args.ray_connect_timeout_s, args.cpus_per_cell)
    only = only_option(args.only)
    if args.resume is not None and args.out is not None and args.out.resolve() != args.resume.resolve().parent:
        raise ConfigError(f"--out {args.out}: a resume writes into the bundle it resumes ({args.resume}); give no --out")
    return RunRequest(
        scenario_path=args.scenario, device=args.device, rounds=args.rounds, only=only,
        out_dir=args.out or Path("results"), resume=args.resume,
        cache_dir=None if args.no_cache else args.cache_dir or default_cache_dir(),
        cache_chosen=args.no_cache or args.cache_dir is not None,
        executor=args.executor, jobs=args.jobs, address=args.address, cpus_per_cell=args.cpus_per_cell,
        ray_connect_timeout_s=args.ray_connect_timeout_s, fresh_workers=args.fresh_workers,
        budget_s=args.budget_s, past_budget="missing", command=("fusionbench", *args.argv),
    )


def _cmd_gpu_check(args: argparse.Namespace, console: Console) -> int:
    from harness.run.gpu_check import check

    if not 0 < args.budget_s <= MAX_BUDGET_S:  # nan and inf fail this too: a deadline that never comes
        raise ConfigError(f"--budget-s must be a number of seconds above 0 and at most {MAX_BUDGET_S:g} (a week)")
    return check(args.out, None if args.no_cache else args.cache_dir or default_cache_dir(), console,
                 budget_s=args.budget_s, command=("fusionbench", *args.argv),
                 cache_chosen=args.no_cache or args.cache_dir is not None)


def _cmd_container(args: argparse.Namespace, console: Console) -> int:
    from harness.container.launcher import launch, made_without_the_cache

    if not args.run_args:
        raise ConfigError("container needs what `fusionbench run` takes, e.g. scenarios/offline.yaml")
    # What the run in the image would refuse at once, refused here: before an engine is started or an
    # image built (minutes, gigabytes), not after.
    run_args = _parser().command("run").parse_args(args.run_args)
    run_args.argv = ["run", *args.run_args]
    request = _run_request(run_args)
    if run_args.scenario is not None:
        from harness.scenario import loading

        loading.load(run_args.scenario)
    from harness.run import preflight, slots
    from harness.run.opening import check_selection

    check_selection(request)
    slots.check_jobs(request.jobs)
    if request.executor == "local":  # the image runs on this machine's cores
        slots.check_jobs_fit_here(request.jobs)
    # the folders mounted into the image: never a bundle (the run inside sees only its mount, not
    # the bundle around it), never a file; checked leaving nothing made
    preflight.could_write(request.out_dir)
    # a resume of a run made with --no-cache runs without the cache, as natively: none is mounted
    without = request.resume is not None and not request.cache_chosen and made_without_the_cache(request.resume)
    if request.cache_dir is not None and not without:
        preflight.could_write(request.cache_dir, *preflight.cache_option(request.cache_chosen))
    from harness.run.system import SOURCE_ROOT

    repo = SOURCE_ROOT
    return launch(args.kind, args.run_args, repo=repo, cache=default_cache_dir())


def _cmd_backends(args: argparse.Namespace, console: Console) -> int:
    from harness import registry
    from harness.run.probe import run_probe

    answer = run_probe(args.device, registry.names(), with_system=False)
    if args.json:
        print(json.dumps({"device": answer.device, "cuda_available": answer.cuda_available,
                          "backends": answer.recorded_backends()}, indent=1))
        return 0
    table = Table(title=f"Backends (device: {answer.device})")
    for column in ("backend", "available", "reason", "versions"):
        # a reason ends with the file and line to look at: folded onto more lines, never cut short
        table.add_column(column, overflow="fold")
    for name, report in answer.backends.items():
        versions = ", ".join(f"{k} {v}" for k, v in (report.versions or {}).items())
        # a plugin's name, reason and versions are its own text: shown as written, never read as markup
        table.add_row(Text(visible(name)), Text("yes") if report.available else Text("no", style="red"),
                      Text(one_line(report.reason)), Text(visible(versions)))
    console.print(table)
    return 0


def _cmd_models(args: argparse.Namespace, console: Console) -> int:
    from harness.models import plugins
    from harness.models.catalog import all_models, clash, described, input_sizes_text
    from harness.models.extra_models import input_shape

    table = Table(title="Zoo: random weights unless pretrained: true (torchvision classifiers only)")
    for column in ("model", "family", "input (one sample, default size)", "input sizes", "about"):
        table.add_column(column)
    models = all_models()
    found = plugins.found()
    shown = 0
    for name, (family, size) in models.items():
        # "" is no family, not every family; the README writes them capitalised (ResNet, MobileNet)
        if args.family is not None and family.casefold() != args.family.casefold():
            continue
        extra = described(name)
        shape = input_shape(extra, size) if extra else (1, 3, size, size)
        kind = extra.input_kind if extra else "image"
        plugin = found.models.get(name)
        about = extra.about if extra else "torchvision classifier"
        # a plugin's text is its own: shown as written, never read as markup
        table.add_row(Text(visible(name)), Text(visible(family)), f"{kind} {list(shape)}", input_sizes_text(name),
                      Text(visible(f"{about} (from {plugin.distribution} {plugin.version})" if plugin else about)))
        shown += 1
    if shown == 0:
        families = sorted({f for f, _ in models.values()})
        raise ConfigError(f"no model of family {args.family!r}; families: {', '.join(families)}")
    console.print(table)
    # a plugin that does not load, takes a built-in's name, makes every command import torch or has another copy
    # installed that never loads, or is hidden by an earlier copy of its package: said, the others listed
    for reason in [*found.broken.values(), *filter(None, map(clash, found.models)), *found.heavy.values(),
                   *found.shadowed.values(), *found.hidden.values()]:
        console.print(Text(f"fusionbench: warning: {one_line(reason)}", style="yellow"))
    return 0


def _cmd_schema(args: argparse.Namespace, console: Console) -> int:
    if args.file == "scenario":
        from harness.scenario.schema import json_schema

        if args.version is not None:  # not ignored: the user asked for something this does not give
            raise ConfigError("--version goes with --file bundle or --file cell; scenario files have one schema")
        document = json_schema()
    else:
        from harness.bundle.schema import schema

        try:
            document = schema(args.file, SCHEMA_VERSION if args.version is None else args.version)
        except ValueError as exc:
            raise ConfigError(f"--version {args.version}: {exc}") from None
    text = json.dumps(document, indent=2) + "\n"
    if args.out:
        from harness.bundle.confine import output_path
        from harness.files.output_file import check_replaceable, write_output

        out = output_path(args.out, [])  # never into a bundle: its manifest would no longer hold
        check_replaceable(out, "schema", lambda start: start.startswith(b"{") and _JSON_SCHEMA in start)
        write_output(args.out, out, text)
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given, for the bundle's record
    if args.command is None:  # `fusionbench $CMD` with CMD unset: a mistake, not a pass
        print("fusionbench: error: no command given; `fusionbench --help` lists them", file=sys.stderr)
        return ConfigError.exit_code
    # a run (in the image too) goes on past its standard output: its bundle is its result; a dry
    # run's list is all it gives
    dry = getattr(args, "dry_run", False) or "--dry-run" in (getattr(args, "run_args", None) or [])
    keep_going = args.command in ("run", "rerun", "gpu-check", "container") and not dry
    signal.signal(signal.SIGTERM, terminate)  # docker stop, Slurm and Ray stop a run as Ctrl-C does
    try:
        with standard_output.guarded(keep_going):
            return _command(args, keep_going)
    except standard_output.Failed as exc:
        print(f"fusionbench: error: {exc}", file=sys.stderr)
        standard_output.discard()  # what its buffer holds would fail again at exit
        return ConfigError.exit_code
    except BrokenPipeError:  # `fusionbench models | head`: the reader has what it wanted
        standard_output.discard()
        return EXIT_BROKEN_PIPE


def _command(args: argparse.Namespace, keep_going: bool) -> int:
    """Run the command `args` name; its exit code, an expected error's said in one line."""
    console = standard_output.OutputConsole(highlight=False, keep_going=keep_going)
    if not console.is_terminal:  # logs and CI: do not squeeze tables to 80 columns
        console = standard_output.OutputConsole(highlight=False, width=160, keep_going=keep_going)
    commands = {"run": _cmd_run, "rerun": lambda args, console: cmd_rerun(args, console, default_cache_dir()),
                "backends": _cmd_backends, "models": _cmd_models, "schema": _cmd_schema,
                "container": _cmd_container, "gpu-check": _cmd_gpu_check, **IMAGE_COMMANDS, **BUNDLE_COMMANDS}
    try:
        return commands[args.command](args, console)
    except HarnessError as exc:
        for problem in (exc, *(exc.more if isinstance(exc, ConfigError) else ())):
            print(f"fusionbench: error: {visible(problem)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as stop:
        print("fusionbench: interrupted", file=sys.stderr)
        return interrupted_exit_code(stop)
    except OSError as exc:  # a path the command reads or writes: the environment, not a bug
        if isinstance(exc, BrokenPipeError):
            raise
        print(f"fusionbench: error: {os_error_line(exc, getattr(args, 'out', None))}", file=sys.stderr)
        return ConfigError.exit_code
