"""KernelSession: what one kernel's agent keeps, owned in one place and passed explicitly.

One session per IPython shell holds the per-kernel state: the cells the frontend ran (the drift
check reads which cell defined what), the undo log, the replay steps approved ahead by a Run All
card, the ``%%agent`` configuration and the kernel's agent (conversation, grants, notebook grants,
MCP servers, the running turn's watch) once the first agent cell or command makes it.

The session belongs to the kernel's shell (``shell.qloop_session``, no module-level map): the
extension's load (``load_ipython_extension``) makes it, or takes the one a ``@qloop_kernel.tool``
made before it, and it holds the kernel's agent (:meth:`KernelSession.kernel_agent`, made the way
the loaded magics say) for the magics and for outside agents' steps alike. ``session_for`` is the one place a session is found
from a shell: IPython hands the extension's hooks, ``@qloop_kernel.tool`` and the ``qloop.host``
comm only the shell. Everything else receives the session or the agent. Light to import: this
module needs nothing but typing; it sits below the modules that use it, knows the agent by the
:class:`SessionAgent` protocol, and imports the undo log's module only when the log is first used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: the session imports nothing heavy when the extension loads
    from traitlets.config import Configurable

    from ..conversation import ConversationManager
    from ..redact import PrivateVariables
    from ..settings import Settings
    from ..tools.user import UserTools
    from .cell import CellContext
    from .deadline import TurnWatch
    from .failures import FailedCell
    from .undo import UndoLog

ATTRIBUTE = "qloop_session"  # the shell's attribute that holds its session
# ``tools.NotebookSource`` (tools.py imports this module): the view of the running cell's notebook
NotebookSource = Callable[[list[str] | None, bool], "dict[str, Any] | None"]


class SessionAgent(Protocol):
    """What the session reads of the kernel's agent (``agent.KernelAgent``, which imports this
    module: the session knows it by this protocol)."""

    @property
    def manager(self) -> ConversationManager: ...

    @property
    def watch(self) -> TurnWatch | None: ...

    def notebook_source(self, cell: CellContext | None) -> NotebookSource | None:
        """What reads the running cell's notebook (``tools.NotebookSource``), or None."""


class KernelSession:
    """The agent state of one kernel (one IPython shell)."""

    # Any: the IPython shell, or any object with a user_ns (IPython is not imported here)
    def __init__(self, shell: Any) -> None:
        self.shell = shell
        # (cell id, source) of the cells run with a frontend cell id, oldest first (ledger.py)
        self.cells_run: list[tuple[str, str]] = []
        self.tracking_cells = False  # the post_run_cell hook that fills cells_run is registered
        # The cells whose last run ended in an error, by cell id, newest last (failures.py)
        self.failed_cells: dict[str, FailedCell] = {}
        # The fix turns asked for each cell in this kernel, by cell id (fix.py): a later one goes on
        # from the earlier ones, in the same conversation
        self.fix_turns: dict[str, int] = {}
        # Saved steps a Run All card approved ahead, by record digest (replay.py)
        self.approved_ahead: set[str] = set()
        self.config: Configurable | None = None  # the ``QloopAgent`` configurable (magic.py)
        self.agent: SessionAgent | None = None  # made by the first agent cell, command or step
        # Makes the kernel's agent from the ``QloopAgent`` configuration: given by the extension's
        # magics when it loads (magic.py), None before
        self.make_agent: Callable[[], SessionAgent] | None = None
        self._undo: UndoLog | None = None
        self._user_tools: UserTools | None = None

    @property
    def undo(self) -> UndoLog:
        """The kernel's undo log (made on first use; the agent sets its budget and listeners)."""
        if self._undo is None:
            from .undo import UndoLog

            self._undo = UndoLog(self.shell)
        return self._undo

    @property
    def user_tools(self) -> UserTools:
        """The tools registered with ``@qloop_kernel.tool`` in this kernel."""
        if self._user_tools is None:
            from ..tools.user import UserTools

            self._user_tools = UserTools()
        return self._user_tools

    def kernel_agent(self) -> SessionAgent:
        """The kernel's agent, made on first use from the extension's configuration (settings
        from config and environment); raises UsageError when those settings are invalid."""
        if self.agent is None:
            if self.make_agent is None:
                raise RuntimeError("the qloop extension is not loaded in this kernel")
            self.agent = self.make_agent()
        return self.agent

    def trusted_reprs(self) -> tuple[str, ...]:
        """The classes the session's settings opt in to reads (``%agent set trusted_reprs``)."""
        settings = self.settings
        return settings.trusted_reprs if settings is not None else ()

    @property
    def watch(self) -> TurnWatch | None:
        """The running turn's watch (Stop button, ``--timeout``), or None outside a turn."""
        return self.agent.watch if self.agent is not None else None

    @property
    def settings(self) -> Settings | None:
        """The session's settings (``%agent set``), or None before the agent is made."""
        return self.agent.manager.settings if self.agent is not None else None

    def private_variables(self) -> PrivateVariables:
        """The variables marked private (``%agent private``); none before the agent is made."""
        from ..redact import PrivateVariables, private_variables

        if self.agent is None:
            return PrivateVariables()
        return private_variables(self.agent.manager)

    def mcp_config(
        self,
    ) -> Any:  # Any: the config value as the user wrote it (mcp/config.py reads it)
        """``c.QloopAgent.mcp_servers`` as configured now (read at each use)."""
        return getattr(self.config, "mcp_servers", None)


# Any: the IPython shell as IPython's hooks and get_ipython() hand it over (untyped here)
def session_for(shell: Any) -> KernelSession:
    """The session of ``shell`` (held by the shell itself), made on first use."""
    found = getattr(shell, ATTRIBUTE, None)
    if not isinstance(found, KernelSession):
        found = KernelSession(shell)
        setattr(shell, ATTRIBUTE, found)
    return found


def user_tools() -> UserTools:
    """The registry of the running IPython kernel's session (``@qloop_kernel.tool``). Outside
    IPython there is no agent to give tools to: a registry of its own still checks the tool."""
    from IPython import get_ipython

    from ..tools.user import UserTools

    shell = get_ipython()
    return session_for(shell).user_tools if shell is not None else UserTools()


# Any: the IPython shell as a step's code or a test holds it
def undo_log(shell: Any) -> UndoLog:
    """The undo log of the session on ``shell`` (made on first use)."""
    return session_for(shell).undo
