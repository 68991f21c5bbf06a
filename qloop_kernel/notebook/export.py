"""Export: the agent's approved steps as ordinary code, so a notebook runs without qloop or a model.

``qloop export NOTEBOOK --to cells`` writes a notebook in which each agent cell with a saved record
becomes a Markdown cell (the prompt and the saved answer) followed by one code cell per approved
code step, in the order they ran; ``--to script`` writes the same as a Python script in the percent
format (``# %%`` cells) that editors and jupytext read. ``%load_ext qloop_kernel`` lines and qloop
metadata and outputs are left out, so the result needs neither qloop_kernel nor a model.

The record's text is untrusted: the Markdown shows each character a person cannot see as its mark
(``visible.as_shown``), and a code step that holds one keeps its code as it ran under a comment
naming them, since an editor would not show them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..records import METADATA_KEY, MIME_TYPE, CellRecord, RecordError, load_record, mirrored_record
from ..text import counted
from ..visible import as_shown, hidden_characters
from .options import agent_prompt

if TYPE_CHECKING:
    from nbformat import NotebookNode

_LOAD_EXT = re.compile(r"^\s*%(load_ext|reload_ext)\s+qloop_kernel\s*$")
_AGENT_LINE = re.compile(r"^\s*%agent\b")
TRANSCRIPT_MIMES = (MIME_TYPE, "application/vnd.qloop.answer+json")


def is_agent_cell(cell: Any) -> bool:
    return cell.get("cell_type") == "code" and str(cell.get("source", "")).lstrip().startswith(
        "%%agent"
    )


def saved_record(cell: Any) -> CellRecord | None:
    """The cell's saved record (metadata, else its output mirror), or None if there is none."""
    data = cell.get("metadata", {}).get(METADATA_KEY) or mirrored_record(cell)
    if data is None:
        return None
    try:
        return load_record(data)
    except RecordError:
        return None


def plain_source(source: str) -> str:
    """A code cell's source without the lines that need qloop (``%load_ext``, ``%agent``)."""
    lines = [
        f"# {line.strip()}  (qloop, left out by export)" if _AGENT_LINE.match(line) else line
        for line in source.splitlines()
        if not _LOAD_EXT.match(line)
    ]
    return "\n".join(lines).strip("\n")


def step_code(record: CellRecord) -> list[str]:
    """The approved code steps of a record, as they ran (a step whose secret was cut says so)."""
    codes = []
    for step in record.replay_steps():
        code = str(step.input["code"]).rstrip()
        hidden = hidden_characters(code)
        if hidden:
            code = (
                f"# this step holds characters an editor may not show: {', '.join(hidden)}\n{code}"
            )
        if step.input_redacted:
            code = (
                "# a secret was cut from this step when it was saved: it is not what ran\n" + code
            )
        codes.append(code)
    return codes


def turn_markdown(prompt: str, record: CellRecord | None) -> str:
    """The Markdown above an exported turn: the prompt and the saved answer, each character a
    person cannot see as its mark."""
    lines = as_shown(prompt, runs=False).splitlines()
    quoted = "\n".join("> " + line for line in lines or [""])
    if record is None:
        return f"**Agent task** (no saved record: nothing exported)\n\n{quoted}"
    steps = counted(len(record.replay_steps()), "approved code step")
    head = f"**Agent task** · {as_shown(record.model)} · {record.status} · {steps}"
    if not record.is_own():
        head += " · received from elsewhere (not signed by you): read the steps below"
    shown = as_shown(record.answer, runs=False) if record.answer else ""
    answer = f"\n\n**Saved answer**\n\n{shown}" if shown else ""
    return f"{head}\n\n{quoted}{answer}"


def _prompt_of(cell: Any) -> str:
    return agent_prompt(str(cell.get("source", "")))[1]


def exported_cells(nb: Any) -> list[tuple[str, str]]:
    """The notebook as (cell type, source) pairs, agent cells turned into Markdown and code."""
    cells: list[tuple[str, str]] = []
    for cell in nb.cells:
        if is_agent_cell(cell):
            record = saved_record(cell)
            prompt = record.prompt if record is not None else _prompt_of(cell)
            cells.append(("markdown", turn_markdown(prompt, record)))
            cells += [("code", code) for code in (step_code(record) if record else [])]
        elif cell.get("cell_type") == "code":
            source = plain_source(str(cell.get("source", "")))
            if source.strip():
                cells.append(("code", source))
        else:
            cells.append((str(cell.get("cell_type")), str(cell.get("source", ""))))
    return cells


def to_notebook(nb: Any) -> NotebookNode:
    """A new notebook of plain cells (no outputs, no qloop metadata), same notebook metadata."""
    import nbformat

    out: NotebookNode = nbformat.v4.new_notebook(metadata=dict(nb.metadata))
    makers: dict[str, Callable[[str], NotebookNode]] = {
        "code": nbformat.v4.new_code_cell,
        "markdown": nbformat.v4.new_markdown_cell,
        "raw": nbformat.v4.new_raw_cell,
    }
    out.cells = [makers.get(kind, makers["raw"])(source) for kind, source in exported_cells(nb)]
    return out


def to_script(nb: Any) -> str:
    """The notebook as a Python script in the percent format."""
    parts = []
    for kind, source in exported_cells(nb):
        if kind == "code":
            parts.append(f"# %%\n{source}")
        else:
            text = "\n".join(f"# {line}".rstrip() for line in source.splitlines())
            parts.append(f"# %% [{kind}]\n{text}")
    return "\n\n".join(parts) + "\n"


def records_script(records: list[CellRecord]) -> str:
    """The approved steps of ``records`` (agent turns of a kernel session) as one script."""
    parts = []
    for record in records:
        said = as_shown(record.prompt, runs=False).splitlines()
        prompt = "\n".join(f"# > {line}".rstrip() for line in said)
        parts.append(
            "\n\n".join([f"# agent task ({record.status}):\n{prompt}", *step_code(record)])
        )
    return "\n\n".join(parts) + "\n" if parts else ""
