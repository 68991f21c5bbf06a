"""qloop-kernel: a notebook agent for Jupyter.

``%load_ext qloop_kernel`` registers ``%%agent`` and ``%agent``. Heavy imports (anthropic, pydantic
models, widgets) are not made while loading: a background thread warms them while the kernel is idle
(``notebook/warmup.py``), so loading stays fast and the first agent cell starts quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

__version__ = "0.1.0"
__all__ = ["__version__", "load_ipython_extension", "tool", "unload_ipython_extension"]

_F = TypeVar("_F", bound=Callable[..., Any])


def load_ipython_extension(ipython: Any) -> None:
    """Register the agent magics on an IPython shell."""
    from .notebook.ledger import track_cells
    from .notebook.magic import AgentMagics
    from .notebook.session import session_for
    from .notebook.warmup import start_warmup

    session = session_for(ipython)  # the kernel's agent state, passed on from here
    ipython.register_magics(AgentMagics(ipython, session))
    track_cells(session)  # which cell defines what: the drift check of replays reads it
    start_warmup(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the agent magics."""
    from .notebook.warmup import stop_warmup

    stop_warmup(ipython)
    for kind in ("cell", "line"):
        ipython.magics_manager.magics[kind].pop("agent", None)


@overload
def tool(
    func: _F, *, read_only: bool = False, name: str | None = None, replace: bool = False
) -> _F: ...
@overload
def tool(
    func: None = None, *, read_only: bool = False, name: str | None = None, replace: bool = False
) -> Callable[[_F], _F]: ...


def tool(
    func: _F | None = None,
    *,
    read_only: bool = False,
    name: str | None = None,
    replace: bool = False,
) -> _F | Callable[[_F], _F]:
    """Register a notebook function as an agent tool of the running kernel's session (see
    ``qloop_kernel.tools.user.UserTools.tool``)."""
    from .notebook.session import user_tools

    decorate = user_tools().tool(read_only=read_only, name=name, replace=replace)
    return decorate if func is None else decorate(func)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "qloop-kernel"}]
