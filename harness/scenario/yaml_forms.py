"""What YAML 1.1 (PyYAML's) reads otherwise than a reader of the file does, said in the file's words.

A leading 0 makes an integer octal (`batch_sizes: {cpu: [016, 032]}` ran batches 14 and 26), and
digits joined by `:` are a number in base 60 (`cell_timeout_s: 1:30` is 90): both loaded without a
word, so such a number is refused, naming the value YAML reads (`check_numbers`). The other way
round, `1e3` is text to YAML 1.1 and `name: 2024-05-01` a date: the field's refusal says why and
what to write (`number_hint`, `text_hint`). `node_at` and `walk` find a value's node and its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from harness.errors import ConfigError

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
#: The longest whole number a file may write: the largest any setting takes has 20 digits.
MAX_DIGITS = 100
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
#: What Python reads as a number and YAML 1.1 as text (its floats need a dot and a signed exponent).
_NUMBER_AS_TEXT = re.compile(r"[-+]?(\d[\d_]*)?\.?\d*[eE][-+]?\d+")


def check_numbers(root: yaml.Node, where: str) -> None:
    """Refuse an unquoted octal (`016`, not `07`, which is 7 read either way) or base-60 (`1:30`)
    number anywhere in the document, naming the file, the line, the key and the value YAML 1.1 reads it as."""
    for path, node in walk(root):
        if not isinstance(node, yaml.ScalarNode) or node.style is not None or node.tag not in (_INT, _FLOAT):
            continue
        text = node.value
        if node.tag == _INT and len(text) > MAX_DIGITS:  # over 4,300 digits Python would not read it, nor say where
            raise ConfigError(f"{where}:{node.start_mark.line + 1}: {dotted(path) or '(top level)'}: a whole number "
                              f"written in {len(text)} characters; no setting takes one of more than {MAX_DIGITS} digits")
        if _OCTAL.fullmatch(text):
            if int(text.replace("_", ""), 8) == int(text.replace("_", ""), 10):
                continue  # `02` is 2 read either way: nothing is misread ("write 2, or 2 without the 0")
            why, instead = "a leading 0 makes it octal", f"{int(text.replace('_', ''), 10)} without the 0"
        elif ":" in text:
            why, instead = "numbers joined by ':' are one number in base 60", f"'{text}' quoted where a text is meant"
        else:
            continue
        read = yaml.safe_load(text)
        field = dotted(path) or "(top level)"
        raise ConfigError(f"{where}:{node.start_mark.line + 1}: {field}: YAML reads {text} as {read} ({why}); "
                          f"write {read} if that is meant, or {instead}")


def number_hint(given: Any, node: yaml.Node | None, whole: bool) -> str:
    """What to add to a number field's refusal of `given` (the value at `node`; `whole`: a field of
    whole numbers): why YAML read an unquoted `1e3` as text, and how to write it; that a whole
    number is written without its point (`64.0`, which the JSON schema lets pass as JSON Schema counts
    it whole); "" for anything else."""
    if whole and isinstance(given, float) and given.is_integer() and abs(given) < 1e16:
        return f"; a whole number is written without a point: {given:.0f}"
    if not (isinstance(given, str) and isinstance(node, yaml.ScalarNode) and node.style is None
            and _NUMBER_AS_TEXT.fullmatch(given)):
        return ""
    try:
        value = float(given)
    except ValueError:
        return ""
    mantissa, _, power = given.replace("E", "e").partition("e")
    written = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{power if power[0] in '+-' else '+' + power}"
    if whole:
        written = f"{value:.0f}" if value.is_integer() and abs(value) < 1e16 else "a whole number"
    elif value.is_integer() and abs(value) < 1e16:
        written = f"{value:.0f} or {written}"
    return f"; YAML reads {given} as text, not a number (an exponent needs a dot and a sign): write {written}"


#: What YAML reads a plain scalar as, by its tag, where that is no text.
READ_AS = {"bool": "a boolean", "int": "a number", "float": "a number", "timestamp": "a date", "null": "nothing"}


def text_hint(node: yaml.Node | None) -> str:
    """What to add to a text field's refusal of the value at `node` where YAML read it as something
    else (`name: 2024-05-01` is a date, `name: 1.5` a number): that, and to quote it; "" otherwise."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:str":
        return ""
    kind = READ_AS.get(node.tag.rpartition(":")[2])
    if kind is None or kind == "nothing":
        return ""
    return f"; YAML reads {node.value} as {kind}: quote it ('{node.value}')" if len(node.value) <= 40 else ""


def node_at(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, int | None]:
    """The deepest node on an error's path and the 1-based line it is said at (a key's own line for
    a mapping's value); (None, None) without a document."""
    if root is None:
        return None, None
    node, line = root, root.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    child, line = value, key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            return None, line
        node = child
    return node, line


def walk(root: yaml.Node) -> Iterator[tuple[tuple[Any, ...], yaml.Node]]:
    """Every node once (an alias's by the first path to it), with its path of keys and indices."""
    seen: set[int] = set()
    stack: list[tuple[tuple[Any, ...], yaml.Node]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield path, node
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                stack.append(((*path, name), value))
                stack.append(((*path, name), key))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(((*path, i), item) for i, item in reversed(list(enumerate(node.value))))


def dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else (f".{part}" if i else str(part))
                   for i, part in enumerate(path))
