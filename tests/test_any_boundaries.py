"""A function returns ``Any`` only at a true dynamic boundary, and says so: every ``-> Any`` in the
package carries a ``# Any:`` comment on its signature or on the line just above it."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import qloop_kernel

PACKAGE = Path(qloop_kernel.__file__).parent
ROOT = PACKAGE.parent
MARK = "# Any:"


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _is_any(node: ast.expr | None) -> bool:
    """``Any``, ``typing.Any``, ``"Any"``, or a ``X | Y`` union with ``Any`` as a member."""
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _is_any(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_any(node.left) or _is_any(node.right)
    return False


def _marked_lines(source: str) -> set[int]:
    """Lines holding a real ``# Any:`` comment (not the same text inside a string)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT and t.string.startswith(MARK)}


def _explained(function: Function, marked: set[int]) -> bool:
    end = getattr(function.returns, "end_lineno", None) or function.lineno
    signature = range(function.lineno, end + 1)
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    above = {function.lineno - 1, first - 1}
    return any(line in marked for line in [*signature, *above])


def _bare_any() -> list[tuple[str, int, str]]:
    """(path, line, name) of each function returning ``Any`` without a ``# Any:`` comment."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text("utf-8")
        marked = _marked_lines(source)
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, Function) or not _is_any(node.returns):
                continue
            if not _explained(node, marked):
                found.append((relative, node.lineno, node.name))
    return found


def test_every_any_return_says_why():
    bare = [f"{p}:{line} {name}" for p, line, name in _bare_any()]
    assert bare == [], "return Any without a '# Any:' comment:\n" + "\n".join(bare)


def test_the_check_sees_bare_and_explained_any():
    source = (
        "from typing import Any\n"
        "def bare() -> Any: ...\n"
        "# Any: above\n"
        "def above() -> Any: ...\n"
        "def inline() -> Any:  # Any: inline\n"
        "    ...\n"
        "def wrapped(\n"
        "    x: int,\n"
        ") -> Any | None:  # Any: on the signature\n"
        "    ...\n"
        "def quoted() -> 'Any':\n"
        "    return '# Any: a string, not a comment'\n"
        "def typed() -> int: ...\n"
    )
    marked = _marked_lines(source)
    functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, Function)]
    bare = [f.name for f in functions if _is_any(f.returns) and not _explained(f, marked)]
    assert bare == ["bare", "quoted"]
