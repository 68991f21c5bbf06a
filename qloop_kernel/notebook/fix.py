"""``%agent fix [CELL_ID]`` and ``%agent edit CELL_ID "instruction"``: the agent from any cell.

Both build the turn's task from a notebook cell and run it as an ordinary turn of the cell that runs
the command (its record, policy, cards and conversation are that cell's): the agent may read and run
read steps under the policy, and answers with an ``edit_cell`` proposal on the cell (or an
``add_cell`` before it) through the one proposal machinery (``proposals.py``), so the user sees the
diff and accepts or rejects it with a reason. A fix sends, redacted and bounded: the cell's current
source, its error and traceback (``failures.py``) and summaries of the variables its failing lines
name; the rules files come with every turn (``context_turn.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..tools import namespace
from .cell import CellContext, current_cell
from .display import line

if TYPE_CHECKING:
    from .agent import KernelAgent
    from .failures import FailedCell

NEEDS_A_PAGE = (
    "the agent answers with a proposed cell edit, which needs a page that shows proposals "
    "(JupyterLab or Notebook 7 with the qloop extension) or `qloop run`"
)
VARIABLE_CHARS = 4_000  # the variables' summaries are cut here


def fix_command(agent: KernelAgent, target: str | None) -> None:
    """``%agent fix [CELL_ID]``: ask the agent to fix the last failed cell (or ``target``)."""
    cell = current_cell(agent.shell)
    agent.guarded(cell, lambda: _fix(agent, cell, target))


def edit_command(agent: KernelAgent, target: str, instruction: str) -> None:
    """``%agent edit CELL_ID "instruction"``: ask the agent for an edit of cell ``target``."""
    cell = current_cell(agent.shell)
    agent.guarded(cell, lambda: _edit(agent, cell, target, instruction))


def failure_to_fix(failed: Mapping[str, FailedCell], target: str | None) -> FailedCell:
    """The failed cell ``target`` (None: the one that failed last), or a UsageError saying why
    there is none to fix."""
    if target is None:
        ordinary = [f for f in failed.values() if not f.agent]
        if not ordinary:
            raise UsageError(
                "%agent fix: nothing failed since the kernel started (a restart forgets earlier "
                "errors; a cell that ran without error since is not failed)"
            )
        return ordinary[-1]
    found = failed.get(target)
    if found is None:
        raise UsageError(
            f"%agent fix: cell {target!r} has not failed since the kernel started (a restart "
            "forgets earlier errors; a cell that ran without error since is not failed): run it, "
            f"then `%agent fix {target}`"
        )
    if found.agent:
        raise UsageError(
            f"%agent fix: cell {target!r} is an agent cell: its error is the agent's; change its "
            "task or options and run it again (`%agent fix` fixes ordinary code cells)"
        )
    return found


def _fix(agent: KernelAgent, cell: CellContext, target: str | None) -> None:
    failed = failure_to_fix(agent.session.failed_cells, target)
    cells = _notebook_cells(agent, cell)
    current, before = _cell_and_before(cells, failed.cell_id)
    edited = current is not None and current != failed.source
    if edited:
        line(f"cell {failed.cell_id} was edited after it failed: the fix is proposed against its "
             "current source", "warn")  # fmt: skip
    prompt = fix_prompt(failed, current, before, _variables(agent, failed.names))
    agent.run_turn(_redacted(agent, prompt), agent.manager.settings, cell)


def _edit(agent: KernelAgent, cell: CellContext, target: str, instruction: str) -> None:
    if not instruction.strip():
        raise UsageError('%agent edit: say what to change: %agent edit CELL_ID "instruction"')
    cells = _notebook_cells(agent, cell)
    current, _ = _cell_and_before(cells, target)
    if current is None:
        raise UsageError(f"%agent edit: the notebook has no code cell with id {target!r}")
    prompt = edit_prompt(target, current, instruction)
    agent.run_turn(_redacted(agent, prompt), agent.manager.settings, cell)


def _notebook_cells(agent: KernelAgent, cell: CellContext) -> list[Mapping[str, Any]]:
    """The notebook's cells as the page (or ``qloop run``) shows them now, sources included;
    a UsageError where proposals cannot be shown."""
    agent.load_notebook_grants(cell)
    source = agent.notebook_source(cell)
    if source is None or agent.cell_proposals(cell, agent.manager.settings) is None:
        raise UsageError(f"%agent: {NEEDS_A_PAGE}")
    view = source(None, False)
    found = view.get("cells") if isinstance(view, Mapping) else None
    return [c for c in found or [] if isinstance(c, Mapping)]


def _cell_and_before(cells: list[Mapping[str, Any]], cell_id: str) -> tuple[str | None, str | None]:
    """The current source of code cell ``cell_id`` (None: not in the notebook, or not code) and
    the id of the cell before it (None: it is the first)."""
    ids = [str(c.get("id", "")) for c in cells]
    if cell_id not in ids:
        return None, None
    index = ids.index(cell_id)
    found = cells[index]
    if found.get("cell_type", "code") != "code" or found.get("agent"):
        return None, None
    return str(found.get("source", "")), ids[index - 1] if index else None


def _variables(agent: KernelAgent, names: tuple[str, ...]) -> str:
    """Bounded summaries of the variables of ``names`` defined now (the private ones left out)."""
    shell = agent.shell
    private = agent.session.private_variables()
    ns = shell.user_ns
    shown = {n: ns[n] for n in names if n in ns and not private.covers(n)}
    if not shown:
        return ""
    with private.redacting(ns) as redactor:
        listing = namespace.list_variables(shown, hidden=shell.user_ns_hidden)
    return redactor.text(listing)[:VARIABLE_CHARS]


def _redacted(agent: KernelAgent, prompt: str) -> str:
    """The task with secrets and the private variables' values redacted."""
    with agent.session.private_variables().redacting(agent.shell.user_ns) as redactor:
        return redactor.text(prompt)


def fix_prompt(failed: FailedCell, current: str | None, before: str | None, variables: str) -> str:
    """The task of a fix: the cell, its error, the variables its failing lines name."""
    source = failed.source if current is None else current
    parts = [f"Fix the error of notebook cell {failed.cell_id}.", ""]
    if current is not None and current != failed.source:
        parts += ["The cell was edited after it failed: below is its current source, and the "
                  "error came from the source it had then:", _code(failed.source), ""]  # fmt: skip
    parts += [f"The cell's source{' now' if current is not None else ''}:", _code(source), "",
              f"The error: {failed.error}", "Traceback (the notebook's frames and the innermost "
              "library frames, innermost last):", failed.traceback, ""]  # fmt: skip
    if variables:
        parts += ["The variables its failing lines name, as they are now:", variables, ""]
    where = f"after cell {before}" if before else "at the top (no `after`)"
    parts += [f"You may inspect variables and run read steps first. Then propose the fix with "
              f"edit_cell on cell {failed.cell_id} (its whole corrected source), or, where it "
              f"lacks something another cell should hold (an import), add_cell {where}. Say in "
              "a sentence or two what was wrong."]  # fmt: skip
    return "\n".join(parts)


def edit_prompt(cell_id: str, source: str, instruction: str) -> str:
    """The task of an edit with a prompt: the cell's source and what to change."""
    return "\n".join([
        f"Change notebook cell {cell_id} as the user asks: {instruction.strip()}", "",
        "Its source now:", _code(source), "",
        f"Propose the change with edit_cell on cell {cell_id} (its whole new source); you may "
        "inspect variables and run read steps first.",
    ])  # fmt: skip


def _code(source: str) -> str:
    return f"```python\n{source}\n```"
