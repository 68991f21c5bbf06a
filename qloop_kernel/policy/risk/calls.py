"""Calls, the top of the walk: a call is judged by the qualified name it resolves to (from the
tables, or by a rule of its own for ``open``, ``getattr``, ``print``, ``len``, ``pandas.eval`` and
``numpy.load``), else by a rule for its method (Spark read and write chains, SQL, expression strings,
``open``, ``rename``, writers given a path, what made the receiver, the method tables), else as code
it cannot check. Readers given a URL, files opened for writing and the SQL a call runs are told apart
here, and a callable given to ``apply``, ``map`` or ``sorted(key=)`` is checked, since it runs."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Literal

from .assessment import Effect
from .lookup import _call_effect, _shown
from .magics import _MagicWalk
from .nodes import (
    _argument,
    _attribute_chain,
    _callable_candidates,
    _describe,
    _first_argument,
    _is_false,
)
from .strings import (
    _MAYBE_SCHEME,
    _MODE,
    _PLACEHOLDER,
    _SQL_QUERY,
    _SQL_STATEMENT,
    _URL,
    expression_effect,
    sql_effect,
)
from .tables import (
    AMBIGUOUS_COMPUTE,
    ARGUMENT_MUTATORS,
    BY_NAME,
    CALLABLE_FIRST,
    CALLABLE_KEY,
    COMPUTE_METHODS,
    DATABASE,
    EXTERNAL_METHODS,
    FUNCTIONS,
    IN_MEMORY_KINDS,
    LAZY_FAMILIES,
    MUTATING_METHODS,
    OPTIONAL_PATH_WRITERS,
    PATH_KEYWORDS,
    READ_METHODS,
    READS,
    SPARK_CONFIGURE,
    SPARK_READ_FORMATS,
    SPARK_WRITE_ACTIONS,
    SQL_FUNCTIONS,
    SQL_METHODS,
    STARTS_DASK,
    STARTS_SPARK,
    UNCHECKED,
    UNPICKLES,
    URL_READERS,
    WRITES_FILES,
    _words,
)


class _Analysis(_MagicWalk):
    """One walk over a module's statements, collecting reasons and changed names."""

    # -- calls -------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        if self.magic(node):
            return
        func = node.func
        if isinstance(func, ast.Name):
            self.check_identifier(func.id, func)
        elif isinstance(func, ast.Attribute):
            self.visit_receiver(func)
        else:
            self.visit(func)
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            self.visit(argument)
        self.call(node)
        self.keyword_effects(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        qualified = self.resolve(func)
        if isinstance(func, ast.Lambda):
            pass  # its body is judged as written
        elif qualified is not None:
            self.call_qualified(node, qualified)
        elif isinstance(func, ast.Name):
            self.call_name(node, func.id)
        elif isinstance(func, ast.Attribute):
            self.call_method(node, func)
        else:
            self.note(
                node, UNCHECKED, f"calls the result of {_describe(func)}, which it cannot check"
            )
        self.check_callables(node, qualified)
        if self.changes_arguments(func):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self.mutate(argument, node, f" (given to {_describe(func)}, which changes it)")

    def changes_arguments(self, func: ast.expr) -> bool:
        """Whether a function or lambda this code defines changes the objects passed to it."""
        if isinstance(func, ast.Lambda):
            return id(func) in self.mutating_lambdas
        return isinstance(func, ast.Name) and func.id in self.names.param_mutators

    def call_name(self, node: ast.Call, name: str) -> None:
        if name in self.names.functions and name in self.names.created:
            return  # defined above: its body was judged where it was written
        if name == "get_ipython" and not self.shadowed(name):
            return  # noted as an identifier
        if name in self.names.aliases:  # bound to several modules or functions
            self.note(node, UNCHECKED, f"calls {name}(), which may be one of several things")
            return
        earlier = ", defined earlier," if self.exists(name) else ""
        self.note(node, UNCHECKED, f"calls {name}(){earlier} which it cannot check")

    def call_qualified(self, node: ast.Call, qualified: str) -> None:
        shown = _shown(qualified)
        special = _SPECIAL_CALLS.get(qualified)
        if special is not None:
            special(self, node, shown)
            return
        if qualified in ARGUMENT_MUTATORS and node.args:
            self.mutate(node.args[0], node, f" ({shown})")
            return
        if qualified in SQL_FUNCTIONS:
            self.sql_call(node, shown)
            return
        if qualified.startswith(URL_READERS) and qualified not in FUNCTIONS:
            self.reader_call(node, shown)
            return
        effect = _call_effect(qualified)
        self.note(node, effect, f"{effect.text} ({shown})")

    def call_method(self, node: ast.Call, func: ast.Attribute) -> None:
        if self.is_ambiguous_module(func.value):
            self.note(
                node, UNCHECKED, f"calls {_describe(func)}(), which may be a module's function"
            )
            return
        for rule in _METHOD_RULES:
            if rule(self, node, func):
                return
        self.note(node, UNCHECKED, f"calls {_describe(func)}(), which it cannot check")

    def keyword_effects(self, node: ast.Call) -> None:
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "inplace" and not _is_false(value) and receiver is not None:
                self.mutate(receiver, node, f" ({_describe(node.func)} with inplace=True)")
            elif keyword.arg == "out" and isinstance(
                value, (ast.Name, ast.Attribute, ast.Subscript)
            ):
                self.mutate(value, node, f" (out= of {_describe(node.func)})")

    def check_callables(self, node: ast.Call, qualified: str | None) -> None:
        """A callable given to ``apply``, ``map``, ``sorted(key=)``... runs: check it can be judged."""
        name = (qualified or "").split(".")[-1] or getattr(node.func, "attr", "")
        called = (
            qualified if qualified and qualified.startswith(("builtins.", "functools.")) else name
        )
        given = [k.value for k in node.keywords if k.arg in {"func", "function"}]
        if called in CALLABLE_FIRST and node.args:
            given.append(node.args[0])
        if name in CALLABLE_KEY:
            given += [k.value for k in node.keywords if k.arg == "key"]
        for argument in given:
            for candidate in _callable_candidates(argument):
                if self.is_unchecked_callable(candidate):
                    shown = _describe(candidate)
                    self.note(node, UNCHECKED, f"passes {shown} to {name}, which calls it")
                elif self.changes_arguments(candidate):
                    self.mutate_inputs(node, candidate)

    def mutate_inputs(self, node: ast.Call, callback: ast.expr) -> None:
        """A callback that changes its arguments is given the receiver's or the other arguments' items."""
        receiver = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        others = [
            a
            for a in [*receiver, *node.args, *(k.value for k in node.keywords)]
            if a is not callback
        ]
        for other in others:
            self.mutate(
                other, node, f" (through {_describe(callback)}, which changes its arguments)"
            )

    def is_unchecked_callable(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            if self.resolve_name(node.id) is not None:
                return False  # a module function: judged as a reference
            made_here = node.id in self.names.functions or node.id in self.names.strings
            return not made_here and node.id not in self.names.kinds
        return isinstance(node, ast.Attribute) and self.resolve(node) is None

    # -- special calls and method rules -------------------------------------------------------------

    def sql_call(self, node: ast.Call, shown: str) -> None:
        query = _first_argument(node, {"sql", "query", "statement"})
        text = self.string_value(query) if query is not None else None
        if text is None:
            self.note(node, Effect("unknown", f"runs SQL it cannot read ({shown})"))
            return
        effect = sql_effect(text.replace(_PLACEHOLDER, " "))
        self.note(node, effect, f"{effect.text} ({shown})")
        if _PLACEHOLDER in text and effect.risk != "destructive":
            self.note(node, Effect("unknown", f"builds SQL from values it cannot read ({shown})"))

    def reader_call(self, node: ast.Call, shown: str) -> None:
        source = _first_argument(node, PATH_KEYWORDS)
        where = self.path_kind(source) if source is not None else "local"
        if where == "url":
            self.note(node, Effect("external", f"reads from the network ({shown})"))
        elif where == "unknown":
            self.note(node, Effect("unknown", f"reads from a path that may be a URL ({shown})"))

    def path_kind(self, node: ast.expr) -> Literal["local", "url", "unknown"]:
        """Whether a path expression is a local path, a URL, or cannot be told."""
        if self.kind_of(node) in {"pathlib.Path", "pathlib.PurePath", *IN_MEMORY_KINDS}:
            return "local"
        if isinstance(node, ast.Call) and self.resolve(node.func) in _PATH_BUILDERS:
            return "local" if not node.args else self.path_kind(node.args[0])
        text = self.string_value(node)
        if text is None:
            return "unknown"
        prefix = text.split(_PLACEHOLDER)[0]
        if _URL.match(prefix) and not prefix.lower().startswith("file://"):
            return "url"
        if _PLACEHOLDER in text and (not prefix or _MAYBE_SCHEME.match(prefix)):
            return "unknown"
        return "local"

    def open_call(self, node: ast.Call, shown: str, mode_index: int = 1) -> None:
        """``open(p, mode)``: reading is read, writing external, a mode it cannot read unknown."""
        mode = _argument(node, mode_index, "mode")
        first = self.string_value(node.args[0]) if mode_index == 0 and node.args else None
        if mode_index == 0 and not (first and _MODE.fullmatch(first)):
            mode = _argument(node, 1, "mode")  # zipfile.open(name, mode), not Path.open(mode)
        if mode is None:
            return
        text = self.string_value(mode)
        if text is None or not _MODE.fullmatch(text):
            self.note(node, Effect("unknown", f"opens a file with a mode it cannot read ({shown})"))
        elif set(text) & set("wax+"):
            self.note(node, Effect("external", f"writes files ({shown} with mode {text!r})"))


# --- method rules: each returns True when it judged the call ---------------------------------------

_MethodRule = Callable[[_Analysis, ast.Call, ast.Attribute], bool]


def _spark_chain_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """``df.write.mode(...).parquet(p)`` starts a job that writes; ``spark.read.csv(p)`` reads."""
    chain = set(_attribute_chain(func.value))
    shown = _describe(func)
    if chain & {"write", "writeStream"} and func.attr in SPARK_WRITE_ACTIONS:
        analysis.note(node, Effect("compute", f"starts a Spark job ({shown})"))
        analysis.note(node, Effect("external", f"writes data outside the kernel ({shown})"))
    elif chain & {"write", "writeStream"} and func.attr in SPARK_CONFIGURE:
        pass
    elif chain & {"read", "readStream"} and func.attr == "jdbc":
        analysis.note(node, DATABASE, f"{DATABASE.text} ({shown})")
    elif chain & {"read", "readStream"} and func.attr in SPARK_READ_FORMATS:
        analysis.reader_call(node, shown)
    elif not (chain & {"read", "readStream"} and func.attr in SPARK_CONFIGURE):
        return False
    return True


def _sql_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr in SQL_METHODS and (node.args or node.keywords):
        analysis.sql_call(node, _describe(func))
        return True
    if func.attr == "execute":
        analysis.note(node, Effect("compute", f"runs a query ({_describe(func)})"))
        return True
    return False


def _expression_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr not in {"eval", "query"}:
        return False
    argument = _first_argument(node, {"expr"})
    text = analysis.string_value(argument) if argument is not None else None
    if text is None or _PLACEHOLDER in text:
        analysis.note(
            node, Effect("unknown", f"evaluates an expression it cannot read ({_describe(func)})")
        )
    elif func.attr == "query" and (_SQL_QUERY.match(text) or _SQL_STATEMENT.match(text)):
        analysis.sql_call(node, _describe(func))
    else:
        effect = expression_effect(text)
        analysis.note(node, effect, f"{effect.text} ({_describe(func)})")
    return True


def _open_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr != "open":
        return False
    analysis.open_call(node, _describe(func), mode_index=0)
    return True


def _rename_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """``p.rename("new")`` moves a file; ``df.rename(columns=...)`` and ``s.replace(a, b)`` do not."""
    if func.attr not in {"rename", "replace"}:
        return False
    if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Dict):
        analysis.note(node, Effect("unknown", f"may rename or replace a file ({_describe(func)})"))
    return True


def _path_writer_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr not in OPTIONAL_PATH_WRITERS:
        return False
    if _first_argument(node, PATH_KEYWORDS) is not None:
        analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} ({_describe(func)})")
    return True


def _kind_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """Methods on an object this code made, when what made it says more than the method name."""
    kind = analysis.kind_of(func.value)
    if kind is None:
        return False
    if kind in IN_MEMORY_KINDS:
        return True
    effect = _kind_effect(kind)
    family = kind.split(".")[0]
    if effect.risk != "read" and family != "pathlib":
        analysis.note(node, effect, f"{effect.text} ({_describe(func)}, from {_shown(kind)})")
        return True
    if func.attr in AMBIGUOUS_COMPUTE:
        if family in LAZY_FAMILIES:
            analysis.note(node, STARTS_SPARK if family == "pyspark" else STARTS_DASK, None)
        return True
    # str, list, dict... methods other than the mutating ones only read
    return kind == "builtins" and func.attr not in MUTATING_METHODS


def _table_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    attr, shown = func.attr, _describe(func)
    if attr in EXTERNAL_METHODS:
        effect = EXTERNAL_METHODS[attr]
        analysis.note(node, effect, f"{effect.text} ({shown})")
    elif attr in COMPUTE_METHODS:
        effect = COMPUTE_METHODS[attr]
        analysis.note(node, effect, f"{effect.text} ({shown})")
    elif attr in MUTATING_METHODS:
        analysis.mutate(func.value, node, f" ({shown})")
    elif attr not in READ_METHODS:
        return False
    return True


_METHOD_RULES: tuple[_MethodRule, ...] = (
    _spark_chain_rule,
    _sql_rule,
    _expression_rule,
    _open_rule,
    _rename_rule,
    _path_writer_rule,
    _kind_rule,
    _table_rule,
)


# --- special calls by qualified name --------------------------------------------------------------

_SpecialCall = Callable[[_Analysis, ast.Call, str], None]


def _call_open(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    analysis.open_call(node, shown, mode_index=1)


def _call_getattr(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    name = node.args[1] if len(node.args) >= 2 else None
    text = name.value if isinstance(name, ast.Constant) else None
    receiver = node.args[0] if node.args else None
    public = isinstance(text, str) and not text.startswith("_")
    if not public or receiver is None or analysis.module_path(receiver) is not None:
        analysis.note(node, BY_NAME, f"{BY_NAME.text} ({shown})")


def _call_print(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    for keyword in node.keywords:
        if keyword.arg == "file" and analysis.module_path(keyword.value) not in {
            "sys.stdout",
            "sys.stderr",
        }:
            analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} (print to a file)")


def _call_pandas_eval(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    argument = _first_argument(node, {"expr"})
    text = analysis.string_value(argument) if argument is not None else None
    if text is None or _PLACEHOLDER in text:
        analysis.note(node, Effect("unknown", f"evaluates an expression it cannot read ({shown})"))
    else:
        effect = expression_effect(text)
        analysis.note(node, effect, f"{effect.text} ({shown})")


def _call_len(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    kind = analysis.kind_of(node.args[0]) if node.args else None
    if kind is not None and kind.split(".")[0] in LAZY_FAMILIES:
        analysis.note(
            node, Effect("compute", "computes every partition (len of a lazy collection)")
        )


def _call_numpy_load(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    if any(k.arg == "allow_pickle" and not _is_false(k.value) for k in node.keywords):
        analysis.note(node, UNPICKLES, f"{UNPICKLES.text} ({shown})")


_SPECIAL_CALLS: dict[str, _SpecialCall] = {
    "builtins.open": _call_open,
    "io.open": _call_open,
    "builtins.getattr": _call_getattr,
    "builtins.print": _call_print,
    "builtins.len": _call_len,
    "pandas.eval": _call_pandas_eval,
    "numpy.load": _call_numpy_load,
}
_PATH_BUILDERS: frozenset[str] = _words(
    "pathlib.Path pathlib.PurePath os.path.join os.path.expanduser os.path.abspath"
)


def _kind_effect(kind: str) -> Effect:
    """What using an object does, from what made it (a socket stays a network connection)."""
    special = kind in _SPECIAL_CALLS or kind in SQL_FUNCTIONS or kind.startswith(URL_READERS)
    return READS if kind == "builtins" or special else _call_effect(kind)
