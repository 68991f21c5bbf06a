"""Small readers of AST nodes shared by the walk: a short name for an expression without its
literal values (they may be secrets), the root name of an attribute chain, a call's arguments by
position or keyword, which expressions are literals, and the message of a parse error."""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator


def _describe(node: ast.expr, depth: int = 0) -> str:
    """A short name for an expression, without its literal values (they may be secrets)."""
    if depth > 6:
        return "…"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_describe(node.value, depth + 1)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_describe(node.func, depth + 1)}()"
    if isinstance(node, ast.Subscript):
        return f"{_describe(node.value, depth + 1)}[…]"
    return "a lambda" if isinstance(node, ast.Lambda) else "…"


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _attribute_chain(node: ast.expr) -> Iterator[str]:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            yield node.attr
            node = node.value
        else:
            node = node.func if isinstance(node, ast.Call) else node.value


def _argument(node: ast.Call, index: int, keyword: str) -> ast.expr | None:
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    return node.args[index] if len(node.args) > index else None


def _first_argument(node: ast.Call, keywords: Container[str]) -> ast.expr | None:
    if node.args and not isinstance(node.args[0], ast.Starred):
        return node.args[0]
    return next((k.value for k in node.keywords if k.arg in keywords), None)


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None, 0)


def _is_string_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.BinOp):
        return _is_string_expr(node.left)
    return isinstance(node, ast.JoinedStr)


def _callable_candidates(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        yield from node.elts
    elif isinstance(node, ast.Dict):
        yield from node.values
    else:
        yield node


def _comprehension_results(
    node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
) -> list[ast.expr]:
    return [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]


_LITERALS = (
    ast.Constant,
    ast.JoinedStr,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
)


def _syntax_message(exc: Exception) -> str:
    return getattr(exc, "msg", None) or str(exc) or type(exc).__name__
