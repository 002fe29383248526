"""The commands about the project's own images and what builds them: `image` (build, verify, prune,
lock-base, lock-packages), `engine` (a Docker engine of the project's own) and `wheels` (the wheels
for an offline machine). `container`, which runs a scenario in an image, is `run`'s and stays with it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

from harness.errors import ConfigError
from harness.plain_text import visible


def cmd_image(args: argparse.Namespace, console: Console) -> int:
    from harness.container import image_base, image_build, image_verify
    from harness.container.launcher import connect, ensure_image, recipe_tag
    from harness.run.system import SOURCE_ROOT

    pruning = (args.dry_run, args.keep is not None, args.keep_days is not None)
    if args.action != "prune" and any(pruning):
        raise ConfigError("--dry-run, --keep and --keep-days go with `image prune`")
    if args.check and args.action != "lock-packages":
        raise ConfigError("--check goes with `image lock-packages`")
    if args.action in ("lock-base", "lock-packages") and (args.kind or args.no_cache or args.source != "auto"):
        raise ConfigError(f"image {args.action} takes no kind, --source or --no-cache")
    if args.action == "lock-packages":
        from harness.container import package_lock

        if args.check:
            stale = package_lock.stale(SOURCE_ROOT)
            for path in stale:
                console.print(f"out of date: {path.relative_to(SOURCE_ROOT)}; run `./run.sh image lock-packages`")
            return 1 if stale else 0
        package_lock.relock(SOURCE_ROOT, console.print)
        return 0
    if args.action == "lock-base":
        path = image_build.base_lock(SOURCE_ROOT)
        with tempfile.TemporaryDirectory(prefix="fusionbench-lock-") as scratch:
            lock = image_base.relock(image_base.BaseLock.parse(path.read_text()), Path(scratch))
        path.write_text(lock.render())
        console.print(f"wrote {path} ({len(lock.packages)} packages)")
        return 0
    if args.action == "prune":
        if args.kind or args.no_cache or args.source != "auto":
            raise ConfigError("image prune takes no kind, --source or --no-cache: it keeps this checkout's images of both kinds")
        from harness.container import image_prune

        keep = image_prune.KEEP_RECENT if args.keep is None else args.keep
        keep_days = image_prune.KEEP_DAYS if args.keep_days is None else args.keep_days
        if keep < 0 or not 0 <= keep_days < 100_000:  # nan and inf fail this too
            raise ConfigError("--keep takes a whole number of 0 or more, --keep-days a number of days from 0 to under 100000")
        image_prune.prune(connect(), SOURCE_ROOT, image_build.default_build_cache(), sys.stdout.write, keep=keep,
                          keep_days=keep_days, dry_run=args.dry_run)
        return 0
    if args.kind is None:
        raise ConfigError(f"image {args.action} needs a kind: cpu or cuda")
    if args.action == "verify" and (args.no_cache or args.source != "auto"):
        raise ConfigError("image verify always builds from nothing with no registry: it takes no --no-cache or --source")
    client = connect()
    if args.action == "verify":
        rebuilt = image_verify.rebuild_and_compare(client, SOURCE_ROOT, args.kind, image_build.default_build_cache(),
                                                  sys.stdout.write)
        sys.stdout.write("".join(f"{line}\n" for line in rebuilt.lines()))  # whole lines: digests are compared
        return 0 if rebuilt.same else 1
    if args.no_cache:
        image_build.forget(client, SOURCE_ROOT, args.kind, image_build.default_build_cache())
    image = ensure_image(client, SOURCE_ROOT, args.kind, sys.stdout.write, cache=image_build.default_build_cache(),
                         source=args.source)
    console.print(f"image {recipe_tag(image, SOURCE_ROOT, args.kind)} {image.id}")
    for layer in (image.attrs.get("RootFS") or {}).get("Layers") or []:
        console.print(f"  layer {layer}")
    return 0


def cmd_engine(args: argparse.Namespace, console: Console) -> int:
    from harness.container import engine

    if args.purge and args.action != "stop":
        raise ConfigError("--purge goes with `engine stop`")
    paths = engine.EnginePaths.from_environment()
    if args.action == "start":
        engine.start(paths)
        return 0
    if args.action == "stop":
        engine.stop(paths, purge=args.purge)
        return 0
    return engine.status(paths)


def cmd_wheels(args: argparse.Namespace, console: Console) -> int:
    from harness.container import offline_wheels
    from harness.run.system import SOURCE_ROOT

    target = offline_wheels.Target(python_version=args.python_version, glibc=args.glibc, gpu=args.gpu)
    unused = offline_wheels.gpu_changes_nothing(args.backend, target)
    if unused:
        console.print(Text(f"note: {unused}", style="yellow"))
    wanted = offline_wheels.gather(SOURCE_ROOT, args.dest, args.backend, target)
    console.print(Text(f"{visible(args.dest)}: the wheels for CPython {target.python_version} on Linux x86_64 (glibc "
                       f"{target.glibc}), listed in {offline_wheels.SUMS_FILE}. There, from this checkout:"))
    for line in offline_wheels.install_lines(args.dest, wanted):
        console.print(Text(f"  {visible(line)}"), soft_wrap=True)
    if target.markers_differ():
        console.print(Text(f"note: pip judged the dependencies' markers (python_version < ...) by this Python, "
                           f"{sys.version_info.major}.{sys.version_info.minor}; should one be missing there, the "
                           "install says which", style="yellow"))
    return 0


COMMANDS = {"image": cmd_image, "engine": cmd_engine, "wheels": cmd_wheels}
