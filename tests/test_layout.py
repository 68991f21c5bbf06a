"""The package layout the design names, enforced: the core imports without IPython, ipykernel and
ipywidgets; imports run one way (notebook and headless on top of the core); no import cycles."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import qloop_kernel

PACKAGE = Path(qloop_kernel.__file__).parent
FRONTEND_ONLY = ("qloop_kernel.notebook", "qloop_kernel.headless", "qloop_kernel.eval")
BLOCKED = ("IPython", "ipykernel", "ipywidgets")


def _modules() -> list[str]:
    found = ["qloop_kernel"]
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="qloop_kernel."):
        if info.name.endswith("__main__"):
            continue
        found.append(info.name)
    return sorted(found)


def _is_under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _path_of(module: str) -> Path:
    parts = module.split(".")[1:]
    package = PACKAGE.joinpath(*parts)
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


def _imports(module: str, known: set[str]) -> set[str]:
    """qloop_kernel modules that ``module`` imports anywhere in its body (function-level too)."""
    path = _path_of(module)
    tree = ast.parse(path.read_text("utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return {name for name in found if name in known and name != module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imports(m, known) for m in modules}


def test_core_modules_import_without_ipython_ipykernel_or_ipywidgets():
    core = [m for m in _modules() if not _is_under(m, FRONTEND_ONLY)]
    assert "qloop_kernel.loop" in core and "qloop_kernel.records.schema" in core
    blocker = f"""
import importlib, importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"blocked import of {{name}}")
        return None
sys.meta_path.insert(0, Blocker())
for name in {core!r}:
    importlib.import_module(name)
leaked = sorted(n for n in sys.modules if n.split(".")[0] in {BLOCKED!r})
assert not leaked, leaked
print("ok", len({core!r}))
"""
    done = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_frontend_only_modules_are_where_ipython_is_imported():
    offenders = []
    for module in _modules():
        if _is_under(module, FRONTEND_ONLY):
            continue
        tree = ast.parse(_path_of(module).read_text("utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{module}: {n}" for n in names if n.split(".")[0] in BLOCKED]
    assert offenders == []


def test_the_core_never_imports_the_notebook_or_headless_layers():
    graph = _graph()
    upward = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _is_under(module, FRONTEND_ONLY) and module != "qloop_kernel"
        for target in targets
        if _is_under(target, FRONTEND_ONLY)
    ]
    assert upward == []


def test_the_notebook_layer_never_imports_the_command_lines():
    """`qloop run`, `show`, `export` and `eval` sit above the kernel's side and use it; nothing of
    the kernel's side reaches up into them."""
    graph = _graph()
    upward = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _is_under(module, ("qloop_kernel.notebook",))
        for target in targets
        if _is_under(target, ("qloop_kernel.headless", "qloop_kernel.eval"))
    ]
    assert upward == []


def test_no_import_cycles():
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    # The package's __init__ registers the magics lazily; parents importing children is not a cycle.
    real = [
        c
        for c in cycles
        if not any(b.startswith(a + ".") for a, b in zip(c, c[1:], strict=False))
    ]
    assert real == [], " ; ".join(" -> ".join(c) for c in real)


def test_the_graph_sees_relative_and_function_level_imports():
    graph = _graph()
    assert "qloop_kernel.loop" in graph["qloop_kernel.conversation"]
    assert "qloop_kernel.notebook.replay" in graph["qloop_kernel.notebook.agent"]  # lazy import


# The modules that load the package's other modules lazily, each an entry point with a reason;
# everywhere else the package's imports are at module level, where a reader sees them.
LAZY_BOUNDARY = {
    # what `%load_ext qloop_kernel` loads (tests/test_perf_warmup.py pins the set): the agent and
    # the rest of the notebook layer come with the warm-up or the first turn
    "qloop_kernel",
    "qloop_kernel.notebook.ledger",
    "qloop_kernel.notebook.magic",
    "qloop_kernel.notebook.session",
    "qloop_kernel.notebook.warmup",
    # the command lines: a command loads what it runs, so `qloop --help` stays quick
    "qloop_kernel.headless.cli",
    "qloop_kernel.eval.cli",
    # entry points other programs load: nbconvert's preprocessor, the Jupyter server extension
    # (whose MCP tools need the optional MCP SDK)
    "qloop_kernel.headless",
    "qloop_kernel.server",
    "qloop_kernel.server.extension",
}
# Standard-library modules a function may import: POSIX-only ones, and tomllib (Python 3.11+).
STDLIB_INSIDE = {"fcntl", "termios", "tomllib"}


def _function_level_imports(module: str) -> list[tuple[int, str]]:
    """(line, imported module) of every import statement inside a function of ``module``, once
    (an import in a nested function is inside two)."""
    tree = ast.parse(_path_of(module).read_text("utf-8"))
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                found.update((inner.lineno, alias.name) for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom):
                found.add((inner.lineno, "." * inner.level + (inner.module or "")))
    return sorted(found)


def _imported_inside_functions_off_the_boundary(kind: Callable[[str], bool]) -> list[str]:
    """Imports of modules that ``kind`` picks, inside functions of modules off LAZY_BOUNDARY."""
    return [
        f"{module}:{line} imports {name} inside a function"
        for module in _modules()
        if module not in LAZY_BOUNDARY
        for line, name in _function_level_imports(module)
        if kind(name)
    ]


def test_the_package_loads_its_own_modules_lazily_only_at_its_entry_points():
    assert _imported_inside_functions_off_the_boundary(
        lambda name: name.startswith((".", "qloop_kernel"))
    ) == []


def test_the_standard_library_is_imported_at_module_level():
    def stdlib(name: str) -> bool:
        top = name.split(".")[0]
        return top in sys.stdlib_module_names and top not in STDLIB_INSIDE

    assert _imported_inside_functions_off_the_boundary(stdlib) == []


def test_the_import_checks_see_imports_inside_methods_and_nested_functions():
    found = _function_level_imports("qloop_kernel.notebook.magic")  # a boundary module
    assert any(name == ".agent" for _, name in found)  # inside a method
    assert any(name == "difflib" for _, name in found)


def test_the_command_lines_modules_load_without_the_kernel_side():
    # `qloop run`, `show` and `export` run outside a kernel: what they share with the kernel's
    # side (cell ids, provenance, the prompt of an agent cell, a mirrored record) lives below it.
    probe = (
        "import sys\n"
        "import qloop_kernel.headless.runner, qloop_kernel.headless.show, qloop_kernel.notebook.export\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('IPython', 'ipykernel')"
        " or n.startswith('qloop_kernel.notebook.')"
        " and n not in ('qloop_kernel.notebook.options', 'qloop_kernel.notebook.export')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
