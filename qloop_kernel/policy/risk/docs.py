"""The rules table of docs/approval.md, rendered from the tables: :func:`rules` lists every rule the
classifier applies, sorted by class (``SYNTAX_RULES`` describes the rules that are code rather than
tables), and :func:`rules_markdown` renders them as one Markdown table, which a test keeps equal to
the copy in the docs."""

from __future__ import annotations

from dataclasses import dataclass

from .assessment import Effect, Risk, severity
from .tables import (
    _EXCEPTIONS,
    ARGUMENT_MUTATORS,
    BUILTINS,
    CALLABLE_FIRST,
    CALLABLE_KEY,
    CELL_MAGICS,
    CODE_MAGICS,
    COMPUTE_METHODS,
    EXTERNAL_METHODS,
    FUNCTIONS,
    LINE_MAGICS,
    MODULES,
    MUTATING_METHODS,
    OPTIONAL_PATH_WRITERS,
    READ_METHODS,
    SQL_FUNCTIONS,
    SQL_METHODS,
    URL_READERS,
)

# The rules that are code rather than tables, for the documentation table.
SYNTAX_RULES: tuple[tuple[Risk, str], ...] = (
    ("read", "expressions and attribute access; calls that the rows below list as read"),
    ("read", "importing an allow-listed module (see `MODULES`), and binding it to its usual name"),
    (
        "read",
        "`open()` without a mode or with a reading one; `getattr(obj, 'name')` (literal, public)",
    ),
    (
        "write",
        "assigning a new name (also `for`, `with ... as`, `def`, `class`, `:=`); augmented "
        "assignment; item or attribute assignment; `inplace=True`; `out=name`; deleting a name "
        "this code created",
    ),
    ("write", "item or attribute assignment on a module (`pd.options...`, `plt.rcParams[...]`)"),
    ("destructive", "rebinding or deleting a name that exists; `from module import *`"),
    (
        "external",
        "importing a module that is not allow-listed; `open()` with a w, a, x or + mode; a "
        "writer given a path; a reader given a URL; `os.environ[...] = `; `!` commands",
    ),
    (
        "unknown",
        "calling a function defined earlier or not known; a method on none of the lists here; "
        "calling the result of an expression; passing a callable it cannot check to `apply`, "
        "`map`...; dunder attributes; `get_ipython()` other than a magic; anything mentioning "
        "qloop; `df.eval`/`df.query` text with `@`, calls or dunders; paths it cannot read; a "
        "module passed around as a value; code that does not parse",
    ),
)


@dataclass(frozen=True)
class Rule:
    """One row of the rules table: a class, what the code does, and the names the row covers."""

    risk: Risk
    what: str
    names: tuple[str, ...] = ()


def _grouped(table: dict[str, Effect], what: str, prefix: str = "") -> list[Rule]:
    groups: dict[Effect, list[str]] = {}
    for name, effect in table.items():
        groups.setdefault(effect, []).append(prefix + name)
    return [
        Rule(effect.risk, f"{what}: {effect.text}" if effect.text else what, tuple(sorted(names)))
        for effect, names in groups.items()
    ]


_SQL_OUTCOMES: tuple[tuple[Risk, str], ...] = (
    ("read", "that only queries (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES)"),
    ("destructive", "with DROP, TRUNCATE or DELETE"),
    ("external", "that changes a database (INSERT, UPDATE, CREATE, ALTER, ...)"),
    ("unknown", "that it cannot read, or that is built from values"),
)


def _sql_rules() -> list[Rule]:
    takes_sql = tuple(sorted(SQL_FUNCTIONS | SQL_METHODS | {"query"}))
    return [Rule(risk, f"SQL text {what}, given to", takes_sql) for risk, what in _SQL_OUTCOMES]


def rules() -> tuple[Rule, ...]:
    """Every rule the classifier applies, from its tables, sorted by class."""
    table_rules = [
        *(Rule(risk, what) for risk, what in SYNTAX_RULES),
        *_grouped(MODULES, "allow-listed module (import is read); its functions by default"),
        *_grouped(FUNCTIONS, "module function or attribute"),
        Rule("write", "function that changes its first argument", tuple(sorted(ARGUMENT_MUTATORS))),
        Rule(
            "external",
            "reader given a URL (a literal local path is read, a path it cannot read unknown)",
            tuple(f"{p}*" if p.endswith("_") else p for p in URL_READERS),
        ),
        *_sql_rules(),
        *_grouped(
            {k: v for k, v in BUILTINS.items() if k not in _EXCEPTIONS.split()},
            "builtin (the exception classes are read too)",
        ),
        Rule("read", "method on an object of unknown type", tuple(sorted(READ_METHODS))),
        Rule("write", "method that changes its receiver", tuple(sorted(MUTATING_METHODS))),
        *_grouped(COMPUTE_METHODS, "method"),
        *_grouped(EXTERNAL_METHODS, "method"),
        Rule(
            "external",
            "writer given a path (without one it returns text: read)",
            tuple(sorted(OPTIONAL_PATH_WRITERS)),
        ),
        Rule(
            "unknown",
            "higher-order call given a callable it cannot check (first argument, `func=`, `key=`)",
            tuple(sorted(CALLABLE_FIRST | CALLABLE_KEY)),
        ),
        *_grouped(LINE_MAGICS, "line magic", "%"),
        *_grouped(CELL_MAGICS, "cell magic", "%%"),
        Rule(
            "read",
            "magic that runs code: the class of that code",
            tuple(f"%{m}" for m in CODE_MAGICS),
        ),
    ]
    return tuple(sorted(table_rules, key=lambda r: severity(r.risk)))


def rules_markdown() -> str:
    """The rules as one Markdown table (docs/approval.md holds a copy that a test compares)."""
    lines = ["| Class | What the code does | Names |", "| --- | --- | --- |"]
    for rule in rules():
        names = ", ".join(f"`{n}`" for n in rule.names)
        lines.append(f"| {rule.risk} | {rule.what.replace('|', '/')} | {names} |")
    return "\n".join(lines) + "\n"
