""":func:`classify`, the entry point: parse the source, walk its statements with the whole analysis
(``calls._Analysis``), and return its :class:`~.assessment.Assessment`; code that does not parse,
or that nests too deeply to walk, is ``unknown``."""

from __future__ import annotations

import ast
from collections.abc import Container

from .assessment import Assessment, Effect, Reason
from .calls import _Analysis
from .nodes import _syntax_message


def classify(source: str, existing: Container[str] = frozenset()) -> Assessment:
    """Classify code by what running it could do, without running it.

    Args:
        source: Python source as IPython runs it (magics and ``!`` already transformed).
        existing: the names in the user's namespace before the code runs.

    Returns:
        The class of the most severe finding (``read`` when there is none), every finding with its
        line, and the names the code may change (``None`` when no bound can be given).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        text = f"does not parse: {_syntax_message(exc)}"
        return Assessment("unknown", (Reason(exc.lineno or 1, "unknown", text),), None)
    except (ValueError, RecursionError, MemoryError) as exc:
        text = f"does not parse: {_syntax_message(exc)}"
        return Assessment("unknown", (Reason(1, "unknown", text),), None)
    analysis = _Analysis(existing)
    try:
        for statement in tree.body:
            analysis.visit(statement)
    except RecursionError:
        analysis.note(1, Effect("unknown", "is nested too deeply to check"))
    return analysis.assessment()
