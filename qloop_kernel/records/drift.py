"""Stale and drift detection: fingerprints of what a turn read and changed, compared on replay.

A fingerprint holds, for each variable a turn's code read (as it was first read) or changed (as the
turn left it): its type, shape, dtypes and a content hash of a bounded, deterministic sample, as
``values.fingerprint.record_print`` reads them; the versions of Python and of the libraries the
steps imported or the variables come from; and the notebook cells that defined the variables read.

On replay ``differences`` says what changed before anything runs ("df: 600×5 → 800×5",
"pandas 2.2.3 → 3.1.1"); after each step ``output_differences`` compares its text output and
figures with the saved ones.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import platform
import re
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..attachments import file_hash
from ..contracts import TurnObserver
from ..messages import ModelEvent, ModelResponse, ToolCall, ToolOutcome, Usage
from ..redact import redact_text
from ..text import counted, truncate
from ..values.fingerprint import record_print
from .build import OUTPUT_SUMMARY_CHARS
from .schema import CellPrint, Fingerprint, SourcePrint, ToolCallRecord, VariablePrint

MAX_VARIABLES = 40  # per list in a fingerprint
MAX_SOURCE_CHARS = 200_000  # longer code is not analysed for names


# -- what code reads, assigns and imports ---------------------------------------------------------


@dataclass(frozen=True)
class CodeNames:
    read: frozenset[str] = frozenset()
    assigned: frozenset[str] = frozenset()
    imported: frozenset[str] = frozenset()  # top-level module names


def _parse(code: str) -> ast.Module | None:
    if len(code) > MAX_SOURCE_CHARS:
        return None
    try:
        return ast.parse(code)
    except SyntaxError:  # IPython syntax (magics, !shell): analyse the Python lines alone
        lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()]
        try:
            return ast.parse("\n".join(lines))
        except SyntaxError:
            return None


@lru_cache(maxsize=1024)  # the same cells are looked at again by each turn
def code_names(code: str) -> CodeNames:
    """The global names ``code`` reads before assigning them, assigns, and the modules it imports."""
    tree = _parse(code)
    if tree is None:
        return CodeNames()
    read: set[str] = set()
    assigned: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            target = read if isinstance(node.ctx, ast.Load) else assigned
            target.add(node.id)
        elif isinstance(node, ast.Import):
            imported.update(a.name.partition(".")[0] for a in node.names)
            assigned.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.partition(".")[0])
            assigned.update(a.asname or a.name for a in node.names)
    # A name both assigned and read may have been read before it was set (``df = df.dropna()``).
    return CodeNames(frozenset(read), frozenset(assigned), frozenset(imported))


# -- one variable ------------------------------------------------------------------------------


def variable_print(name: str, value: object) -> VariablePrint:
    """``value`` as the record keeps it (``values.fingerprint.record_print``), named ``name``."""
    found = record_print(value)
    return VariablePrint(
        name=name, type=found.type, shape=found.shape, dtypes=found.dtypes, hash=found.hash
    )


def _is_data(value: object) -> bool:
    """Variables worth a fingerprint: data, not modules, functions or classes."""
    return not isinstance(
        value, types.ModuleType | types.FunctionType | types.BuiltinFunctionType | type
    )


# -- versions --------------------------------------------------------------------------------


def python_version() -> str:
    return platform.python_version()


def library_version(module: str) -> str:
    """The version of an importable top-level module (loaded or installed), or ""."""
    loaded = sys.modules.get(module)
    version = getattr(loaded, "__version__", None) if loaded is not None else None
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version(module)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return ""


def library_versions(modules: Iterable[str]) -> dict[str, str]:
    skip = set(sys.stdlib_module_names) | {"builtins", "__main__", ""}
    found = {m: library_version(m) for m in sorted(set(modules) - skip)}
    return {m: v for m, v in found.items() if v}


# -- a turn's fingerprint, built as its steps run -----------------------------------------------


@dataclass
class TurnPrints:
    """Collects a turn's fingerprint: call ``before_step`` with each step's code, then ``build``."""

    namespace: Mapping[str, Any]
    cells: Mapping[str, CellPrint] = field(default_factory=dict)  # variable -> defining cell
    read: dict[str, VariablePrint] = field(default_factory=dict)
    assigned: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    sources: list[SourcePrint] = field(default_factory=list)  # rules and attachments sent

    def before_step(self, code: str) -> None:
        """Fingerprint the variables ``code`` reads that this turn has not read or set yet."""
        names = code_names(code)
        for name in sorted(names.read - self.assigned - set(self.read)):
            if len(self.read) >= MAX_VARIABLES or name not in self.namespace:
                continue
            value = self.namespace[name]
            if isinstance(value, types.ModuleType):  # the code used a library through its alias
                self.modules.add(value.__name__.partition(".")[0])
            elif _is_data(value) and not name.startswith("_"):
                self.read[name] = variable_print(name, value)
                self.modules.add(type(value).__module__.partition(".")[0])
        self.assigned |= names.assigned
        self.modules |= names.imported

    def inspected(self, name: str) -> None:
        """A variable the model looked at (inspect_variable) counts as read."""
        self.before_step(name.partition(".")[0])

    def build(self, final: bool) -> Fingerprint:
        changed: list[VariablePrint] = []
        if final:
            for name in sorted(self.assigned)[:MAX_VARIABLES]:
                value = self.namespace.get(name)
                if name in self.namespace and _is_data(value) and not name.startswith("_"):
                    changed.append(variable_print(name, value))
        cells = {id(c): c for n in self.read if (c := self.cells.get(n)) is not None}
        attached = {s.path for s in self.sources if s.kind == "cell"}  # compared like cells read
        cells |= {id(c): c for c in self.cells.values() if c.cell_id in attached}
        return Fingerprint(
            python=python_version(),
            libraries=library_versions(self.modules),
            read=list(self.read.values()),
            changed=changed,
            cells=list(cells.values()),
            sources=list(self.sources),
        )


class FingerprintingObserver(TurnObserver):
    """Passes every event on to ``inner`` and fingerprints what each tool call is about to read."""

    def __init__(self, inner: TurnObserver, prints: TurnPrints) -> None:
        self.inner = inner
        self.prints = prints

    def on_event(self, event: ModelEvent) -> None:
        self.inner.on_event(event)

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self.inner.on_response(response, usage, cost_usd)

    def on_tool_start(self, call: ToolCall) -> None:
        code, name = call.input.get("code"), call.input.get("name")
        if call.name == "run_code" and isinstance(code, str):
            self.prints.before_step(code)
        elif call.name == "inspect_variable" and isinstance(name, str):
            self.prints.inspected(name)
        self.inner.on_tool_start(call)

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.inner.on_tool_end(outcome)


class CellLedger:
    """Which notebook cell last assigned each variable: its id and the hash of its source as run."""

    def __init__(self) -> None:
        self.defined: dict[str, CellPrint] = {}

    def ran(self, cell_id: str | None, source: str) -> None:
        if not cell_id or source.lstrip().startswith("%%agent"):
            return
        names = sorted(code_names(source).assigned)
        if not names:
            return
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        cell = CellPrint(cell_id=cell_id, sha256=digest, defines=names[:MAX_VARIABLES])
        self.defined.update(dict.fromkeys(names, cell))


# -- comparing -----------------------------------------------------------------------------------


def _variable_change(saved: VariablePrint, now: VariablePrint) -> str | None:
    name = saved.name
    if saved.type != now.type:
        return f"{name}: {saved.type} → {now.type}"
    if saved.shape != now.shape:
        return f"{name}: {saved.shape or '?'} → {now.shape or '?'}"
    if saved.dtypes != now.dtypes:
        return f"{name}: dtypes {saved.dtypes} → {now.dtypes}"
    if saved.hash and now.hash and saved.hash != now.hash:
        return f"{name}: same shape, different values"
    return None


def differences(saved: Fingerprint | None, namespace: Mapping[str, Any]) -> list[str]:
    """What differs now from when the turn ran: read variables, Python, libraries."""
    if saved is None:
        return []
    found: list[str] = []
    for print_ in saved.read:
        if print_.name not in namespace:
            found.append(f"{print_.name}: not defined now")
            continue
        change = _variable_change(print_, variable_print(print_.name, namespace[print_.name]))
        if change:
            found.append(change)
    found += source_differences(saved.sources)
    if saved.python and saved.python != python_version():
        found.append(f"Python {saved.python} → {python_version()}")
    for module, version in saved.libraries.items():
        now = library_version(module)
        if now != version:
            found.append(f"{module} {version} → {now or 'not installed'}")
    return found


def source_differences(sources: Iterable[SourcePrint]) -> list[str]:
    """The rules files and attached files that changed, or are gone, since the turn ran."""
    found = []
    for source in sources:
        if source.kind == "cell":
            continue  # an attached cell is compared with the cells run (see CellLedger)
        what = "rules file" if source.kind == "rules" else "attached file"
        path = Path(source.path)
        try:
            now = file_hash(path) if path.is_file() else None
        except OSError:
            now = None
        if now is None:
            found.append(f"{what} {source.path}: not found now")
        elif now != source.sha256:
            found.append(f"{what} {source.path}: changed since the turn ran")
    return found


def changed_after(saved: Fingerprint | None, namespace: Mapping[str, Any]) -> list[str]:
    """How the variables a replay set differ from what the original turn left."""
    if saved is None:
        return []
    found = []
    for print_ in saved.changed:
        if print_.name in namespace:
            change = _variable_change(print_, variable_print(print_.name, namespace[print_.name]))
            if change:
                found.append(change)
    return found


CHANGES_HEADING = "namespace changes:"
"""Heading of the section a code step's result ends with (what it changed in the namespace)."""


_IMAGE_COUNT = re.compile(r"\d+ (more )?image(s|\(s\))? (not )?attached\b.*")
"""The line a code step's result gives the count of its figures in, in any wording a record was
saved with ('1 image attached.', and the earlier one with a parenthesised plural): the figures are
compared by hash."""


def _normalised(text: str) -> str:
    """A step's own output: without the namespace-changes section, which the variable checks
    compare (records saved before the section existed lack it), the figure-count line, and
    trailing spaces."""
    own, found, _ = text.rpartition(f"\n\n{CHANGES_HEADING}\n")
    if not found:
        own = text
    lines = (line.rstrip() for line in own.strip().splitlines())
    return "\n".join(line for line in lines if not _IMAGE_COUNT.fullmatch(line)).strip()


def output_differences(step: ToolCallRecord, text: str, image_hashes: list[str]) -> list[str]:
    """How a replayed step's output differs from the saved one (text and figures)."""
    found = []
    now = redact_text(truncate(text, OUTPUT_SUMMARY_CHARS))
    if _normalised(now) != _normalised(step.output_summary):
        found.append("its text output differs from the saved run")
    saved = [image.sha256 for image in step.images]
    if len(saved) != len(image_hashes):
        found.append(f"{counted(len(saved), 'figure')} saved, {len(image_hashes)} now")
    elif saved != image_hashes:
        figures = "its figure differs" if len(saved) == 1 else "its figures differ"
        found.append(f"{figures} from the saved run")
    return found
