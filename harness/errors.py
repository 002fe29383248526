"""The one family of errors the harness raises on purpose.

Expected errors are shown to the user as one line (a scenario file's problems a line each),
without a traceback, and the CLI exits non-zero (2 for a bad input such as a scenario file).
Anything else is a bug and keeps its traceback (in the cell's log when it happens inside a worker).
"""

from __future__ import annotations

#: The exit codes of a run stopped by Ctrl-C (SIGINT) or by SIGTERM (docker stop, Slurm, Ray):
#: 128 + the signal's number, as a shell reports it. Either way the bundle is left resumable.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
#: The reader of standard output went away (`| head`): what was left to print was not printed (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141
#: A run whose every cell was skipped (a backend not installed here, a GPU backend on a CPU): it
#: measured nothing, so a script or CI gate must not read it as a pass.
EXIT_NOTHING_MEASURED = 4


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into the same orderly stop as Ctrl-C (harness/cli/main.py)."""


_sigterm_received = False


def terminate(signum: int = 15, frame: object = None) -> None:
    """The SIGTERM handler: remember it, then stop as Ctrl-C does. Remembered because a library
    the exception passes through may re-raise it as a plain KeyboardInterrupt (Ray's wait does)."""
    global _sigterm_received
    _sigterm_received = True
    raise Terminated()


def interrupted_exit_code(exc: KeyboardInterrupt) -> int:
    return EXIT_TERMINATED if isinstance(exc, Terminated) or _sigterm_received else EXIT_INTERRUPTED


def stopped_by(exc: KeyboardInterrupt) -> str:
    """What stopped a run, as its interrupted cells record it: a SIGTERM is no user's Ctrl-C (a
    `timeout`, `docker stop`, a scheduler's time limit send it)."""
    if interrupted_exit_code(exc) == EXIT_TERMINATED:
        return "stopped by SIGTERM (a timeout, docker stop or a scheduler's limit)"
    return "interrupted by Ctrl-C (SIGINT)"


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = 1


class ConfigError(HarnessError):
    """A scenario file or a command-line option is wrong; nothing has been written. Its message
    is the first problem; `more` holds the others found with it (a scenario file's), one line
    each, which the CLI prints after it."""

    exit_code = 2

    def __init__(self, message: str, *, more: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.more = more


class OutputError(HarnessError):
    """The result bundle could not be written (disk full, quota, permissions) during a run; the
    cells written before stay intact and `--resume` completes the run."""

    exit_code = 3


class BackendFailed(HarnessError):
    """A backend could not prepare or run a model; the cell becomes `failed` with this reason."""


class BundleError(HarnessError):
    """A result bundle is missing, damaged, hostile or not one this harness can read; nothing was changed."""

    exit_code = 2


class BundleUnreadable(BundleError):
    """A file or folder of a result bundle that this user may not read, or that the system failed to
    read: a fact about where the bundle lies, not about what it holds, so no command calls the bundle
    invalid, or a file of it missing, for it."""

    exit_code = 2


class SchemaVersionError(BundleError):
    """A bundle was written by a newer schema than this harness can read."""

    exit_code = 2
