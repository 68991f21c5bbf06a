"""User tools: ``@qloop_kernel.tool`` on a notebook function makes it available to the agent.

Each kernel's session holds its registry (``UserTools``); ``qloop_kernel.tool`` finds the running
kernel's (``notebook.session.user_tools``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from ..errors import QloopError
from .runtime import Tool

F = TypeVar("F", bound=Callable[..., Any])


# The built-in tools and whether each needs approval (qloop_kernel.notebook.tools defines them).
BUILTIN_APPROVAL = {
    "list_variables": False,
    "inspect_variable": False,
    "run_code": True,
    "notebook_history": False,
}


class ToolNameTaken(QloopError, ValueError):
    """A tool with this name exists; replacing it must be asked for, and never lowers approval."""


class UserTools:
    """The tools registered with ``@qloop_kernel.tool`` in one kernel (its session holds them)."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self.frozen = False  # True while an agent step runs: a step cannot add or replace tools

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    @overload
    def tool(
        self, func: F, *, read_only: bool = False, name: str | None = None, replace: bool = False
    ) -> F: ...
    @overload
    def tool(
        self,
        func: None = None,
        *,
        read_only: bool = False,
        name: str | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        func: F | None = None,
        *,
        read_only: bool = False,
        name: str | None = None,
        replace: bool = False,
    ) -> F | Callable[[F], F]:
        """Register a function as an agent tool; its schema comes from its type hints and
        docstring.

        Calls need approval unless the tool is declared ``read_only=True``. Tool names are unique:
        re-running the cell that defines a tool updates it, but taking the name of another tool (a
        built-in one too) needs ``replace=True``, and a replacement never needs less approval than
        the tool it replaces.
        """

        def register(f: F) -> F:
            if self.frozen:
                raise RuntimeError("tools cannot be registered while an agent step runs")
            made = Tool.from_function(f, name=name, requires_approval=not read_only)
            if made.name in BUILTIN_APPROVAL and not replace:
                raise ToolNameTaken(
                    f"{made.name!r} is a built-in tool; pass replace=True to replace it"
                )
            if BUILTIN_APPROVAL.get(made.name) and read_only:
                raise ToolNameTaken(
                    f"{made.name!r} needs approval; a tool replacing it cannot be read_only"
                )
            earlier = self._tools.get(made.name)
            if earlier is not None and not replace and not _same_definition(earlier.func, f):
                raise ToolNameTaken(
                    f"a tool named {made.name!r} is already registered; pass replace=True to "
                    "replace it"
                )
            check_replacement(made, earlier, replace=replace)
            made.replaces = replace
            self._tools[made.name] = made
            return f

        return register(func) if func is not None else register

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def with_registered(self, builtins: list[Tool]) -> list[Tool]:
        """The built-in tools plus the registered ones; a registered tool replaces one only if
        asked to."""
        tools = {t.name: t for t in builtins}
        for made in self.tools():
            earlier = tools.get(made.name)
            if earlier is not None and not made.replaces:
                continue  # registration refused it already; never silently shadow a built-in
            check_replacement(made, earlier, replace=True)
            tools[made.name] = made
        return list(tools.values())

    def clear(self) -> None:
        self._tools.clear()


def check_replacement(new: Tool, earlier: Tool | None, *, replace: bool) -> None:
    """Refuse a replacement that would run with less approval than the tool it replaces."""
    if earlier is not None and earlier.requires_approval and not new.requires_approval:
        raise ToolNameTaken(
            f"{new.name!r} needs approval; a tool replacing it cannot be read_only"
            + ("" if replace else " (and replacing needs replace=True)")
        )


def _same_definition(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """The same function defined again (its cell re-run): same module and qualified name."""
    key = ("__module__", "__qualname__")
    return all(getattr(a, k, None) == getattr(b, k, None) for k in key)
