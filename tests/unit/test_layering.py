"""The house's plan, checked: harness/ is layered by package, no module imports from a package above
its own, no two modules import each other (directly or round a circle), and outside measure/ and
models/ nothing imports torch (or a backend's library) at module level, so the parent stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.model_plugin_site import write_site

HARNESS = Path(__file__).resolve().parents[2] / "harness"
# Lowest first: the fusion package, then the top-level modules (the plugin API: contract, errors,
# registry, options, ...), statistics and files, then the packages by role; the container subsystem
# (images, engine, launcher) sits beside the run, under the CLI alone.
LAYERS = ["fusion", "", "stats", "files", "models", "mlperf", "scenario", "bundle", "measure", "reporting", "run",
          "container", "cli"]
MAY_IMPORT_TORCH = ("harness.measure", "harness.models")
HEAVY = ("torch", "torchvision", "onnxruntime", "tvm", "tensorrt", "mlperf_loadgen", "numpy")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (HARNESS / parts[1]).is_dir()):
        return parts[1]
    return ""


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The harness modules `path` imports, anywhere in it (function bodies included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in modules}


def test_packages_have_a_docstring_saying_what_they_are_for() -> None:
    for package in filter(None, LAYERS):
        init = HARNESS / package / "__init__.py"
        assert init.exists(), f"harness/{package}/ is not a package"
        assert ast.get_docstring(ast.parse(init.read_text())), f"harness/{package}/__init__.py has no docstring"
    assert {p.name for p in HARNESS.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(filter(None, LAYERS))


def test_no_module_imports_from_a_package_above_its_own() -> None:
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        layer = LAYERS.index(_package(module))
        for imported in _imports(path, modules):
            if LAYERS.index(_package(imported)) > layer:
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_no_import_circles() -> None:
    modules = _modules()
    graph = {m: {i for i in _imports(p, modules) if i != m and not m.startswith(i + ".")} for m, p in modules.items()}
    # a package's __init__ re-exporting its modules is not a circle with them
    graph = {m: {i for i in deps if not (i.startswith(m + "."))} for m, deps in graph.items()}
    state: dict[str, int] = {}
    circles: list[str] = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                circles.append(" -> ".join([*trail[trail.index(dep):], dep]) if dep in trail else f"{module} -> {dep}")
            elif dep not in state:
                visit(dep, [*trail, dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, "\n".join(circles)


def test_no_heavy_imports_at_module_level_outside_measure_and_models(tmp_path: Path) -> None:
    """The plugins' models are read too, docs/adding_a_model.md's example among them: the parent reads
    their descriptions, and their builders import torch."""
    light = sorted(m for m in _modules() if not m.startswith(MAY_IMPORT_TORCH) and not m.endswith("__main__"))
    site = write_site(tmp_path)
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        f"for m in {light!r}: __import__(m)\n"
        "from harness import registry\n"
        "for name in registry.names(): registry.load(name)\n"
        "from harness.models import plugins\n"
        "assert 'acme_conv_block' in plugins.found().models, plugins.found()\n"
        f"heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported at module level: {done.stdout.strip()}"
