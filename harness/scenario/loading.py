"""Reading a scenario file: YAML in, a validated `ScenarioFile` out, or one clear `ConfigError`.

Every problem becomes a single line `FILE:LINE: FIELD: what is wrong; what is allowed`, so a user
fixes a typo without reading a traceback. The line comes from the YAML node the error points at.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import typing
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pydantic
import yaml

from harness import registry
from harness.errors import ConfigError
from harness.plain_text import has_unsafe, shortened, visible
from harness.scenario.schema import ScenarioFile
from harness.scenario.settings import FolderInputs, SyntheticInputs
from harness.scenario.yaml_forms import READ_AS, check_numbers, dotted, node_at, number_hint, text_hint, walk

MAX_FILE_BYTES = 1 << 20
# After YAML aliases are expanded: a real scenario file has a few hundred nodes and a depth under
# ten. The limits stop alias bombs ("billion laughs") and absurd nesting before anything is built.
MAX_NODES = 20_000
MAX_DEPTH = 40
#: The most problems of a file said, a line each (a generated file can hold thousands).
MAX_PROBLEMS = 20
_LINES_SOUGHT = 2000  # errors each looked up at its line to order them (a lookup walks the file)
INPUT_BRANCHES: dict[str, type[pydantic.BaseModel]] = {"synthetic": SyntheticInputs, "folder": FolderInputs}


def load(path: str | Path) -> ScenarioFile:
    """Read and validate a scenario file; raise ConfigError naming the file and line on any problem."""
    path = Path(path)
    try:
        kind = path.stat().st_mode
        if stat.S_ISDIR(kind):
            raise ConfigError(f"{path}: is a directory, not a scenario file")
        if not stat.S_ISREG(kind):  # a FIFO would hang the read, /dev/zero never end it
            raise ConfigError(f"{path}: not a regular file; a scenario file is a YAML file")
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)  # enough to tell a file that is too large
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such scenario file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(raw, str(path))


def parse(raw: bytes, where: str) -> ScenarioFile:
    """Validate the bytes of a scenario file; `where` names it in messages."""
    with registry.held():  # its checks ask for its backends a score of times
        return _parse(raw, where)


def _parse(raw: bytes, where: str) -> ScenarioFile:
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{where}: file is larger than {MAX_FILE_BYTES} bytes, the most a scenario file may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    node, data = _compose(text, where)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a YAML {type(data).__name__}"
        raise ConfigError(f"{where}: the file is {kind}; a scenario file is a mapping with keys models, backends, scenarios, ...")
    try:
        return ScenarioFile.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _describe(exc, node, where) from None


def resolved(scenario: ScenarioFile, default_name: str) -> dict[str, Any]:
    """The scenario with every default filled in, as stored in a bundle."""
    data = scenario.model_dump(mode="json")
    data["name"] = data["name"] or default_name
    if scenario.loadgen.profile == "mlperf":  # what the file set stands over mlperf.conf (user.conf)
        data["loadgen"]["overrides"] = scenario.loadgen.user_conf()
    return data


def sha256(data: dict[str, Any]) -> str:
    """Hash of a resolved scenario (canonical JSON)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _compose(text: str, where: str) -> tuple[yaml.Node | None, Any]:
    try:
        loader = _UniqueKeyLoader(text)  # refuses non-printable characters at once
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: invalid YAML: {str(exc).splitlines()[0][:200]}") from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_size(node, where)
            _check_text(node, where)
            check_numbers(node, where)
            _check_keys(node, where)
            _check_no_blank_backend(node, where)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"{mark.line + 1}:" if mark else ""
        problem = exc.problem or exc.context or "unreadable"
        if exc.context == "expected a single document in the stream":  # PyYAML says "but found another document"
            problem = "a second document begins here (---); a scenario file is one document"
        raise ConfigError(f"{where}:{line} invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: invalid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value its constructor refuses (a 5,000-digit int)
        first = str(exc).split(";")[0].split(": value")[0]
        raise ConfigError(f"{where}: invalid YAML value: {first[:200]}") from None
    finally:
        loader.dispose()
    return node, data


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type stubs here
    """A SafeLoader that refuses a key given twice in one mapping. YAML says a mapping's keys are
    unique, but PyYAML keeps the last one, so a second `models:` would silently drop the first
    list. Keys a merge (`<<: *base`) brings in may still be overridden: that is what a merge means."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Checked the first time a mapping is flattened, before its merges are spliced into its
        # keys: a merge source is flattened in place, maybe before it is constructed itself.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if not isinstance(key, Hashable):
                    continue  # the constructor refuses it with its own message
                if key in first:
                    written = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key)
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"key {visible(written)[:80]!r} given twice in one mapping (first on line "
                        f"{first[key].start_mark.line + 1}); the second would silently replace the first",
                        key_node.start_mark)
                first[key] = key_node
        super().flatten_mapping(node)


def _check_size(root: yaml.Node, where: str) -> None:
    """Refuse a document whose nodes, counted with every alias expanded, pass MAX_NODES, or whose
    nesting passes MAX_DEPTH, or that refers to itself; without building it."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in size:
            continue
        children = _children(node)
        if not children_done:
            open_nodes.add(key)
            stack.append((node, True))
            for child in children:
                if id(child) in open_nodes:
                    raise ConfigError(f"{where}:{child.start_mark.line + 1}: invalid YAML: an alias refers to itself")
                if id(child) not in size:
                    stack.append((child, False))
            continue
        open_nodes.discard(key)
        size[key] = 1 + sum(size[id(c)] for c in children)
        depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
        if size[key] > MAX_NODES:
            raise ConfigError(
                f"{where}: invalid YAML: over {MAX_NODES} values once its aliases are expanded (an alias bomb?)"
            )
        if depth[key] > MAX_DEPTH:
            raise ConfigError(f"{where}: invalid YAML: nested over {MAX_DEPTH} levels deep")


def _check_text(root: yaml.Node, where: str) -> None:
    """Refuse a key or value that holds a control or bidirectional character once its escapes are
    read (`"\\e[31m"`, `"\\u202e"`): no name, option or path needs one, and each would reach a
    terminal or a report."""
    for _, node in walk(root):
        if isinstance(node, yaml.ScalarNode) and isinstance(node.value, str) and has_unsafe(node.value):
            raise ConfigError(f"{where}:{node.start_mark.line + 1}: \"{visible(node.value)[:80]}\" holds a control or "
                              "bidirectional character; write the text without it")


def _check_keys(root: yaml.Node, where: str) -> None:
    """Refuse a key YAML reads as no text (`on:` is the boolean true, `~:` nothing, `1:` a number):
    every key of the format is a name, and such a key was said as `loadgen[1]: Keys should be
    strings`, a list's item the file lacks, or at line 1 for `~`."""
    for path, node in walk(root):
        if not isinstance(node, yaml.MappingNode):
            continue
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"):
                read = READ_AS.get(key.tag.rpartition(":")[2], "no text")
                raise ConfigError(f"{where}:{key.start_mark.line + 1}: {dotted(path) or '(top level)'}: key "
                                  f"{visible(key.value)[:80]!r} is read by YAML as {read}; a key is a name: quote it")


def _check_no_blank_backend(root: yaml.Node, where: str) -> None:
    """Refuse an entry of `backends` left blank (`- ` or `- ~`): YAML reads it as null, which names
    the null backend, so a blank line ran the null backend's cells with no word. The null backend
    is written `null`; within an entry, `{name: 'null'}`, quoted (unquoted, YAML's null was refused
    as "Input should be a valid string"), as in one entry standing alone; and standing alone itself
    `[null]` or `'null'` (`backends: null` was refused as empty)."""
    if not isinstance(root, yaml.MappingNode):
        return
    for key, value in root.value:
        if not (isinstance(key, yaml.ScalarNode) and key.value == "backends"):
            continue
        if _is_null(value) and value.value not in ("", "~"):  # blank: the schema names it empty
            raise ConfigError(f"{where}:{value.start_mark.line + 1}: backends: YAML reads an unquoted {value.value} "
                              "as nothing; the null backend alone is written [null] or 'null'")
        # one entry standing alone (`backends: {name: ...}`) as in a list
        items = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for index, item in enumerate(items):
            entry = f"backends[{index}]" if isinstance(value, yaml.SequenceNode) else "backends"
            if isinstance(value, yaml.SequenceNode) and _is_null(item) and item.value in ("", "~"):
                raise ConfigError(f"{where}:{item.start_mark.line + 1}: {entry}: an empty entry; name a "
                                  "backend (the null backend is written `null`)")
            fields = item.value if isinstance(item, yaml.MappingNode) else []
            name = next((name for field, name in fields if isinstance(field, yaml.ScalarNode) and field.value == "name"),
                        None)
            if name is not None and _is_null(name):
                said = "an empty name" if name.value in ("", "~") else f"YAML reads an unquoted {name.value} as no name"
                raise ConfigError(f"{where}:{name.start_mark.line + 1}: {entry}.name: {said}; name a backend "
                                  "(the null backend's name is quoted within an entry: {name: 'null', ...})")


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _describe(exc: pydantic.ValidationError, node: yaml.Node | None, where: str) -> ConfigError:
    """Every problem pydantic found, one line each at its line of the file: the first is the
    error's message, with how many more follow, and the others its `more` (the CLI prints each)."""
    # An unknown key is most often a typo, and the cause of the other errors: report it first; the
    # others in the file's order, where they came in the order of the model's fields. Sorted before
    # the first MAX_PROBLEMS are taken, so that those are the file's first (a line-1 problem was left
    # out behind 20 of a list further down); past _LINES_SOUGHT the model's order stands.
    errors = exc.errors(include_url=False)
    errors.sort(key=lambda e: (e["type"] != "extra_forbidden",
                               (node_at(node, _user_path(tuple(e["loc"])))[1] or 0) if len(errors) <= _LINES_SOUGHT else 0))
    found: list[tuple[bool, int, str]] = []
    while errors and len(found) < MAX_PROBLEMS:  # each found at its line; the rest only counted
        unknown = errors[0]["type"] == "extra_forbidden"
        problem, line, errors = _first_problem(errors, node, where)
        found.append((not unknown, line or 0, problem))
    problems = [problem for _, _, problem in sorted(found, key=lambda f: f[:2])]
    unshown = len({_problem_key(error) for error in errors})
    more = len(problems) - 1 + unshown
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    if unshown:
        problems.append(f"{where}: {unshown} more problem{'s' if unshown > 1 else ''} not shown")
    return ConfigError(problems[0] + suffix, more=tuple(problems[1:]))


def _problem_key(error: Any) -> tuple[Any, ...]:
    """What `_first_problem` says as one problem: an option's or a union's branches are one."""
    loc = tuple(error["loc"])
    if loc and (_is_branch(loc[-1]) or _is_option_type(loc)):
        return loc[:-1]
    return loc


def _first_problem(errors: list[Any], node: yaml.Node | None, where: str) -> tuple[str, int | None, list[Any]]:
    """The first error in words, its line, and the errors left once those that say the same are taken out."""
    first = errors[0]
    rest = errors[1:]
    raw_loc = tuple(first["loc"])
    loc = _user_path(raw_loc)
    field = _dotted(loc) or "(top level)"
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(raw_loc[:-1])
        message = f"unknown key {loc[-1]!r}; allowed here: {', '.join(allowed)}"
        field = _dotted(loc[:-1]) or "(top level)"
    elif _is_option_type(raw_loc):
        # one problem, not one per type an option may have ("options.x.bool: Input should be a valid boolean")
        rest = [error for error in rest if tuple(error["loc"])[:-1] != raw_loc[:-1]]
        field = _dotted(loc[:-1])
        message = "an option's value is one boolean, number or string"
    elif raw_loc and _is_branch(raw_loc[-1]):
        # one problem, not one per branch of a union (`target_qps.float: ... (and 1 more problem)`)
        branches = [error for error in errors if tuple(error["loc"])[:-1] == raw_loc[:-1] and _is_branch(error["loc"][-1])]
        rest = [error for error in rest if error not in branches]
        loc = loc[:-1]
        field = _dotted(loc) or "(top level)"
        wanted = dict.fromkeys(error["msg"].removeprefix("Input should be ") for error in branches)
        message = "Input should be " + " or ".join(wanted)
    elif first["type"] == "missing":
        message = "required, but missing"
    elif first["type"] == "model_type":  # pydantic names its class: "a valid dictionary or instance of LoadGenSettings"
        shown = shortened(repr(first["input"]), 60)
        given = "nothing" if first["input"] is None else f"{_yaml_kind(first['input'])} {shown}"
        message = f"should be a mapping of keys to values (KEY: VALUE), not {given}"
        if len(loc) == 2 and loc[0] in _NAMED_ENTRIES:  # an entry a name alone stands for
            whose, example = _NAMED_ENTRIES[loc[0]]
            message = f"should be a {whose} name, or a mapping with its name: (name: {example}), not {given}"
    else:
        message = first["msg"].removeprefix("Value error, ")
        item = re.match(r"\[(\d+)\] ", message)
        if item:  # a list's check that names the item it refuses (`[1] repeats ...`): point at that item
            loc, message = (*loc, int(item.group(1))), message[item.end():]
            field = _dotted(loc)
    at, line = node_at(node, loc)
    if first["type"] in _NUMBER_REFUSALS:  # `1e3` is text to YAML 1.1: say so, not just "a valid number"
        message += number_hint(first["input"], at, whole=first["type"].startswith("int"))
    elif first["type"] == "string_type":  # `name: 2024-05-01` is a date to YAML: say so, and to quote it
        message += text_hint(at)
    return (f"{where}:{line}: {field}: {message}" if line else f"{where}: {field}: {message}"), line, rest


#: pydantic's refusals of a value that is no number (a union's branches say theirs as one).
_NUMBER_REFUSALS = ("float_type", "int_type", "float_parsing", "int_parsing", "literal_error")

#: The lists whose entries are a name or a mapping with its name: whose name, and an example.
_NAMED_ENTRIES = {"models": ("model's", "resnet18"), "backends": ("backend's", "eager")}


def _yaml_kind(value: object) -> str:
    """What YAML read a value as, in the file's words."""
    if isinstance(value, bool):
        return "the boolean"
    if isinstance(value, (int, float)):
        return "the number"
    if isinstance(value, str):
        return "the text"
    if isinstance(value, list):
        return "the list"
    return "the value"


#: pydantic's names for the branches of a backend option's type (harness/scenario/format_base.py `OptionValue`).
OPTION_TYPES = ("bool", "int", "float", "str")
#: pydantic's names for a branch of a union in an error's location: a type, never a key of the file.
_BRANCH = re.compile(r"(bool|int|float|str|none|(literal|list|dict|tuple)\[.*\])")


def _is_option_type(loc: tuple[Any, ...]) -> bool:
    """Whether an error's location is one of the types a backend option may have (`options.x.bool`)."""
    return len(loc) > 2 and loc[-3] == "options" and loc[-1] in OPTION_TYPES


def _is_branch(part: object) -> bool:
    return isinstance(part, str) and _BRANCH.fullmatch(part) is not None


def _user_path(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union-branch names (`inputs.folder.path` -> `inputs.path`)."""
    out: list[Any] = []
    for part in loc:
        if out and out[-1] == "inputs" and part in INPUT_BRANCHES:
            continue
        out.append(part)
    return tuple(out)


def _dotted(loc: tuple[Any, ...]) -> str:
    """A pydantic error's location in the file's words: `backends[0].fusion`, without pydantic's
    names for union branches and validators, which are not the user's keys."""
    return dotted(tuple(part for part in loc if isinstance(part, int) or not (
        str(part).startswith(("function-", "tagged-union[")) or part in ("str", "ModelSpec", "BackendSpec"))))


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model an error location points into."""
    model: Any = ScenarioFile
    for part in loc:
        if part in INPUT_BRANCHES:
            model = INPUT_BRANCHES[part]
            continue
        if isinstance(part, int) or not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            continue
        model = _model_in(field.annotation) or model
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
        return list(model.model_fields)
    return []


def _model_in(annotation: Any) -> type[pydantic.BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
