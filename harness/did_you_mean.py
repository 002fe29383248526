"""The hint beside a name nothing answers to: the registered or declared names it is nearest."""

from __future__ import annotations

import difflib


def closest(word: str, choices: list[str]) -> str:
    """A ' (did you mean ...?)' hint, or '' when nothing is close."""
    near = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else ""
