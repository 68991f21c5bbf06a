"""``%agent fix [CELL_ID]``, ``%agent explain CELL_ID`` and ``%agent edit CELL_ID "instruction"``:
the agent from any cell.

Each builds the turn's task from a notebook cell and run it as an ordinary turn of the cell that runs
the command (its record, policy, cards and conversation are that cell's): the agent may read and run
read steps under the policy, and answers with an ``edit_cell`` proposal on the cell (or an
``add_cell`` before it) through the one proposal machinery (``proposals.py``), so the user sees the
diff and accepts or rejects it with a reason. A fix sends, redacted and bounded: the cell's current
source, its error and traceback (``failures.py``) and summaries of the variables its failing lines
name; the rules files come with every turn (``context_turn.py``). A later fix of the same cell goes
on from the earlier one (the conversation is the kernel's) and says so. An explanation gets the same
context and the read tools alone: nothing runs and nothing is proposed. The page's Fix, Explain and
Edit with agent buttons send these lines with the cell's id (``failures.ASSIST_KEY``): the turn's
outputs go to an area beside the cell, and its record beside the cell's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..tools import namespace
from .cell import CellContext, current_cell
from .display import line
from .failures import names_in

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


def explain_command(agent: KernelAgent, target: str) -> None:
    """``%agent explain CELL_ID``: ask the agent to explain cell ``target`` (and its error)."""
    cell = current_cell(agent.shell)
    agent.guarded(cell, lambda: _explain(agent, cell, target))


def instruction_text(words: list[str]) -> str:
    """The instruction of ``%agent edit CELL_ID "..."`` from the words after the cell id: a JSON
    string, as the page writes it (quotes, backslashes and newlines escaped, and ``$``, braces and
    spaces as ``\\u`` escapes, which IPython would expand in a magic's line or split on), else the
    words with their quotes stripped."""
    text = " ".join(words).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, str):
            return decoded
    return text.strip("\"'")


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
    earlier = agent.session.fix_turns.get(failed.cell_id, 0)
    prompt = fix_prompt(failed, current, before, _variables(agent, failed.names), earlier)
    agent.session.fix_turns[failed.cell_id] = earlier + 1
    agent.run_turn(_redacted(agent, prompt), agent.manager.settings, cell)


def _explain(agent: KernelAgent, cell: CellContext, target: str) -> None:
    source = _source_now(agent, cell, target)
    if source is None:
        raise UsageError(
            f"%agent explain: no code cell with id {target!r} in the notebook, and none ran "
            "with that id in this kernel"
        )
    failed = agent.session.failed_cells.get(target)
    error = failed if failed is not None and not failed.agent else None
    names = error.names if error is not None else names_in(source.splitlines())
    prompt = explain_prompt(target, source, error, _variables(agent, names))
    agent.run_turn(_redacted(agent, prompt), agent.manager.settings, cell, plan=True)


def _source_now(agent: KernelAgent, cell: CellContext, target: str) -> str | None:
    """The current source of code cell ``target``: the page's (or ``qloop run``'s) where one
    answers, else the source it last ran with in this kernel; None where neither knows it."""
    agent.load_notebook_grants(cell)
    source = agent.notebook_source(cell)
    if source is not None:
        view = source(None, False)
        found = view.get("cells") if isinstance(view, Mapping) else None
        current, _ = _cell_and_before([c for c in found or [] if isinstance(c, Mapping)], target)
        if current is not None:
            return current
    ran = [text for cell_id, text in agent.session.cells_run if cell_id == target]
    return ran[-1] if ran else None


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


def fix_prompt(
    failed: FailedCell, current: str | None, before: str | None, variables: str, earlier: int = 0
) -> str:
    """The task of a fix: the cell, its error, the variables its failing lines name; ``earlier``:
    the fix turns of this cell before this one."""
    source = failed.source if current is None else current
    parts = [f"Fix the error of notebook cell {failed.cell_id}.", ""]
    if earlier:
        parts += [f"This goes on from your earlier fix of this cell in this conversation ({earlier} "
                  "so far): it still fails (the fix was rejected, or the cell failed again with it). "
                  "Do not propose the same change again.", ""]  # fmt: skip
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


def explain_prompt(cell_id: str, source: str, failed: FailedCell | None, variables: str) -> str:
    """The task of an explanation: the cell, its error where it has one, the variables it names."""
    parts = [f"Explain notebook cell {cell_id} to the user: what it does"
             f"{' and why it fails' if failed is not None else ''}.", "",
             "Its source now:", _code(source), ""]  # fmt: skip
    if failed is not None:
        parts += [f"Its last run failed: {failed.error}", "Traceback (the notebook's frames and "
                  "the innermost library frames, innermost last):", failed.traceback, ""]  # fmt: skip
    if variables:
        parts += ["The variables it names, as they are now:", variables, ""]
    parts += ["You may inspect variables and read the notebook; nothing runs and you propose no "
              "change. Answer in a few short paragraphs."]  # fmt: skip
    return "\n".join(parts)


def _code(source: str) -> str:
    return f"```python\n{source}\n```"
