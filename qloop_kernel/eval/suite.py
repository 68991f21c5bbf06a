"""Suites and tasks: a task is an ordinary notebook whose roles are cell tags.

A task notebook holds, in order, cells tagged ``qloop-setup`` (data made in the kernel), one or more
``%%agent`` cells (the prompts), and cells tagged ``qloop-check`` (each one check: it passes when it runs
without an exception; the agent's answer is the variable ``answer``, every answer so far ``answers``).
Cells tagged ``qloop-solution`` are never run by ``qloop eval``: they hold a reference solution, one per
agent cell, that the scripted solvers of the tests play. The notebook's metadata ``qloop_eval`` may say
``{"forbid_destructive": true}`` (the task fails when a destructive step was approved) and
``{"max_turns": N}`` (model calls per agent cell).

A suite is a folder of task notebooks, a TOML or YAML file listing them (``tasks = ["a.ipynb", ...]``,
paths relative to the file), or the name of a suite shipped with the package (``starter``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import nbformat

from ..errors import QloopError

SETUP_TAG = "qloop-setup"
CHECK_TAG = "qloop-check"
SOLUTION_TAG = "qloop-solution"
METADATA_KEY = "qloop_eval"
SHIPPED = ("starter",)


class SuiteError(QloopError):
    """A suite or task that cannot be run: one line saying which file and why."""


@dataclass(frozen=True)
class Task:
    """One task notebook, checked and ready to run."""

    id: str
    path: Path
    notebook: Any  # nbformat.NotebookNode, solutions left in (the harness drops them)
    prompts: list[str]
    checks: list[str]
    solutions: list[str] = field(default_factory=list)
    forbid_destructive: bool = False
    max_turns: int | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    source: Path
    tasks: list[Task]


def tags(cell: Any) -> list[str]:
    found = cell.get("metadata", {}).get("tags", [])
    return [str(tag) for tag in found] if isinstance(found, list) else []


def is_agent(cell: Any) -> bool:
    return bool(cell.cell_type == "code" and cell.source.lstrip().startswith("%%agent"))


def prompt_of(source: str) -> str:
    """The prompt of an agent cell: the lines after ``%%agent`` (its options left out)."""
    return source.lstrip().partition("\n")[2].strip()


def shipped_suite(name: str) -> Path:
    return Path(str(resources.files("qloop_kernel.eval") / "suites" / name))


def load_suite(spec: str) -> Suite:
    """The suite named by a folder, a TOML/YAML list, or a shipped suite's name."""
    path = Path(spec)
    if not path.exists() and spec in SHIPPED:
        path = shipped_suite(spec)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.ipynb") if not p.name.endswith(".executed.ipynb"))
        name = path.name
    elif path.is_file() and path.suffix in (".toml", ".yaml", ".yml"):
        files = [path.parent / entry for entry in _listed(path)]
        name = path.stem
    elif path.exists():
        raise SuiteError(f"{spec}: a suite is a folder of notebooks or a .toml/.yaml list")
    else:
        known = ", ".join(SHIPPED)
        raise SuiteError(f"{spec}: no such folder or file (shipped suites: {known})")
    if not files:
        raise SuiteError(f"{spec}: the suite has no task notebooks")
    tasks = [load_task(file) for file in files]
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise SuiteError(f"{task.path}: a second task named {task.id!r}")
        seen.add(task.id)
    return Suite(name=name, source=path, tasks=tasks)


def _listed(path: Path) -> list[str]:
    parse = _parser(path)
    try:
        data: Any = parse(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise SuiteError(
            f"{path}: not valid {path.suffix[1:].upper()}: {_first_line(exc)}"
        ) from None
    entries = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise SuiteError(f'{path}: expected a list of notebook paths: tasks = ["a.ipynb", ...]')
    return entries


def load_task(path: Path) -> Task:
    """Read and check one task notebook (a malformed one raises SuiteError)."""
    if not path.is_file():
        raise SuiteError(f"{path}: no such task notebook")
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:
        raise SuiteError(f"{path}: not a valid notebook: {_first_line(exc)}") from None
    cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    agents = [i for i, cell in enumerate(cells) if is_agent(cell)]
    checks = [i for i, cell in enumerate(cells) if CHECK_TAG in tags(cell)]
    solutions = [c.source for c in cells if SOLUTION_TAG in tags(c)]
    if not agents:
        raise SuiteError(f"{path}: the task has no %%agent cell")
    if not checks:
        raise SuiteError(f"{path}: the task has no cell tagged {CHECK_TAG!r}")
    if min(checks) < min(agents):
        raise SuiteError(f"{path}: a {CHECK_TAG!r} cell comes before the first %%agent cell")
    if solutions and len(solutions) != len(agents):
        raise SuiteError(
            f"{path}: {len(solutions)} {SOLUTION_TAG!r} cells for {len(agents)} %%agent cells"
        )
    options = _task_options(path, nb.metadata.get(METADATA_KEY, {}))
    return Task(
        id=path.stem, path=path, notebook=nb,
        prompts=[prompt_of(cells[i].source) for i in agents],
        checks=[cells[i].source for i in checks], solutions=solutions, **options,
    )  # fmt: skip


def _task_options(path: Path, meta: Any) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise SuiteError(f"{path}: metadata {METADATA_KEY!r} must be an object")
    unknown = set(meta) - {"forbid_destructive", "max_turns"}
    if unknown:
        raise SuiteError(f"{path}: unknown {METADATA_KEY!r} keys: {', '.join(sorted(unknown))}")
    forbid = meta.get("forbid_destructive", False)
    turns = meta.get("max_turns")
    if not isinstance(forbid, bool):
        raise SuiteError(f"{path}: {METADATA_KEY}.forbid_destructive must be true or false")
    if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool) or turns < 1):
        raise SuiteError(f"{path}: {METADATA_KEY}.max_turns must be a whole number >= 1")
    return {"forbid_destructive": forbid, "max_turns": turns}


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _parser(path: Path) -> Callable[[str], Any]:
    """The loader of a suite list's format; a missing parser is named with how to install it."""
    if path.suffix == ".toml":
        try:
            import tomllib  # Python 3.11+
        except ImportError:
            try:
                import tomli as tomllib  # the same parser, for Python 3.10
            except ImportError:
                raise SuiteError(
                    f"{path}: reading TOML needs Python 3.11 or `pip install tomli`"
                ) from None
        loads: Callable[[str], Any] = tomllib.loads  # tomli and PyYAML come without stubs
        return loads
    try:
        import yaml
    except ImportError:
        raise SuiteError(f"{path}: reading YAML needs PyYAML: `pip install pyyaml`") from None
    safe_load: Callable[[str], Any] = yaml.safe_load
    return safe_load
