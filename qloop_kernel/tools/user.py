"""User tools: ``@qloop_kernel.tool`` on a notebook function makes it available to the agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from .runtime import Tool

F = TypeVar("F", bound=Callable[..., Any])
_REGISTRY: dict[str, Tool] = {}


@overload
def tool(func: F) -> F: ...
@overload
def tool(*, read_only: bool = False, name: str | None = None) -> Callable[[F], F]: ...


def tool(
    func: F | None = None, *, read_only: bool = False, name: str | None = None
) -> F | Callable[[F], F]:
    """Register a function as an agent tool; its schema comes from its type hints and docstring.

    Calls need approval unless the tool is declared ``read_only=True``. Registering a function with the
    name of an earlier one replaces it (re-running the defining cell updates the tool).
    """

    def register(f: F) -> F:
        made = Tool.from_function(f, name=name, requires_approval=not read_only)
        _REGISTRY[made.name] = made
        return f

    return register(func) if func is not None else register


def registered_tools() -> list[Tool]:
    return list(_REGISTRY.values())


def unregister_all() -> None:
    _REGISTRY.clear()
