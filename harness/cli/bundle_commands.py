"""The CLI commands that read finished bundles: validate, compare, report, findings, pack.

Each reads bundles through `harness.bundle.reader` (strict, bounded, read-only) and refuses to
compare, report or pack a bundle that fails `validate`, so a figure from an altered bundle is
never presented as measured. Exit codes: 0 success; 1 validate found problems, or compare found
a regression, a new failure or a valid cell it could not pair (unless --allow-missing); 2 a bundle
or an option could not be used (one line says why).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.text import Text

from harness.bundle.confine import output_path
from harness.bundle.reader import LoadedBundle
from harness.bundle.validate import Verdict, validate
from harness.cli.path_argument import file_path_argument, path_argument
from harness.errors import BundleError, ConfigError, HarnessError
from harness.files.output_file import check_replaceable, write_output
from harness.plain_text import shell_word, visible

EXIT_PROBLEMS = 1
_PROBLEMS_SHOWN = 5


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    check = sub.add_parser("validate", help="check a bundle: checksums, schema, consistency, LoadGen logs")
    check.add_argument("run_dir", type=path_argument, metavar="RUN_DIR")
    check.add_argument("--labels", type=path_argument, metavar="VAL_MAP",
                       help="score every accuracy run again against this labels file of the data set "
                            "(val_map.txt's layout), not only against the labels the bundle keeps")

    diff = sub.add_parser("compare", help="compare two bundles cell by cell (exit 1 on a regression or an unpaired valid cell)")
    diff.add_argument("a", type=path_argument, metavar="A", help="the baseline bundle")
    diff.add_argument("b", type=path_argument, metavar="B", help="the bundle to judge against it")
    diff.add_argument("--threshold", type=float, default=0.05,
                      help="smallest relative change of the median that counts (default: 0.05)")
    diff.add_argument("--format", choices=("md", "json"), default="md", help="output format (default: md)")
    diff.add_argument("--out", type=file_path_argument, help="write the comparison to this file as well")
    diff.add_argument("--allow-missing", action="store_true",
                      help="exit 0 even when a cell valid in one bundle has no counterpart to judge it by (missing, "
                           "skipped or interrupted in the other, or valid there but of another or no recorded math mode, "
                           "other hardware or another share of it, other torch or backend pool threads, or another value of a "
                           "variable env: passes on)")

    report = sub.add_parser("report", help="write report.md and report.html (plots inline) for a bundle")
    report.add_argument("run_dir", type=path_argument, metavar="RUN_DIR")
    report.add_argument("--out", type=path_argument, help="directory for the report (default: RUN_DIR, whose manifest is updated)")

    found = sub.add_parser("findings", help="what several bundles say together: per model and across models, what "
                           "fusion did (findings.md and findings.html)")
    found.add_argument("run_dirs", type=path_argument, nargs="+", metavar="RUN_DIR")
    found.add_argument("--out", type=path_argument, required=True, help="directory for findings.md and findings.html (outside "
                       "every bundle read)")

    pack = sub.add_parser("pack", help="the MLPerf submission tree (checker v6.1 layout) and tarball of a bundle's results")
    pack.add_argument("run_dir", type=path_argument, metavar="RUN_DIR")
    pack.add_argument("--org", required=True, help="submitting organisation (a directory name)")
    pack.add_argument("--out", type=path_argument, help="submission tree to create (default: ./<run-id>-<org>-submission)")
    pack.add_argument("--system-name", help="system name prefix (default: from the CPU or GPU the run used)")
    pack.add_argument("--division", choices=("closed", "open"), default="open",
                      help="MLPerf division (default: open); closed is refused unless its rules are met")
    pack.add_argument("--status", choices=("available", "preview", "rdi"), default="rdi",
                      help="MLPerf availability status of the system (default: rdi)")
    pack.add_argument("--system-info", type=path_argument, metavar="FILE",
                      help="JSON object of MLPerf system fields the bundle cannot know (system_type, cooling, ...)")


def trusted(root: Path) -> LoadedBundle:
    """The bundle at `root`, after it passed validate; BundleError naming its problems otherwise."""
    verdict = validate(root)
    if not verdict.ok:
        _refuse(root, verdict.problems)
    return _as_read(verdict, root)


def _refuse(root: Path, problems: list[str]) -> NoReturn:
    """BundleError for a bundle that fails validation with `problems`: the first of them, or, where
    another process is writing it (its checksums are written as it ends), that process."""
    from harness.bundle.lock import writer_pid

    holder = writer_pid(root)
    if holder is not None:
        raise BundleError(f"{root}: pid {holder} is writing this bundle (a run, a resume or a report into it), which is "
                          "checksummed as it ends; wait for it to end, or stop it")
    shown = "; ".join(problems[:_PROBLEMS_SHOWN])
    more = f" (and {len(problems) - _PROBLEMS_SHOWN} more)" if len(problems) > _PROBLEMS_SHOWN else ""
    raise BundleError(f"{root} fails validation: {shown}{more}; see `fusionbench validate {shell_word(root)}`")


def _as_read(verdict: Verdict, root: Path) -> LoadedBundle:
    """The bundle validate read (each file once), which a valid bundle always has."""
    if verdict.loaded is None:
        raise BundleError(f"{root}: could not be read")
    return verdict.loaded


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    reference = None
    if args.labels is not None:
        from harness.bundle.mlperf_check import Reference
        from harness.models.labels import read_labels

        try:
            reference = Reference(visible(args.labels), read_labels(args.labels))
        except HarnessError as exc:
            raise ConfigError(f"--labels: {exc}") from None
    verdict = validate(args.run_dir, reference=reference)
    where = visible(args.run_dir)
    for line in verdict.problems:
        print(f"{where}: {visible(line)}")
    for line in verdict.notes:
        print(f"{where}: note: {visible(line)}", file=sys.stderr)
    if verdict.problems:
        from harness.bundle.lock import writer_pid

        holder = writer_pid(args.run_dir)
        if holder is not None:  # the note said "where no process runs it, finish it with --resume"
            print(f"{where}: note: pid {holder} is writing this bundle now (a run, a resume or a report into it), "
                  "which is checksummed as it ends: validate it once that has ended", file=sys.stderr)
        print(f"fusionbench: {where}: INVALID, {len(verdict.problems)} problem(s)", file=sys.stderr)
        return EXIT_PROBLEMS
    against = "" if reference is None else f"; {verdict.accuracy_runs} accuracy run(s) scored against {reference.where}"
    console.print(Text(f"{where}: valid ({verdict.cells} cell(s), {verdict.files} file(s) checked{against})"),
                  soft_wrap=True)  # one line, whole, to grep
    return 0


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown
    from harness.reporting.judging import WORSE

    # -0 passes `0 <=` and was written as `beyond -0%` and `"threshold": -0.0`: refused with the other negatives
    if not 0 <= args.threshold < 1 or math.copysign(1.0, args.threshold) < 0:
        raise BundleError(f"--threshold {args.threshold}: give a fraction in [0, 1), e.g. 0.05")
    out = output_path(args.out, [args.a, args.b]) if args.out else None
    if out is not None:
        check_replaceable(out, "compare", lambda start: start.startswith(_COMPARISON_STARTS))
    if args.a.resolve() == args.b.resolve():  # every figure "same" and exit 0: a typo's pass
        raise BundleError(f"{args.a} is given as both A and B; compare sets two runs side by side")
    a, b = trusted(args.a), trusted(args.b)
    if a.name == b.name and a.header.get("created") == b.header.get("created"):  # a run id alone is a second and a name
        print(f"fusionbench: {visible(args.a)} and {visible(args.b)} are copies of one run ({visible(a.name)}): "
              "each cell they share is one measurement set beside itself", file=sys.stderr)
    comparison = compare(a, b, threshold=args.threshold)
    text = to_json(comparison) if args.format == "json" else to_markdown(comparison)
    if out is not None:
        write_output(args.out, out, text)
    sys.stdout.write(text)
    unpaired = comparison.unpaired and not args.allow_missing
    if unpaired:
        # a lab reproducing a run on its own machine reads why none of its cells was judged
        elsewhere = sum(1 for pair in comparison.pairs if pair.not_judged)
        across = f", {elsewhere} of them run on other hardware (set side by side under 'Cells', not judged)" if elsewhere else ""
        print(f"fusionbench: {len(comparison.unpaired)} valid cell(s) could not be paired (listed under 'Unpaired'){across}; "
              "--allow-missing accepts that", file=sys.stderr)
    if comparison.worse:  # said on standard error as the unpaired cells are, for a CI log that keeps only it
        worse = sum(comparison.counts()[label] for label in WORSE)
        # a CI job that keeps only this line took another machine's or torch's figures for a regression
        apart = comparison.systems_apart()
        systems = f"; the two systems differ ({apart}: listed above), which may be why" if apart else ""
        print(f"fusionbench: {worse} cell(s) of B regressed or newly failed against A (listed above){systems}",
              file=sys.stderr)
    return EXIT_PROBLEMS if unpaired or comparison.worse else 0


#: How a file `compare --out` wrote begins: as Markdown, as JSON.
_COMPARISON_STARTS = (b"# FusionBench comparison\n", b'{\n "a": ')


def trusted_but_its_report(root: Path) -> LoadedBundle:
    """As `trusted`, forgiving only the bundle's own report: report.md and report.html (and a
    temporary file of either that an interrupted write left) edited, missing or added, which a
    report written into the bundle replaces. An interrupted `report RUN_DIR` leaves the bundle so;
    the report is derived from the cells, never a measurement."""
    from harness.bundle import manifest
    from harness.reporting.report import REPORT_HTML, REPORT_MD

    def ours(name: str | None) -> bool:
        return name in (REPORT_MD, REPORT_HTML) or (
            name is not None and "/" not in name and name.startswith((f".{REPORT_MD}.", f".{REPORT_HTML}."))
            and name.endswith(".tmp"))

    verdict = validate(root)
    left = [line for line in verdict.problems if not ours(manifest.file_of(line))]
    if left:
        _refuse(root, left)
    for line in verdict.problems:  # what an interrupted write left behind
        name = manifest.file_of(line)
        if name is not None and name.endswith(".tmp") and ours(name):
            (root / name).unlink(missing_ok=True)
    return _as_read(verdict, root)


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from harness.bundle import lock, manifest
    from harness.reporting.report import render

    out = output_path(args.out or args.run_dir, [args.run_dir], may_be=args.run_dir)
    inside = out == args.run_dir.resolve()
    if inside and out.is_dir() and not os.access(out, os.W_OK | os.X_OK,
                                                  effective_ids=os.access in os.supports_effective_ids):
        raise ConfigError(f"{visible(args.run_dir)}: this user may not write into the bundle (its folder is read-only to this user), "
                          "where its report goes; give --out DIR for a report of its own")
    # Into the bundle: as its one writer, so that no run or resume starts on it meanwhile (its
    # manifest, written below, would then list a bundle still being written)
    held = lock.hold(out, "write its report") if inside and out.is_dir() else None  # not a folder: the reading below says what it is
    try:
        loaded = trusted_but_its_report(args.run_dir) if inside else trusted(args.run_dir)
        written = render(loaded, out)
        if inside:
            manifest.write(args.run_dir)  # the bundle was valid a moment ago; only the report changed
    finally:
        if held is not None:
            os.close(held)
    for path in written:
        console.print(Text(f"wrote {visible(path)}"))
    return 0


def cmd_findings(args: argparse.Namespace, console: Console) -> int:
    from harness.reporting.findings_page import render

    out = output_path(args.out, args.run_dirs)
    roots = [path.resolve() for path in args.run_dirs]
    if len(set(roots)) != len(roots):
        raise BundleError("the same bundle is given twice; give each bundle once")
    bundles = [trusted(path) for path in args.run_dirs]
    first: dict[str, Path] = {}
    for path, loaded in zip(args.run_dirs, bundles):  # copies of one run: their groups would merge under its id
        if loaded.name in first:
            raise BundleError(f"{first[loaded.name]} and {path} are copies of one run ({loaded.name}); give it once")
        first[loaded.name] = path
    written = render(bundles, out)
    for path in written:
        console.print(Text(f"wrote {visible(path)}"))
    return 0


def cmd_pack(args: argparse.Namespace, console: Console) -> int:
    from harness.reporting.pack import checked_name, pack
    from harness.reporting.submission_system import read_system_info

    info = read_system_info(args.system_info) if args.system_info else None
    if args.out:
        output_path(args.out, [args.run_dir])  # refused before the bundle is read; pack() holds it again
    loaded = trusted(args.run_dir)
    out = args.out or Path(f"{loaded.name}-{checked_name(args.org, '--org')}-submission")
    packed = pack(loaded, out, org=args.org, division=args.division, status=args.status, system_base=args.system_name,
                  system_info=info, option="--out" if args.out else "the default --out")
    console.print(Text(f"packed {packed.results} result(s) of {len(packed.systems)} system(s) into {visible(packed.tree)}"))
    console.print(Text(f"tarball: {visible(packed.tarball)}"))
    for line in packed.left_out:
        console.print(Text(f"left out: {visible(line)}", style="dim"))
    for line in packed.notes:
        console.print(Text(f"note: {visible(line)}", style="yellow"))
    for system, fields in packed.to_fill.items():
        console.print(Text(f"to fill in systems/{system}.json (or give them with --system-info): {', '.join(fields)}",
                           style="yellow"))
    for system, fields in packed.replaced.items():
        console.print(Text(f"systems/{system}.json: --system-info replaced what the bundle captured: "
                           f"{visible('; '.join(fields))}", style="yellow"))
    return 0


COMMANDS = {"validate": cmd_validate, "compare": cmd_compare, "report": cmd_report, "findings": cmd_findings,
            "pack": cmd_pack}
