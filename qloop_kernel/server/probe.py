"""What the server extension's read tools evaluate inside a kernel, as ``user_expressions``.

Each function takes IPython's shell and returns JSON text, so the answer travels as the
expression's ``text/plain``; nothing here runs user code beyond the summaries the in-notebook agent's
own ``list_variables`` and ``inspect_variable`` make (lazy and device-resident data described from
metadata). Secrets of the kernel's environment are redacted before the text leaves the kernel.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ToolInputError
from ..redact import redact_text
from ..tools.namespace import inspect_variable, list_variables


def _answer(text: str) -> str:
    return json.dumps({"ok": True, "text": redact_text(text)})


def _refusal(exc: Exception) -> str:
    return json.dumps({"ok": False, "error": redact_text(str(exc))})


def variables(shell: Any) -> str:
    """The user's variables, one line each (the in-notebook agent's ``list_variables``)."""
    return _answer(list_variables(shell.user_ns, hidden=shell.user_ns_hidden))


def inspect(shell: Any, name: str, columns: list[str] | None, offset: int, rows: int | None) -> str:
    """One variable's summary (the in-notebook agent's ``inspect_variable``)."""
    try:
        text = inspect_variable(shell.user_ns, name, columns=columns, offset=offset, rows=rows)
    except (ToolInputError, ValueError) as exc:
        return _refusal(exc)
    return _answer(text)


def prepared(shell: Any, code: str) -> str:
    """What the risk classifier needs: ``code`` as this kernel's IPython runs it (magics and ``!``
    as calls) and the names bound in the user's namespace; the code is not run."""
    try:
        source = str(shell.transform_cell(code))
    except Exception:  # a cell IPython cannot transform: classified as written (unknown)
        source = code
    return json.dumps({"source": source, "names": sorted(str(k) for k in shell.user_ns)})
