"""Text someone else wrote, made safe to show: a bundle's labels and reasons, a scenario's option
keys, a backend's error message.

Such text can carry terminal escape sequences (ESC, CR, BEL: recolour the screen, move the cursor,
hide what came before) and bidirectional overrides (U+202E and friends: show a line in another
order than it reads). Neither must reach a terminal, a Markdown viewer or a browser as itself:
`visible` writes each such character as its escape (`\\x1b`, `\\u202e`), so the reader sees that
it was there and nothing acts on it. Markup (Rich's, Markdown's, HTML's) is the caller's to
escape; this module only decides which characters are shown as codes.

A reason (an exception's message: pydantic's, a compiler's) is prose that often runs over several
lines; shown on one line (a cell's line, a table cell), `one_line` joins its lines rather than
showing each break as a code.
"""

from __future__ import annotations

import re
import shlex

# C0 and C1 controls (tab and newline apart), DEL, the bidirectional marks, embeddings, overrides
# and isolates, the line and paragraph separators, and the byte-order mark.
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_IN_TEXT = re.compile(f"[{_UNSAFE}]")
_IN_LINE = re.compile(f"[{_UNSAFE}\t\n]")


def _code(match: re.Match[str]) -> str:
    point = ord(match.group())
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def visible(text: object) -> str:
    """`text` on one line, every control, line break and bidirectional character written as its code."""
    return _IN_LINE.sub(_code, str(text))


def one_line(text: object) -> str:
    """Prose written over several lines (an exception's message) on one: each line's indentation and
    trailing blanks dropped, blank lines left out, the rest joined by " / "; every other unsafe
    character (a lone CR among them) as `visible` writes it."""
    lines = (line.strip(" \t").removesuffix("\r").strip(" \t") for line in str(text).split("\n"))
    return visible(" / ".join(line for line in lines if line))


def shortened(text: str, limit: int) -> str:
    """`text` where it has at most `limit` characters, else its first `limit - 3` and `...`: `limit` in all."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def visible_lines(text: str) -> str:
    """A document (newlines and tabs kept), every other control and bidirectional character written as its code."""
    return _IN_TEXT.sub(_code, text)


def has_unsafe(text: str) -> bool:
    """Whether `text` holds a character `visible_lines` would rewrite."""
    return _IN_TEXT.search(text) is not None


def shell_word(text: object) -> str:
    """`text` (a path) as one word a shell reads back as it is, for a command line to copy: quoted
    where it holds a space, a quote or another character the shell would act on; then `visible`."""
    return visible(shlex.quote(str(text)))
