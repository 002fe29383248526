"""The command line's parser: a mistake in the arguments is one line on standard error, with the
nearest option or command where one is close, and exit 2. argparse's own prints the usage first
(up to seven lines of it), and suggests nothing: `--dryrun` got no `--dry-run`. An option that takes
one value is refused when given twice (argparse kept the last without a word: `pack --org A --org B`
packed as B), an option is named whole (`--ou` is no `--out`: its nearest name is suggested), and an
optional positional may follow the options (`image build --no-cache cpu`)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from harness.did_you_mean import closest
from harness.plain_text import visible

_UNRECOGNIZED = "unrecognized arguments: "
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)'")
_QUOTED = re.compile(r"'([^']*)'")
_SCENARIO_SUFFIXES = (".yaml", ".yml")
_GIVEN = "_options_given"  # the namespace's record of the single-value options given, while it is parsed


class _StoreOnce(argparse._StoreAction):
    """argparse's `store`, refusing a second value for the same option."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given: dict[str, Any] = vars(namespace).setdefault(_GIVEN, {})
        if self.dest in given and option_string is not None:
            raise argparse.ArgumentError(self, f"given twice ({given[self.dest]}, then {values}); give it once")
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line; its subcommands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # whole option names only: `--ou X` passed the container's check as --out, and the launcher,
        # which rewrites --out by its name, then gave the run in the image a second one
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)  # what a hint looks through
        parsed, rest = super().parse_known_args(args, namespace)
        vars(parsed).pop(_GIVEN, None)
        return parsed, self._take_late_positional(parsed, rest)

    def _take_late_positional(self, parsed: argparse.Namespace, rest: list[str]) -> list[str]:
        """An optional positional given after an option (`image build --no-cache cpu`): argparse
        matches it to nothing once the positional before it has its word, and leaves the word over
        as unrecognized. It is taken here, as it would be in front of the option."""
        for action in self._actions:
            if action.option_strings or action.nargs != "?" or getattr(parsed, action.dest) != action.default:
                continue
            word = next((word for word in rest if not word.startswith("-")), None)
            if word is None or rest.index(word) != 0:
                return rest
            try:
                self._check_value(action, word)
            except argparse.ArgumentError as error:
                self.error(str(error))
            setattr(parsed, action.dest, self._get_values(action, [word]))
            return rest[1:]
        return rest

    def error(self, message: str) -> NoReturn:
        owner = self._command_parser() if message.startswith(_UNRECOGNIZED) else self
        self.exit(2, f"{owner.prog}: error: {visible(message)}{owner._hint(message)}; "
                     f"`{owner.prog} --help` says what it takes\n")

    def command(self, name: str) -> OneLineParser:
        """The parser of one of this parser's commands (`run`)."""
        return self._commands()[name]

    def _commands(self) -> dict[str, OneLineParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def _command_parser(self) -> OneLineParser:
        """The parser of the command the arguments name (arguments it did not take are reported by
        the top-level parser), else this one."""
        commands = self._commands()
        named = next((word for word in self._given if word in commands), None)
        return commands[named] if named is not None else self

    def _options(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings]

    def _hint(self, message: str) -> str:
        if message.startswith(_UNRECOGNIZED):
            words = message.removeprefix(_UNRECOGNIZED).split()
            hints = [closest(word.split("=")[0], self._options()) for word in words if word.startswith("-")]
            return "".join(hint for hint in hints if hint)
        chosen = _INVALID_CHOICE.search(message)
        if chosen is None:
            return ""
        word = chosen.group(1)
        if not self._commands():  # a positional's choices (`engine statsu`)
            return closest(word, _QUOTED.findall(message[chosen.end():]))
        if word.lower().endswith(_SCENARIO_SUFFIXES):
            return f" (a scenario file follows `run`: {self.prog} run {word} [OPTIONS])"
        return closest(word, list(self._commands()))
