"""Read-only tools over the user's live namespace: ``list_variables`` and ``inspect_variable``.

Both are pure functions of a namespace mapping (the IPython ``user_ns``) and return bounded
plain text for the model. No data library is imported here, and lazy or distributed objects are
described without computing them (see :mod:`qloop_kernel.values.summaries`). Both run inside the
read guard, and call no method of a class that is not installed code (``summaries.trust``). Model mistakes
(an unknown name, paging past the end) raise ``ToolInputError``, which the tool runtime reports
as a plain error result that says how to fix the call.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Container, Mapping, Sequence

from qloop_kernel.errors import ToolInputError
from qloop_kernel.text import marker
from qloop_kernel.values.summaries import (
    DEFAULT_ROWS,
    MAX_ROWS,
    cut,
    fit_text,
    format_table,
    is_function_like,
    qualified_name,
)

from ..values import summaries
from ..values.summaries.trust import (
    class_dict,
    class_module,
    instance_attributes,
    origin,
    readable,
    static_lookup,
    static_mro,
)

IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
MIN_MAX_CHARS = 500  # room for a title, a table header and a truncation marker
MAX_CHARS = 8_000  # default size of one tool result
__all__ = [
    "DEFAULT_ROWS",
    "MAX_CHARS",
    "MAX_ROWS",
    "UnknownNameError",
    "inspect_variable",
    "list_variables",
    "resolve_path",
]


class UnknownNameError(ToolInputError):
    """A variable or attribute that does not exist; the message suggests close names."""


def list_variables(
    namespace: Mapping[str, object],
    *,
    hidden: Container[str] = (),
    limit: int = 200,
    max_chars: int = MAX_CHARS,
) -> str:
    """List the user's variables, one line each: name, type, shape or length, memory, details.

    Skips names starting with ``_``, modules, IPython's own names, names in ``hidden`` and
    classes or functions imported from libraries (those defined in the notebook are kept).
    When ``hidden`` is a mapping (IPython's ``shell.user_ns_hidden``), a hidden name the user
    has since rebound to another object is listed, as IPython's ``%who`` does. Memory is
    ``memory_usage(deep=False)`` for pandas objects, ``nbytes`` for arrays, the estimated size
    of polars and Arrow tables and the shallow ``sys.getsizeof`` otherwise; lazy collections
    (dask, Spark, polars LazyFrame) are described without computing them, so their row counts
    show as ``?``. At most ``limit`` variables and ``max_chars`` characters are returned; a
    final line says how many variables were left out.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    _check_max_chars(max_chars)
    with summaries.reading():
        names = sorted(
            (name for name, value in namespace.items() if _is_user_variable(name, value, hidden)),
            key=lambda name: (name.casefold(), name),
        )
        rows = [_variable_row(name, namespace[name]) for name in names[:limit]]
    if not names:
        return "No user variables defined."
    header = ["name", "type", "shape/len", "memory", "details"]
    table = format_table(header, rows).split("\n")
    title = f"{len(names):,} user variables (memory is shallow except data frames and arrays):"
    return _fit_lines([title, table[0]], table[1:], len(names), max_chars, limit)


def inspect_variable(
    namespace: Mapping[str, object],
    name: str,
    *,
    columns: Sequence[str] | None = None,
    offset: int = 0,
    rows: int | None = None,
    max_chars: int = MAX_CHARS,
) -> str:
    """Type-aware summary of one variable, or of an attribute path such as ``model.coef_``.

    DataFrames: shape, dtypes, memory, index, ``rows`` rows from ``offset`` (of the selected
    ``columns``), then per column the null count and statistics, computed on a deterministic
    sample for big frames. Series, arrays, polars and Arrow tables, xarray objects and tensors
    likewise; lazy collections (dask, Spark, polars LazyFrame, Arrow datasets) are described
    from their metadata, and rows are read from them only when ``rows`` is given. Containers,
    strings, functions, classes, modules and other objects get their own summaries. ``rows``
    defaults to DEFAULT_ROWS for in-memory data. The text is at most ``max_chars`` characters
    and ends with an explicit marker when it was cut.

    Nothing is called on an object whose class is not installed code (docs/security.md, "What a
    read runs"), and any such code a library reaches is stopped before its first line.

    Raises ToolInputError (UnknownNameError, with close names, for an unknown variable or
    attribute) for a malformed name, unknown columns, or paging that does not fit the variable.
    """
    _check_max_chars(max_chars)
    _check_paging(offset, rows)
    paging = summaries.Paging(columns=_column_names(columns), offset=offset, rows=rows)
    path = name.strip()
    with summaries.reading():
        obj = resolve_path(namespace, path)
        text = summaries.summarize(obj, path, paging)
    return fit_text(text, max_chars, "narrow it with columns=, offset= and rows=")


def _check_paging(offset: int, rows: int | None) -> None:
    if offset < 0:
        raise ToolInputError(f"offset must be 0 or more, got {offset:,}")
    if rows is not None and not 0 <= rows <= MAX_ROWS:
        raise ToolInputError(
            f"rows must be between 0 and {MAX_ROWS:,}, got {rows:,}; to see more, call again "
            f"with offset= (for example offset={MAX_ROWS:,}, rows={MAX_ROWS:,} for the next page)"
        )


def resolve_path(namespace: Mapping[str, object], path: str) -> object:
    """The object at ``path``: a variable name, optionally followed by ``.attribute`` parts.

    Attributes are read with ``getattr``; nothing is evaluated. On a database connection,
    ``conn.table`` and ``conn.schema.table`` name a table or view of its catalog first. On an
    object whose class is not installed code, an attribute is read from the instance's own
    ``__dict__`` or its class's namespace; one its class computes (a property, ``__getattr__``)
    is refused, since reading it would run the user's code.
    """
    parts = path.split(".")
    if not all(part.isidentifier() for part in parts):
        raise ToolInputError(
            f"{path!r} is not a variable name or dotted attribute path (such as df or "
            "model.coef_); indexing and calls are not supported"
        )
    root = parts[0]
    if root not in namespace:
        candidates = [key for key in namespace if isinstance(key, str) and not key.startswith("_")]
        hint = _suggest(root, candidates, "Use list_variables to see the available variables.")
        raise UnknownNameError(f"No variable named {root!r}. {hint}")
    obj = namespace[root]
    if readable(type(obj)) and (table := summaries.databases.table_of(obj, parts[1:])) is not None:
        return table
    for depth, attribute in enumerate(parts[1:], start=1):
        obj = _attribute(obj, attribute, ".".join(parts[:depth]))
    return obj


def _attribute(obj: object, attribute: str, owner: str) -> object:
    """``obj``'s attribute: read with getattr on installed code's objects, from what Python holds
    on others (``_static_attribute``)."""
    try:
        with summaries.reading():  # a stop caught below is handled: no outer block raises it
            if not readable(type(obj)):
                return _static_attribute(obj, attribute, owner)
            return getattr(obj, attribute)
    except AttributeError:
        raise UnknownNameError(
            f"{owner!r} ({qualified_name(type(obj))}) has no attribute {attribute!r}. "
            f"{_attribute_hint(attribute, obj)}"
        ) from None
    except summaries.UserCodeStopped as stop:
        raise ToolInputError(
            f"{owner}.{attribute} was not read: {stop}; read it with run_code (it needs "
            "approval), or opt its class in with `%agent set trusted_reprs NAME`"
        ) from None


def _static_attribute(obj: object, attribute: str, owner: str) -> object:
    """An attribute of an object whose class is not installed code, found as Python finds it
    but without running that class's code: an instance attribute, or its class's attribute
    through the descriptor an installed class gives it (a function gives a bound method; a
    property's getter is the user's code, which the read guard stops)."""
    cls = type(obj)
    found, member = static_lookup(cls, attribute)
    computed = found and static_lookup(type(member), "__get__")[0]
    overriding = computed and any(
        static_lookup(type(member), name)[0] for name in ("__set__", "__delete__")
    )
    attributes = instance_attributes(obj)
    if attribute in attributes and not overriding:
        return attributes[attribute]
    if not found:
        raise AttributeError(attribute)
    if not computed:
        return member
    if not readable(type(member)):
        raise ToolInputError(
            f"{owner}.{attribute} was not read: it is computed by {qualified_name(type(member))} "
            f"({origin(type(member))}), and a read runs no code that is not installed code; "
            "read it with run_code (it needs approval)"
        )
    return member.__get__(obj, cls)  # type: ignore[attr-defined]


def _suggest(name: str, candidates: Sequence[str], fallback: str) -> str:
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.6)
    if close:
        return "Did you mean: " + ", ".join(close) + "?"
    return fallback


def _attribute_hint(name: str, obj: object) -> str:
    try:
        with summaries.reading():  # a stop caught below is handled: no outer block raises it
            names = [attribute for attribute in _names(obj) if not attribute.startswith("__")]
    except (Exception, summaries.UserCodeStopped):
        names = []
    public = [attribute for attribute in names if not attribute.startswith("_")]
    listing = cut(", ".join(public), 300) if public else "none"
    return _suggest(name, names, f"Public attributes: {listing}.")


def _names(obj: object) -> list[str]:
    """``dir(obj)``; for an object whose class is not installed code, its instance attributes and
    the names its classes define (its ``__dir__`` is not called)."""
    if readable(type(obj)):
        return dir(obj)
    defined = (name for cls in static_mro(type(obj)) for name in class_dict(cls))
    return sorted({*instance_attributes(obj), *defined})


def _check_max_chars(max_chars: int) -> None:
    if max_chars < MIN_MAX_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_MAX_CHARS}, got {max_chars}")


def _column_names(columns: Sequence[str] | None) -> tuple[str, ...] | None:
    if columns is None:
        return None
    names = (columns,) if isinstance(columns, str) else tuple(str(column) for column in columns)
    if not names:
        raise ToolInputError("columns must name at least one column (or be omitted)")
    return names


# ---------------------------------------------------------------------------------------------
# list_variables helpers
# ---------------------------------------------------------------------------------------------


def _is_user_variable(name: object, value: object, hidden: Container[str]) -> bool:
    if type(name) is not str or name.startswith("_") or name in IPYTHON_NAMES:
        return False
    if issubclass(type(value), types.ModuleType) or _is_hidden(name, value, hidden):
        return False
    if not is_function_like(value):
        return True
    if issubclass(type(value), type):
        return class_module(value) == "__main__"  # type: ignore[arg-type]
    return getattr(value, "__module__", None) == "__main__"


def _is_hidden(name: str, value: object, hidden: Container[str]) -> bool:
    if isinstance(hidden, Mapping):
        return name in hidden and hidden[name] is value
    return name in hidden


def _variable_row(name: str, value: object) -> list[str]:
    kind = "class" if issubclass(type(value), type) else qualified_name(type(value))
    try:
        brief = summaries.brief(value)
    except Exception:  # a broken property or __sizeof__ must not hide the variable
        brief = summaries.Brief()
    except summaries.UserCodeStopped:  # a library's method reached the user's code
        brief = summaries.Brief(details="not read: would run code that is not installed code")
    return [cut(name, 40), cut(kind, 40), brief.size, brief.memory, brief.details]


def _fit_lines(head: list[str], rows: list[str], total: int, max_chars: int, limit: int) -> str:
    """Keep whole variable lines within ``max_chars``, ending with a marker for the rest."""
    kept = list(head)
    used = sum(len(line) + 1 for line in head)
    for shown, line in enumerate(rows):
        rest = total - shown - 1
        reserve = len(_omitted_marker(rest, limit, max_chars)) + 1 if rest else 0
        if used + len(line) + 1 + reserve > max_chars:
            return "\n".join([*kept, _omitted_marker(total - shown, limit, max_chars)])
        kept.append(line)
        used += len(line) + 1
    if total > len(rows):
        kept.append(_omitted_marker(total - len(rows), limit, max_chars))
    return "\n".join(kept)


def _omitted_marker(count: int, limit: int, max_chars: int) -> str:
    hint = f"limit={limit}, max_chars={max_chars}; inspect one with inspect_variable"
    return marker(count, "more variables", hint)
