"""The notebook as the user sees it, for the ``read_notebook`` tool: every cell in order with its id,
type, execution count, bounded source and a bounded summary of its outputs (text, error name, the mime
types of rich outputs; never image bytes).

Two places build the same view: the JupyterLab / Notebook 7 extension from the open notebook
(``labextension/src/notebookview.ts``, asked over the ``qloop`` comm), and ``qloop run`` from the
notebook it executes (``notebook_view`` here, sent with each agent cell's request). The bounds are the
same on both sides; the kernel renders either for the model (``render``). The other names ``qloop run``
and the kernel share about cells are here too: the ids and signed provenance of the cells a turn adds,
and the output in which a headless run_cell hands over a cell's outputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .records import signing
from .redact import redacted_head, redacted_truncate
from .text import marker

NOTEBOOK_VIEW_KEY = "qloopNotebook"  # in a `qloop run` request's metadata: the notebook it runs
CELLS_KEY = "qloopCells"
"""The execute request's metadata key under which ``qloop run`` sends every cell's type and
whole source ({id: [cell_type, source]}) with an agent cell: what run_cell runs headless."""
CELL_RUN_MIME = "application/vnd.qloop.cell-run+json"
"""A headless run_cell's outputs, shown in the agent cell for ``qloop run`` to move into the cell
that ran ({"target", "outputs"})."""
PROVENANCE_KEY = "qloop_provenance"  # the cell metadata of an accepted proposal
SOURCE_CHARS = 3_000  # of each cell's source
OUTPUT_CHARS = 500  # of each output's text
OUTPUTS_PER_CELL = 5
ANSWER_CHARS = 30_000  # sources and output texts of one answer; later cells are listed only
RESULT_CHARS = 60_000  # what the model reads of one answer (500 cells listed fit)

_RICH = ("execute_result", "display_data")


def proposed_cell_id(agent_cell: str, index: int, source: str) -> str:
    """The id of the ``index``-th cell (from 1) a turn of ``agent_cell`` adds, as ``qloop run``
    gives it: the same in the kernel's answer to the model and in the output notebook."""
    digest = hashlib.sha256(f"{agent_cell}\n{index}\n{source}".encode()).hexdigest()
    return f"q{digest[:15]}"


def provenance(agent_cell: str | None, call_id: str, source: str) -> dict[str, Any]:
    """What an accepted cell keeps in its metadata: the agent cell and step that made it, signed
    by this user over the source it was proposed with."""
    body = {"agent_cell": agent_cell or "", "call_id": call_id,
            "source_sha256": hashlib.sha256(source.encode()).hexdigest()}  # fmt: skip
    payload = "\n".join(f"{k}={v}" for k, v in sorted(body.items())).encode()
    return {**body, "signature": signing.sign(payload)}


def _text(value: Any) -> str:
    """An nbformat multiline string (a string or a list of strings); anything else is empty."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _output(output: Any) -> dict[str, Any]:
    if not isinstance(output, Mapping):
        return {"output_type": "unknown"}
    kind = str(output.get("output_type", "unknown"))
    if kind == "stream":
        text = _text(output.get("text"))
        name = output.get("name")
        return {"output_type": kind, "name": name if isinstance(name, str) else "",
                "text": redacted_head(text, OUTPUT_CHARS), "chars": len(text)}  # fmt: skip
    if kind == "error":
        return {"output_type": kind, "ename": redacted_head(_text(output.get("ename")), 200),
                "evalue": redacted_head(_text(output.get("evalue")), OUTPUT_CHARS)}  # fmt: skip
    if kind in _RICH:
        data = output.get("data")
        data = data if isinstance(data, Mapping) else {}
        text = _text(data.get("text/plain"))
        return {"output_type": kind, "text": redacted_head(text, OUTPUT_CHARS), "chars": len(text),
                "mime": sorted(str(k) for k in data)}  # fmt: skip
    return {"output_type": kind}


def _id(cell: Mapping[str, Any]) -> str:
    cell_id = cell.get("id")
    return cell_id if isinstance(cell_id, str) else ""


def _spent(output: Mapping[str, Any]) -> int:
    return len(str(output.get("text", ""))) + len(str(output.get("evalue", "")))


def notebook_view(
    cells: Sequence[Mapping[str, Any]],
    cell_ids: Iterable[str] | None = None,
    outputs: bool = True,
    path: str = "",
) -> dict[str, Any]:
    """The view of nbformat ``cells`` (dicts or NotebookNodes): all of them, or those of
    ``cell_ids`` (unknown ids listed in ``missing``), within the bounds above."""
    wanted = None if cell_ids is None else list(dict.fromkeys(cell_ids))
    known = {_id(c) for c in cells}
    spent, full = 0, True
    shown: list[dict[str, Any]] = []
    for cell in cells:
        cell_id = _id(cell)
        if wanted is not None and cell_id not in wanted:
            continue
        kind = str(cell.get("cell_type", "code"))
        source = _text(cell.get("source"))
        metadata = cell.get("metadata")
        count = cell.get("execution_count") if kind == "code" else None
        item: dict[str, Any] = {
            "id": cell_id,
            "cell_type": kind,
            "execution_count": count if isinstance(count, int) else None,
            "agent": isinstance(metadata, Mapping) and "qloop" in metadata,
            "source": redacted_head(source, SOURCE_CHARS),  # a cut secret: redacted whole
            "source_chars": len(source),
        }
        found = cell.get("outputs")
        raw = found if isinstance(found, list) else []
        if outputs:
            item["outputs"] = [_output(o) for o in raw[:OUTPUTS_PER_CELL]]
            item["more_outputs"] = max(0, len(raw) - OUTPUTS_PER_CELL)
        cost = len(item["source"]) + sum(_spent(o) for o in item.get("outputs", []))
        full = full and spent + cost <= ANSWER_CHARS  # from the first cell that does not fit on,
        if not full:  # every cell is listed without its content
            item.update(source="", omitted=True)
            if outputs:
                item.update(outputs=[], more_outputs=len(raw))
        else:
            spent += cost
        shown.append(item)
    missing = [i for i in wanted or () if i not in known]
    return {"notebook_path": path, "total_cells": len(cells), "cells": shown, "missing": missing}


def select(
    view: Mapping[str, Any], cell_ids: Iterable[str] | None, outputs: bool
) -> dict[str, Any]:
    """The cells of ``cell_ids`` (None: all) of an already built view, outputs dropped when not
    wanted: how ``qloop run``'s view, sent once with the cell, answers each call."""
    cells = [c for c in view.get("cells") or [] if isinstance(c, Mapping)]
    wanted = None if cell_ids is None else list(dict.fromkeys(cell_ids))
    known = {str(c.get("id", "")) for c in cells}
    chosen = [dict(c) for c in cells if wanted is None or str(c.get("id", "")) in wanted]
    if not outputs:
        for cell in chosen:
            cell.pop("outputs", None)
            cell.pop("more_outputs", None)
    return {**view, "cells": chosen, "missing": [i for i in wanted or () if i not in known]}


def render(view: Mapping[str, Any], *, running_cell: str | None = None) -> str:
    """The view as the model reads it: one block per cell, bounded; the running agent cell marked."""
    cells = [c for c in view.get("cells") or [] if isinstance(c, Mapping)]
    total = view.get("total_cells")
    path = view.get("notebook_path") or "the open notebook"
    head = f"{path}: {total if isinstance(total, int) else len(cells)} cells"
    if len(cells) != total:
        head += f", {len(cells)} shown"
    lines = [head]
    omitted = 0
    for index, cell in enumerate(cells, 1):
        label = _label(index, cell, running_cell)
        if cell.get("omitted"):
            omitted += 1
            lines.append(f"{label}: not shown")
            continue
        lines.append(f"\n{label}")
        source = str(cell.get("source", ""))
        chars = cell.get("source_chars")
        lines.append(source if source else "(empty)")
        if isinstance(chars, int) and chars > len(source):
            lines.append(marker(chars - len(source), hint="the rest of the cell's source"))
        lines += [f"  -> {_output_line(o)}" for o in cell.get("outputs") or []
                  if isinstance(o, Mapping)]  # fmt: skip
        more = cell.get("more_outputs")
        if isinstance(more, int) and more:
            lines.append(f"  -> {marker(more, 'outputs')}")
    missing = [str(m) for m in view.get("missing") or []]
    if missing:
        lines.append(f"\nno cell with these ids: {', '.join(missing)}")
    if omitted:
        lines.append(f"\n{omitted} cells listed without their content: read them by id")
    return redacted_truncate("\n".join(lines), RESULT_CHARS)


def _label(index: int, cell: Mapping[str, Any], running_cell: str | None) -> str:
    kind = str(cell.get("cell_type", "code"))
    label = f"#{index} id={cell.get('id', '')} {kind}"
    count = cell.get("execution_count")
    if kind == "code":
        label += f", In [{count}]" if isinstance(count, int) else ", not run"
    if cell.get("agent"):
        label += ", agent cell"
    if running_cell is not None and cell.get("id") == running_cell:
        label += " (this agent cell, running now)"
    return label


def _output_line(output: Mapping[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return f"{output.get('name', 'stdout')}: {_cut(output)}"
    if kind == "error":
        return f"error: {output.get('ename', '')}: {output.get('evalue', '')}"
    if kind in _RICH:
        mime = [str(m) for m in output.get("mime") or []]
        figures = sum(1 for m in mime if m.startswith("image/"))
        rich = [m for m in mime if m != "text/plain" and not m.startswith("image/")]
        parts = [_cut(output)] if output.get("text") else []
        if figures:
            parts.append("a figure" if figures == 1 else f"{figures} figures")
        if rich:
            parts.append("also " + ", ".join(rich))
        return f"{'result' if kind == 'execute_result' else 'display'}: " + "; ".join(parts)
    return str(kind or "output")


def _cut(output: Mapping[str, Any]) -> str:
    text = str(output.get("text", ""))
    chars = output.get("chars")
    if isinstance(chars, int) and chars > len(text):
        text += " " + marker(chars - len(text))
    return text
