"""The one way qloop cuts text: truncate (head and tail around a marker) and clip (one line)."""

from __future__ import annotations

import ast
from pathlib import Path

from qloop_kernel.text import clip, truncate

PACKAGE = Path(__file__).resolve().parent.parent / "qloop_kernel"


def test_clip_ends_a_cut_line_in_the_ellipsis_within_the_limit() -> None:
    assert clip("short", 10) == "short"
    assert clip("x" * 20, 10) == "x" * 9 + "…"
    assert clip("x" * 20, 10, "...") == "x" * 7 + "..."
    assert all(len(clip("y" * n, 8)) <= 8 for n in range(20))


def test_truncate_keeps_head_and_tail_around_the_marker() -> None:
    text = truncate("a" * 50 + "b" * 50, 30)
    assert text.startswith("a" * 20) and text.endswith("b" * 10) and "omitted" in text


def _hand_clipped(node: ast.AST) -> bool:
    """``x[:n] + "…"`` or ``x[:n] + "..."``: a cut written by hand instead of clip()."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and isinstance(node.left, ast.Subscript)
        and isinstance(node.left.slice, ast.Slice)
        and isinstance(node.right, ast.Constant)
        and node.right.value in ("…", "...")
    )


def test_no_module_cuts_a_line_by_hand() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _hand_clipped(node) and path.name != "text.py"
    ]
    assert found == [], f"cut with qloop_kernel.text.clip instead: {found}"
