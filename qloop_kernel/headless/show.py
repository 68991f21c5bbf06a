"""``qloop show``: what each agent cell of a notebook would do, read before anything runs.

Per agent cell: its number (as ``qloop run`` and JupyterLab number cells), the prompt, the record's
provenance (``yours``: signed by your kernel; ``received``: not signed with your key, so it replays
only after you read it; ``invalid``: refused, with the reason in full), its status and cost, and every
step with its risk class (classified now, the way a replay classifies it), its decision and its code
(bounded; ``--full`` for all). Then the Fix, Explain and Edit with agent turns of ordinary cells
(saved under the cell's ``qloop_assist`` key: "fix of cell 3 (lookup): ..."). Then the calls outside agents made over MCP, saved in the notebook's
``qloop_outside`` metadata: who, which tool, the decision, the code, and whether your key signed the
entry. The text shows every character a person cannot see as its mark, as the card does
(``visible.as_shown``). ``--json`` gives the same as one document, its texts as saved. The exit
code is 1 when any record is invalid. ``qloop show`` of a hosted agent's chat session log
(``.qloop/acp/<chat>.jsonl``, see docs/acp.md) lists its decisions and actions the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..notebook.export import is_agent_cell
from ..notebook.options import agent_prompt
from ..policy.risk import classify
from ..records import (
    METADATA_KEY,
    CellRecord,
    RecordError,
    ToolCallRecord,
    load_record,
    mirrored_record,
)
from ..records.schema import shown_code
from ..records.text import usage_line
from ..redact import redact_text
from ..server.record import METADATA_KEY as OUTSIDE_KEY
from ..server.record import verified
from ..text import clip
from ..visible import as_shown
from .files import EXIT_FAILED, EXIT_OK

ASSIST_KEY = "qloop_assist"  # the page's Fix, Explain and Edit turns of a cell: {"turns": [...]}
ASSIST_ACTIONS = ("fix", "explain", "edit")
CODE_LINES = 12  # of each step's code, without --full
LINE_CHARS = 160
ANSWER_CHARS = 400
RECEIVED = (
    "received: not signed by your kernel; read every step before `qloop run --replay-received`"
)


def show(nb: Any, *, full: bool = False, as_json: bool = False) -> int:
    """Print the notebook's agent cells; the exit code (1 when a record is invalid)."""
    cells = [entry for index, cell in enumerate(nb.cells) if (entry := cell_entry(cell, index))]
    assists = [
        entry for index, cell in enumerate(nb.cells) for entry in assist_entries(cell, index)
    ]
    invalid = sum(1 for entry in cells + assists if entry["provenance"] == "invalid")
    outside = outside_entries(nb.get("metadata", {}))
    if as_json:
        found = {"cells": cells, "assists": assists, "invalid": invalid, "outside": outside}
        print(json.dumps(found, indent=2, ensure_ascii=False))
        return EXIT_FAILED if invalid else EXIT_OK
    if not cells and not assists:
        print("no agent cells")
    for entry in cells:
        for line in text_lines(entry, full):
            print(line)
    for entry in assists:
        for line in assist_lines(entry, full):
            print(line)
    for line in outside_lines(outside, full):
        print(line)
    return EXIT_FAILED if invalid else EXIT_OK


def show_log(path: Path, *, full: bool = False, as_json: bool = False) -> int:
    """Print a hosted agent's chat session log: each decision and action, as a notebook's
    outside calls are shown; a line that is not an entry is listed as unreadable."""
    saved: list[Any] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            saved.append(json.loads(line))
        except ValueError:
            saved.append(None)
    entries = outside_entries({OUTSIDE_KEY: {"entries": saved}})
    if as_json:
        print(json.dumps({"log": str(path), "entries": entries}, indent=2, ensure_ascii=False))
        return EXIT_OK
    lines = outside_lines(entries, full)
    head = f"hosted agent's chat (ACP): {len(entries)} decisions and actions in {path}"
    for line in [head, *lines[1:]] if lines else [f"{path}: no entries"]:
        print(line)
    return EXIT_OK


def outside_entries(metadata: Any) -> list[dict[str, Any]]:
    """The outside agents' calls saved in the notebook (``qloop_outside``), redacted; an entry
    that is not an object is listed as unreadable."""
    saved = metadata.get(OUTSIDE_KEY) if isinstance(metadata, dict) else None
    found = saved.get("entries") if isinstance(saved, dict) else None
    shown: list[dict[str, Any]] = []
    for item in found if isinstance(found, list) else []:
        if not isinstance(item, dict):
            shown.append({"provenance": "unreadable"})
            continue
        raw = item.get("input")
        given: dict[str, Any] = raw if isinstance(raw, dict) else {}
        code = item.get("ran") or given.get("code") or given.get("source") or ""
        shown.append(
            {
                "provenance": "yours" if verified(item) else "received",
                **{k: redact_text(str(item.get(k) or "")) for k in _OUTSIDE_FIELDS},
                "code": redact_text(str(code)),
                "ran": item.get("ran") is not None,
            }
        )
    return shown


_OUTSIDE_FIELDS = ("at", "client", "tool", "decision", "reason", "risk")


def outside_lines(entries: list[dict[str, Any]], full: bool) -> list[str]:
    """The outside agents' calls as text, one head line and the code of each."""
    if not entries:
        return []
    lines = [f"outside agents (MCP): {len(entries)} calls saved in this notebook"]
    for entry in entries:
        if entry["provenance"] == "unreadable":
            lines.append("  an unreadable entry (not an object)")
            continue
        who = "yours" if entry["provenance"] == "yours" else "received: not signed by your key"
        head = [entry["at"], entry["client"], entry["tool"], f"class {entry['risk'] or '?'}"]
        lines.append(as_shown("  " + "  ".join(head) + f" · {entry['decision']} · {who}"))
        if entry["reason"]:
            lines.append(f"      reason: {clip(as_shown(' '.join(entry['reason'].split())), 200)}")
        lines += ["      " + line for line in _bounded(as_shown(entry["code"]), CODE_LINES, full)]
    return [*lines, ""]


def cell_entry(cell: Any, index: int) -> dict[str, Any] | None:
    """What ``qloop show`` says about one cell (None: not an agent cell, no record), redacted."""
    saved = cell.get("metadata", {}).get(METADATA_KEY) or mirrored_record(cell)
    if saved is None and not is_agent_cell(cell):
        return None
    entry: dict[str, Any] = {"cell": index + 1}
    if saved is None:
        return {**entry, "provenance": "none", "prompt": _prompt(cell), "steps": []}
    try:
        record = load_record(saved)
    except RecordError as exc:
        return {**entry, "provenance": "invalid", "reason": redact_text(str(exc)),
                "prompt": _prompt(cell), "steps": []}  # fmt: skip
    return {**entry, **record_entry(record)}


def assist_entries(cell: Any, index: int) -> list[dict[str, Any]]:
    """The Fix, Explain and Edit turns saved on one cell (``qloop_assist``), oldest first."""
    saved = cell.get("metadata", {}).get(ASSIST_KEY)
    turns = saved.get("turns") if isinstance(saved, dict) else None
    entries: list[dict[str, Any]] = []
    for turn in turns if isinstance(turns, list) else []:
        given = turn if isinstance(turn, dict) else {}
        action = given.get("action")
        entry = {"cell": index + 1, "cell_id": redact_text(str(cell.get("id", ""))),
                 "action": action if action in ASSIST_ACTIONS else "turn"}  # fmt: skip
        try:
            record = load_record(given.get("record"))
        except RecordError as exc:
            entries.append({**entry, "provenance": "invalid", "reason": redact_text(str(exc)),
                            "prompt": "", "steps": []})  # fmt: skip
            continue
        entries.append({**entry, **record_entry(record)})
    return entries


def assist_lines(entry: dict[str, Any], full: bool) -> list[str]:
    """A Fix, Explain or Edit turn as text: ``fix of cell 3 (lookup): ...``, then as an agent
    cell's (the prompt's first line only, without ``--full``)."""
    head = f"{entry['action']} of cell {entry['cell']} ({as_shown(entry['cell_id'])})"
    if entry["provenance"] == "invalid":
        return [f"{head}: invalid: {as_shown(entry['reason'])}", ""]
    shown = entry if full else {**entry, "prompt": (entry["prompt"].splitlines() or [""])[0]}
    lines = text_lines(shown, full)
    return [f"{head}: {lines[0].split('  ', 1)[1]}", *lines[1:]]


def record_entry(record: CellRecord) -> dict[str, Any]:
    replayed = {id(step) for step in record.replay_steps()}
    return {
        "provenance": "yours" if record.is_own() else "received",
        "prompt": redact_text(record.prompt),
        "status": record.status,
        "model": record.model,
        "usage": usage_line(record),
        "cost_usd": record.cost_usd,
        "steps": [step_entry(call, id(call) in replayed) for call in record.tool_calls],
        "answer": redact_text(record.answer or ""),
    }


def step_entry(call: ToolCallRecord, replays: bool) -> dict[str, Any]:
    code = shown_code(call)
    shown = code if code is not None else json.dumps(call.input, ensure_ascii=False)
    return {
        "tool": call.name,
        "risk": risk_of(call),
        "decision": call.decision.kind,
        "reason": redact_text(call.decision.reason or ""),
        "failed": call.is_error,
        "replays": replays,
        "secret_cut": call.input_redacted,
        "code": redact_text(shown),
    }


def risk_of(call: ToolCallRecord) -> str | None:
    """The class of a ``run_code`` step, as a replay classifies it (without the kernel's variables);
    None for a tool whose calls have no class."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = call.input.get("code")
    if call.name != "run_code" or not isinstance(code, str):
        return None
    try:
        return classify(TransformerManager().transform_cell(code)).risk
    except Exception:  # code IPython cannot transform is never milder than unknown
        return "unknown"


def text_lines(entry: dict[str, Any], full: bool) -> list[str]:
    """One cell as text: a head line, the prompt, each step with its code, the answer."""
    number, provenance = entry["cell"], entry["provenance"]
    if provenance == "none":
        return [f"cell {number}  no saved record (running it asks the model)", *_quoted(entry), ""]
    if provenance == "invalid":
        return [f"cell {number}  invalid: {as_shown(entry['reason'])}", *_quoted(entry), ""]
    who = "yours (signed by your kernel)" if provenance == "yours" else RECEIVED
    head = f"{entry['status']}  {as_shown(entry['model'])}  {entry['usage']}"
    lines = [f"cell {number}  {head}", f"  provenance: {who}", *_quoted(entry)]
    total = len(entry["steps"])
    for index, step in enumerate(entry["steps"], 1):
        lines.append(f"  step {index}/{total}  {as_shown(step['tool'])}  {_step_head(step)}")
        lines += ["      " + line for line in _bounded(as_shown(step["code"]), CODE_LINES, full)]
    if entry["answer"]:
        shown = as_shown(entry["answer"], runs=False)
        answer = shown if full else clip(shown, ANSWER_CHARS)
        lines += ["  answer:", *("      " + line for line in answer.splitlines())]
    return [*lines, ""]


def _step_head(step: dict[str, Any]) -> str:
    parts = [f"class {step['risk']}" if step["risk"] else "no class", _decision(step)]
    if step["failed"]:
        parts.append("failed when it ran")
    parts.append("replays" if step["replays"] else "does not replay")
    if step["secret_cut"]:
        parts.append("a secret was cut from it (replay refuses it)")
    return " · ".join(parts)


def _decision(step: dict[str, Any]) -> str:
    words = {"auto": "run by the policy", "approved": "approved by a person",
             "edited": "edited and approved", "always": "approved by a grant",
             "readonly": "read-only", "denied": "denied"}  # fmt: skip
    text = str(words.get(step["decision"], step["decision"]))
    reason = " ".join(step["reason"].split())
    if step["decision"] == "denied" and reason:
        text += f" ({clip(as_shown(reason), 120)})"
    return text


def _quoted(entry: dict[str, Any]) -> list[str]:
    prompt = entry.get("prompt") or ""
    return ["  prompt: " + line for line in as_shown(prompt, runs=False).splitlines() or [""]]


def _bounded(code: str, limit: int, full: bool) -> list[str]:
    lines = code.splitlines() or [""]
    if full:
        return lines
    cut = [clip(line, LINE_CHARS) for line in lines]
    if len(cut) <= limit:
        return cut
    return [*cut[:limit], f"… {len(lines) - limit} more lines (`qloop show --full` shows all)"]


def _prompt(cell: Any) -> str:
    return redact_text(str(agent_prompt(str(cell.get("source", "")))[1]))
