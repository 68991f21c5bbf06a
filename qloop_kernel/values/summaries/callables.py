"""Functions, classes and modules: signature, docstring, source, bases, public names."""

from __future__ import annotations

import ast
import inspect
import linecache
import types
from typing import Any

from ...text import marker
from .common import (
    DOC_CHARS,
    NAMES_CHARS,
    SOURCE_CHARS,
    Brief,
    Kind,
    Paging,
    cut,
    name_of,
    qualified_name,
    reject_paging,
)
from .trust import readable, text_of


def is_function_like(obj: object) -> bool:
    """Classes, functions, methods, builtins and other named callables (ufuncs, dispatchers).

    A callable object of a class that is not installed code is not one: its ``__name__`` may be
    the user's ``__getattr__``.
    """
    cls = type(obj)
    if issubclass(cls, type):
        return True
    return callable(obj) and readable(cls) and hasattr(obj, "__name__")


def _callable_kind(obj: object) -> str:
    if isinstance(obj, type):
        return "class"
    if inspect.ismethod(obj):
        return "method"
    if inspect.isfunction(obj):
        return "function"
    if inspect.isbuiltin(obj):
        return "builtin function"
    return qualified_name(type(obj))


def summarize_callable(obj: Any, label: str, paging: Paging) -> str:
    """Kind, origin, signature, class bases and methods, docstring and source."""
    reject_paging(obj, label, paging)
    name = name_of(obj)
    lines = [f"{label}: {_callable_kind(obj)} {name}{_origin(obj)}"]
    signature = signature_text(obj)
    if signature:
        lines.append(f"Signature: {cut(name.rpartition('.')[2] + signature, 500)}")
    if isinstance(obj, type):
        lines += _class_lines(obj)
    doc = inspect.getdoc(obj)
    if doc:
        lines += ["Docstring:", cut(doc, DOC_CHARS)]
    lines += _source_lines(obj)
    return "\n".join(lines)


def _origin(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    if module == "__main__":
        return " defined in the notebook"
    return f" from module {module}" if module else ""


def signature_text(obj: object) -> str | None:
    """``(x, y=1)``, or None for callables without a signature (some builtins and C classes)."""
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _class_lines(cls: type) -> list[str]:
    bases = ", ".join(qualified_name(base) for base in cls.__mro__[1:-1]) or "object"
    methods = sorted(
        name for name, value in vars(cls).items() if not name.startswith("_") and callable(value)
    )
    lines = [f"Bases (MRO): {cut(bases, 500)}"]
    if methods:
        lines.append(f"Public methods defined here: {cut(', '.join(methods), NAMES_CHARS)}")
    return lines


def _source_lines(obj: object) -> list[str]:
    source, problem = _source(obj)
    if source is None:
        return [f"Source: not available ({problem})"]
    total = len(source.splitlines())
    if len(source) > SOURCE_CHARS:
        kept = source[:SOURCE_CHARS].rpartition("\n")[0]
        shown = len(kept.splitlines())
        source = f"{kept}\n{marker(total - shown, 'lines of source')}"
    return [f"Source ({total:,} lines):", source.rstrip("\n")]


def _source(obj: object) -> tuple[str | None, str]:
    """The source of ``obj``, or None and the reason it is not available."""
    try:
        return inspect.getsource(obj), ""  # type: ignore[arg-type]
    except (OSError, TypeError) as exc:
        problem = f"{type(exc).__name__}: {cut(str(exc), 100)}"
    if isinstance(obj, type):
        return _class_source_from_methods(obj), problem
    return None, problem


def _class_source_from_methods(cls: type) -> str | None:
    """Source of a class found through one of its methods' code objects.

    ``inspect.getsource`` finds classes through their module's file, which a notebook's
    ``__main__`` has not got (before Python 3.13), while IPython puts each cell in linecache.
    """
    code = next((f.__code__ for f in map(_function_of, vars(cls).values()) if f), None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef)
            and node.name == cls.__name__
            and node.lineno <= code.co_firstlineno <= (node.end_lineno or 0)
        ):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1 : node.end_lineno])
    return None


def _function_of(member: object) -> types.FunctionType | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        member = member.fget
    return member if isinstance(member, types.FunctionType) else None


def summarize_module(module: types.ModuleType, label: str, paging: Paging) -> str:
    """Name, version, file, first paragraph of the docstring and public names."""
    reject_paging(module, label, paging)
    # the module's dict, not getattr(): a module's own __getattr__ would run for a missing name
    namespace = vars(module)
    version = text_of(namespace.get("__version__"))
    lines = [
        f"{label}: module {text_of(namespace.get('__name__'))}"
        + (f", version {version}" if version else ""),
        f"File: {text_of(namespace.get('__file__')) or 'built-in'}",
    ]
    doc = text_of(namespace.get("__doc__"))
    if doc:
        first_paragraph = inspect.cleandoc(doc).split("\n\n")[0]
        lines.append(f"Doc: {cut(first_paragraph, 500)}")
    exported = namespace.get("__all__")
    names = (
        sorted(name for name in map(text_of, exported) if name is not None)
        if type(exported) is list or type(exported) is tuple
        else sorted(name for name in namespace if not name.startswith("_"))
    )
    lines.append(f"Public names ({len(names):,}): {cut(', '.join(names), NAMES_CHARS)}")
    return "\n".join(lines)


def brief_callable(obj: object) -> Brief:
    """The signature of a function or class (its size means nothing here)."""
    signature = signature_text(obj)
    return Brief(details=cut(getattr(obj, "__name__", "") + signature, 60) if signature else "")


KINDS = [
    Kind(
        "module",
        frozenset(),
        lambda obj: isinstance(obj, types.ModuleType),
        summarize_module,
        lambda obj: Brief(),
    ),
    Kind("callable", frozenset(), is_function_like, summarize_callable, brief_callable),
]
