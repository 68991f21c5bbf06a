"""The built-in tools, bound to an IPython shell. Names and inputs are a public contract."""

from __future__ import annotations

from typing import Any

from ..tools.runtime import Tool
from ..tools.user import registered_tools
from .code import CodeRunner


def builtin_tools(shell: Any, *, code_timeout_s: float | None = None) -> list[Tool]:
    """list_variables, inspect_variable, run_code and notebook_history for ``shell``."""
    from ..tools import history, namespace

    def list_variables() -> str:
        """List the user's variables in the live kernel: name, type, shape or length, dtypes and
        approximate memory. Modules, IPython internals and names starting with _ are left out."""
        return namespace.list_variables(shell.user_ns, hidden=shell.user_ns_hidden)

    def inspect_variable(
        name: str, columns: list[str] | None = None, offset: int = 0, rows: int = 5
    ) -> str:
        """Describe one variable of the user's namespace by type: for a DataFrame its shape,
        dtypes, nulls, head and a numeric summary; for arrays, containers, strings, functions
        (signature, docstring, source), modules and other objects a bounded summary.

        Args:
            name: the variable name, or a dotted attribute path such as model.coef_
            columns: DataFrame columns to show (default: all, bounded)
            offset: first row to show
            rows: number of rows to show
        """
        return namespace.inspect_variable(
            shell.user_ns, name, columns=columns, offset=offset, rows=rows
        )

    def notebook_history(last: int = 10) -> str:
        """The cells the user ran most recently in this kernel: source and short output.

        Args:
            last: how many recent cells to show
        """
        return history.notebook_history(shell, last=last)

    runner = CodeRunner(shell, timeout_s=code_timeout_s)
    return [
        Tool.from_function(list_variables, requires_approval=False),
        Tool.from_function(inspect_variable, requires_approval=False),
        Tool.from_function(runner.run_code, name="run_code", editable_field="code"),
        Tool.from_function(notebook_history, requires_approval=False),
        *registered_tools(),
    ]
