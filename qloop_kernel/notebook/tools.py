"""The built-in tools, bound to an IPython shell. Names and inputs are a public contract."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from ..errors import ToolFailure
from ..notebook_view import render
from ..policy.risk import classify
from ..redact import PrivateVariables
from ..tools import history, namespace
from ..tools.namespace import MAX_ROWS
from ..tools.runtime import Tool
from .code import CodeRunner
from .session import KernelSession, session_for

if TYPE_CHECKING:
    from ..policy.risk import Assessment


NotebookSource = Callable[[list[str] | None, bool], "dict[str, Any] | None"]


def builtin_tools(
    shell: Any,
    *,
    code_timeout_s: float | None = None,
    private: PrivateVariables | None = None,
    notebook: NotebookSource | None = None,
    running_cell: str | None = None,
) -> list[Tool]:
    """list_variables, inspect_variable, run_code and notebook_history for ``shell``, and
    read_notebook where something can show the notebook (a set of its own: the kernel's agent
    builds one :class:`BuiltinTools` and binds it to each turn).

    ``private``: the variables the tools refuse to show (default: the session's, `%agent private`).
    ``notebook``: the view of the open notebook for cell ids (None: all) and whether to include
    outputs, from the frontend's extension or ``qloop run`` (None when it cannot be had);
    ``running_cell``: the agent cell's id, marked in that view.
    """
    made = BuiltinTools(shell, private=(lambda: private) if private is not None else None)
    return made.for_turn(
        code_timeout_s=code_timeout_s, notebook=notebook, running_cell=running_cell
    )


@dataclass(frozen=True)
class TurnBinding:
    """What the built-in tools read of the turn that calls them."""

    notebook: NotebookSource | None = None  # the view of the running cell's notebook
    running_cell: str | None = None  # the agent cell's id, marked in that view


class BuiltinTools:
    """The built-in tools of one kernel, built once (their input models and schemas with them);
    :meth:`for_turn` binds them to a turn: its code time limit, its notebook and its cell."""

    def __init__(
        self,
        shell: Any,  # Any: the IPython shell
        *,
        private: Callable[[], PrivateVariables] | None = None,
        session: KernelSession | None = None,  # the kernel's session; None: the shell's
    ) -> None:
        self.shell = shell
        self.session = session or session_for(shell)
        self.binding = TurnBinding()
        self.private = private or self.session.private_variables
        self.runner = CodeRunner(shell, private=None, session=self.session)
        self._tools = self._build()

    def for_turn(
        self,
        *,
        code_timeout_s: float | None = None,
        notebook: NotebookSource | None = None,
        running_cell: str | None = None,
    ) -> list[Tool]:
        """The tools as this turn calls them, with the registered ones (``@qloop_kernel.tool``);
        read_notebook only with a notebook to read."""
        self.binding = TurnBinding(notebook, running_cell)
        self.runner.timeout_s = code_timeout_s
        self.runner.private = self.private()
        offered = [t for t in self._tools if t.name != "read_notebook" or notebook is not None]

        return self.session.user_tools.with_registered(offered)

    def _build(self) -> list[Tool]:
        return _builtin_set(self)


def _builtin_set(tools: BuiltinTools) -> list[Tool]:
    """The built-in tools, reading the turn's binding and the private variables at each call."""
    shell = tools.shell

    def list_variables() -> str:
        """List the user's variables in the live kernel: name, type, shape or length, dtypes and
        approximate memory. Modules, IPython internals and names starting with _ are left out."""
        ns, private = shell.user_ns, tools.private()
        shown = {k: v for k, v in ns.items() if k not in private.names}
        with private.redacting(ns) as redactor:  # the previews' cuts too
            listing = namespace.list_variables(shown, hidden=shell.user_ns_hidden)
        if hidden := sorted(n for n in private.names if n in ns):
            listing += "\nprivate (the user keeps these from the agent): " + ", ".join(hidden)
        return redactor.text(listing)

    def inspect_variable(
        name: str,
        columns: list[str] | None = None,
        offset: Annotated[int, Interval(ge=0)] = 0,
        rows: Annotated[int, Interval(ge=0, le=MAX_ROWS)] | None = None,
    ) -> str:
        """Describe one variable of the user's namespace by type: for a DataFrame its shape,
        dtypes, nulls, head and a numeric summary; for arrays, containers, strings, functions
        (signature, docstring, source), modules and other objects a bounded summary.

        Args:
            name: the variable name, or a dotted attribute path such as model.coef_
            columns: DataFrame columns to show (default: all, bounded)
            offset: first row to show
            rows: number of rows to show (default: a few for data in memory, none for lazy or
                distributed data, whose rows are read only when asked for)
        """
        private = tools.private()
        if private.covers(name):
            raise ToolFailure(
                f"{name.strip().split('.')[0]!r} is private: the user marked it with "
                "`%agent private`, so tools do not inspect or print it. Work without its value, "
                "or ask the user."
            )
        with private.redacting(shell.user_ns) as redactor:  # a page's cut too
            summary = namespace.inspect_variable(
                shell.user_ns, name, columns=columns, offset=offset, rows=rows
            )
        return redactor.text(summary)

    def notebook_history(last: Annotated[int, Interval(ge=1, le=100)] = 10) -> str:
        """The cells the user ran most recently in this kernel: source and short output. Without
        read_notebook in your tools the notebook itself (its markdown, cells not run, their order)
        cannot be read here: say so when the user asks about it.

        Args:
            last: how many recent cells to show
        """
        with tools.private().redacting(shell.user_ns) as redactor:
            text = history.notebook_history(shell, last=last)
        return redactor.text(text)

    def read_notebook(cells: list[str] | None = None, outputs: bool = True) -> str:
        """Read the open notebook as the user sees it: every cell in order with its id, type
        (code, markdown, raw), execution count and source, with a short summary of its outputs
        (text, error, figures; no image data). Marks agent cells and this one. Use it to see what
        the user wrote and in which order, unexecuted cells and markdown included.

        Args:
            cells: cell ids to read (default: all cells, bounded)
            outputs: include each cell's output summary
        """
        notebook = tools.binding.notebook
        assert notebook is not None  # the tool is offered only with a source
        view = notebook(cells, outputs)
        if view is None:
            raise ToolFailure(
                "the notebook could not be read just now (its page did not answer); "
                "notebook_history shows what this kernel ran"
            )
        with tools.private().redacting(shell.user_ns) as redactor:
            text = render(view, running_cell=tools.binding.running_cell)
        return redactor.text(text)

    return [
        Tool.from_function(list_variables, requires_approval=False),
        Tool.from_function(inspect_variable, requires_approval=False),
        Tool.from_function(
            tools.runner.run_code,
            name="run_code",
            editable_field="code",
            classify=code_classifier(shell),
            replayable=True,
        ),
        Tool.from_function(notebook_history, requires_approval=False),
        Tool.from_function(read_notebook, requires_approval=False),
    ]


def code_classifier(shell: Any) -> Callable[[dict[str, Any]], Assessment]:
    """The risk class of a ``run_code`` input: the source IPython would run (magics and ``!``
    transformed), against the names the user's namespace holds now. Nothing is executed."""

    def assess(input: dict[str, Any]) -> Assessment:
        code = str(input.get("code", ""))
        source = shell.transform_cell(code)
        hidden = shell.user_ns_hidden
        found = classify(source, frozenset(n for n in shell.user_ns if n not in hidden))
        # IPython drops leading blank lines: count lines as the card shows the code.
        dropped = len(code.splitlines()) - len(code.lstrip(" \t\r\n").splitlines())
        if dropped <= 0 or not source.strip():
            return found
        reasons = tuple(replace(r, line=r.line + dropped) for r in found.reasons)
        return replace(found, reasons=reasons)

    return assess


def session_private_variables(shell: Any) -> PrivateVariables:
    """The private variables of the agent session on ``shell`` (none without an agent)."""
    return session_for(shell).private_variables()
