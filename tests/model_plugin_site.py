"""The worked example of docs/adding_a_model.md, written into a site folder as a package the tests
find: its module is the page's Python block, and its entry points and name those of the page's
pyproject.toml block, in a `*.dist-info` folder (what importlib.metadata reads of an installed
package). The page and the tests cannot drift apart."""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "adding_a_model.md"


def _block(language: str) -> str:
    found = re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert found, f"{PAGE} has no {language} block"
    return str(found[0])


def write_site(site: Path, *, extra_entry_points: dict[str, str] | None = None, version: str | None = None) -> Path:
    """The example package in `site` (made), with `extra_entry_points` registered beside the page's
    and its version replaced by `version`; returns `site`."""
    code = _block("python")
    module_path = code.splitlines()[0].removeprefix("# ").strip()
    # the block's `key = "value"` lines, read without tomllib (Python 3.10 has none)
    toml = dict(re.findall(r'^(\S+) = "(.*)"$', _block("toml"), flags=re.M))
    name, recorded_version = toml.pop("name"), toml.pop("version")
    version = version or recorded_version
    entry_points = {**toml, **(extra_entry_points or {})}
    (site / module_path).parent.mkdir(parents=True, exist_ok=True)
    (site / module_path).parent.joinpath("__init__.py").touch()
    (site / module_path).write_text(code)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "[fusionbench.models]\n" + "".join(f"{key} = {value}\n" for key, value in entry_points.items()))
    return site


def forget_modules() -> None:
    """Forget the example's modules this process imported, as a new process would not have them: a
    site written later holds other files of those names, and the harness refuses a model whose module
    is imported from another folder than its package's (harness/models/plugin_code.py)."""
    for module in [name for name in sys.modules if name.split(".")[0] == "acme_models"]:
        del sys.modules[module]
