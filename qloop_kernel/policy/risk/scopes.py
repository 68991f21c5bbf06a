"""Names read from the code's structure alone: the names a block binds (not counting the bodies of
the functions and classes it defines), a function's parameters, locals and globals, the names an
assignment target binds, the names whose objects an expression may hand out (``d`` for
``d.items()``), and IPython's history names, which are rebound after every cell."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator


def _is_history_name(name: str) -> bool:
    """IPython's output history (``_``, ``__``, ``_3``, ``_i2``...): rebound after every cell."""
    return re.fullmatch(r"_{1,3}|_i{1,3}|_i?\d+|_oh|_ih|_dh|In|Out", name) is not None


def _source_roots(node: ast.expr) -> set[str]:
    """The names whose objects an expression may hand out: ``d`` for ``d.items()`` or ``d["k"]``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred, ast.Call)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _PASSING_BUILTINS:
                return set().union(*(_source_roots(a) for a in node.args))
            if not (isinstance(func, ast.Attribute) and func.attr in _HANDING_METHODS):
                return set()  # a fresh result
            node = func.value
        else:
            node = node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_source_roots(e) for e in node.elts))
    return {node.id} if isinstance(node, ast.Name) else set()


_HANDING_METHODS = frozenset({"items", "values", "get", "pop", "popitem", "setdefault", "iterrows"})
_PASSING_BUILTINS = frozenset(
    {"enumerate", "zip", "reversed", "sorted", "list", "tuple", "iter", "filter"}
)


def _target_names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parameters(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _globals_of(body: list[ast.stmt]) -> set[str]:
    return {
        name for node in _walk_scope(body) if isinstance(node, ast.Global) for name in node.names
    }


def _local_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    declared = _globals_of(node.body)
    return (_parameters(node.args) | _bound_names(node.body)) - declared


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names a block binds, not counting the bodies of the functions and classes it defines."""
    names: set[str] = set()
    for node in _walk_scope(body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Nonlocal):
            names.update(node.names)
    return names


def _walk_scope(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a block's own scope: nested functions and classes yield only themselves."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _COMPREHENSIONS):
            yield from (n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
