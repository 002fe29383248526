"""What a worker that ended without an answer last wrote, for its cell's reason.

A worker that dies before it can answer (it cannot read its request, a plugin's module fails to
import, an exception escapes its `main`, a native library aborts) leaves its one reason in its
log: its own one-line error (`fusionbench worker: cannot read the request: ...`) or a traceback,
whose last line is the exception. The cell's reason named only the exit code and the phase, and
the user had to open the log to learn why. `said_last` finds that line; `with_said_last` puts it
in the reason, which ends saying where the whole log is (`whole_log`). It is what the worker wrote
last, quoted, never a cause the parent guessed: a worker that wrote nothing gets the reason it had.

The log is the worker's, so any text at all: the line is made one safe line (harness/plain_text.py)
and shortened before it enters the reason, which the bundle keeps and every reader shows.
"""

from __future__ import annotations

from harness.plain_text import one_line, shortened

#: The most of a line a reason quotes: a traceback's last line can carry a whole tensor's repr, and
#: a refused request's names the model, its package and folder and its error (about 300).
MAX_SAID_CHARS = 400
#: Lines of the log that are not the worker's own words: the parent's notes in it (the preloaded
#: parent that could not fork it, an answer file refused unread, written after the worker ended),
#: and the headers of a traceback and of faulthandler's dump, whose frames are indented.
_NOT_ITS_WORDS = ("fusionbench: ", "Traceback (most recent call last):", "Extension modules:")
_FRAMES_HEADER = "(most recent call first):"


def said_last(log_text: str) -> str | None:
    """The last line of `log_text` the worker wrote as a sentence of its own (not blank, not
    indented as a traceback's frames and source lines are, not a header), as one safe line of at
    most MAX_SAID_CHARS; None where it wrote none. Where that line ends a traceback's exception, the
    exception's line and those that continue it (a message over several lines, its notes) are
    quoted from its first, joined: the last alone was a note (`while building the cell`), not the error."""
    lines = log_text.splitlines()
    for last in range(len(lines) - 1, -1, -1):
        if _its_words(lines[last]):
            first = last
            while first > 0 and _its_words(lines[first - 1]):
                first -= 1
            after_frames = first > 0 and lines[first - 1][:1].isspace()  # the exception, under its frames
            said = "\n".join(lines[first:last + 1]) if after_frames else lines[last]
            return shortened(one_line(said), MAX_SAID_CHARS)
    return None


def _its_words(line: str) -> bool:
    return bool(line.strip()) and not line[0].isspace() and not line.startswith(_NOT_ITS_WORDS) \
        and not line.rstrip().endswith(_FRAMES_HEADER)


def with_said_last(reason: str, log_text: str) -> str:
    """`reason` (why the worker gave no answer, as the parent saw it) followed by the last line the
    worker wrote (`said_last`); `reason` as it is where the worker wrote nothing."""
    said = said_last(log_text)
    return reason if said is None else f"{reason}; it last wrote: {said}"


def whole_log(log: str) -> str:
    """How a cell's reason that quotes its worker's last words ends (harness/run/sweep.py, once all
    else is said): where the worker's whole log is (`log`, in the bundle). The run's last line
    (harness/run/ending.py) names the log by its full path instead."""
    return f" (whole log: {log})"
