"""Outside agents' saved calls as an agent cell, replayed like any saved turn without the agent.

The page sends the notebook's ``qloop_outside`` entries and the id of the cell it adds; the answer
is that cell's ``%%agent`` source and record. Running the cell replays the code that ran, in order,
behind the same replay card and policy as an in-notebook agent's turn (``qloop run`` and papermill
included). The record is signed with this user's key only when every entry it holds verifies: built
from a received entry (edited, or from someone else's notebook) it is itself received, and its
card shows every step before anything runs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..messages import now_iso
from ..records.schema import CellRecord, DecisionRecord, Timings, ToolCallRecord
from ..redact import REDACTED, redact, redact_text
from ..text import counted
from .record import verified

CELL_TOOLS = ("add_cell", "edit_cell")


@dataclass(frozen=True)
class AgentCell:
    """The cell to add: its source, its record (JSON), what it holds."""

    source: str
    record: dict[str, Any]
    steps: int  # code steps a run replays
    own: bool  # signed: every entry verified
    skipped: int  # entries that are not readable calls


def decision_kind(how: str) -> str:
    """The record's decision kind for an entry's ``decision`` (the gate's words for who decided)."""
    if how.startswith("approved by the user, who also allowed"):
        return "always"
    if how.startswith("run by the user's grant"):
        return "always"
    if how.startswith("run without asking by the policy"):
        return "auto"
    if how.startswith("edited by the user"):
        return "edited"
    if how.startswith("approved by the user"):
        return "approved"
    return "denied"


def agent_cell(entries: list[Any], cell_id: str) -> AgentCell:
    """The agent cell replaying ``entries`` (the saved outside calls, in order)."""
    readable = [e for e in entries if _readable(e)]
    calls = [_call(e) for e in readable]
    clients = list(dict.fromkeys(str(e["client"]) for e in readable))
    prompt = _prompt(clients)
    record = CellRecord(
        session_id=uuid.uuid4().hex,
        cell_id=cell_id,
        prompt=prompt,
        model="outside agent: " + ", ".join(clients) if clients else "outside agent",
        status="completed",
        answer=_answer(readable, calls),
        tool_calls=calls,
        timings=Timings(
            started_at=str(readable[0]["at"]) if readable else now_iso(),
            ended_at=str(readable[-1]["at"]) if readable else now_iso(),
        ),
    )
    own = bool(readable) and all(verified(e) for e in readable)
    if own:
        saved = record.sealed()
    else:  # received: a digest (load_record checks it) and no signature
        stamped = record.model_copy(update={"updated_at": now_iso()})
        saved = stamped.model_copy(update={"digest": stamped.computed_digest()})
    return AgentCell(
        source=f"%%agent\n{prompt}",
        record=saved.model_dump(mode="json"),
        steps=len(saved.replay_steps()),
        own=own,
        skipped=len(entries) - len(readable),
    )


def _readable(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    text_fields = ("id", "at", "client", "tool", "decision")
    if not all(isinstance(entry.get(k), str) and entry.get(k) for k in text_fields):
        return False
    ran = entry.get("ran")
    return isinstance(entry.get("input"), dict) and (ran is None or isinstance(ran, str))


def _call(entry: dict[str, Any]) -> ToolCallRecord:
    """One saved call as the record's tool call; the code that ran is a run_code step's input."""
    tool = str(entry["tool"])
    ran = entry.get("ran")
    kind = decision_kind(str(entry["decision"])) if isinstance(ran, str) else "denied"
    reason = str(entry.get("reason") or "") or None
    result = redact_text(str(entry.get("result") or ""))
    given = redact(entry["input"])
    if tool == "run_code" and isinstance(ran, str):
        given = {"code": ran}  # what ran (the user's edit included), as a replay runs it
    elif tool == "add_cell" and result.startswith("cell "):
        where = given.get("after") or "the notebook's last cell"
        result = f"added cell {result.split()[1]} after {where}"  # as where_now reads it
    redacted = isinstance(ran, str) and (entry.get("ran_redacted") is True or REDACTED in ran)
    return ToolCallRecord(
        id=f"outside_{entry['id']}"[:64],
        name=tool,
        input=given,
        input_redacted=redacted,
        decision=DecisionRecord(kind=kind, reason=reason, at=str(entry["at"])),  # type: ignore[arg-type]
        is_error=entry.get("is_error") is True,
        output_summary=f"{entry['client']} · {tool} · {entry['decision']}\n{result}".strip(),
    )


def _prompt(clients: list[str]) -> str:
    who = ", ".join(clients) if clients else "outside agents"
    return f"Replay the calls {who} made to this notebook's kernel over MCP."


def _answer(entries: list[dict[str, Any]], calls: list[ToolCallRecord]) -> str:
    """What the cell's answer says: who called, when, and what a run replays."""
    if not entries:
        return "No readable outside call was saved in this notebook: nothing replays."
    done = [c for c in calls if c.decision.kind != "denied"]
    ran = [c for c in done if c.name == "run_code" and not c.is_error]
    failed = [c for c in done if c.name == "run_code" and c.is_error]
    cells = [c for c in done if c.name in CELL_TOOLS]
    runs = [c for c in done if c.name == "run_cell"]
    refused = [c for c in calls if c.decision.kind == "denied"]
    when = f"between {entries[0]['at']} and {entries[-1]['at']}"
    lines = [
        f"{counted(len(entries), 'call')} from outside the notebook over MCP, {when}:",
        f"- {counted(len(ran), 'code step')} ran, {len(failed)} more raised an error;",
        f"- {counted(len(cells), 'cell change')} applied and {counted(len(runs), 'cell run')}: "
        "those cells are the notebook's own, run as any cell, never by this replay;",
        f"- {counted(len(refused), 'call')} denied, refused or not applied.",
        "",
        "Running this cell replays the code steps in order, without the outside agent, after the "
        "same approval as any saved agent turn.",
    ]
    return "\n".join(lines)
