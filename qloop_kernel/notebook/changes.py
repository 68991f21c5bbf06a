"""A turn's code steps and undo: the card's "cannot be undone" line, each step's changes, the record.

- :class:`UndoNotices` wraps the card approver: before a ``run_code`` card is shown, what the step
  may change is saved (``undo.UndoLog.prepare``) and the card says what cannot be undone, and why.
- :class:`StepOutcomes` observes the turn: after each code step, its changes and Undo button are
  shown at the foot of its card (or on their own for a step that ran without one).
- :class:`StepViews` keeps the Undo of the last step the only one enabled, and marks it undone.
- :class:`ChangesStore` adds each step's changes (summaries only) to the turn's record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..loop import TurnObserver
from ..messages import ModelEvent, ModelResponse, ToolCall, ToolOutcome, Usage
from ..policy.permissions import ApprovalRequest, Approver, Decision, Deny, Request
from ..records import CellRecord
from ..records.schema import VariableChange
from ..redact import redact_text
from ..values.fingerprint import Change
from .approval import StepChangesBox
from .display import line
from .undo import StepChanges, UndoLog, UndoReport

MAX_RECORDED_CHANGES = 50  # per step, in the record
RETIRED = "a later step changed variables or cells: only the last one can be undone"
STEP_TOOLS = frozenset({"run_code", "run_cell", "add_cell", "edit_cell"})
"""The tools whose calls may run code or edit the notebook: a step Undo takes back."""


class UndoNotices:
    """An approver that saves what a code step may change before its card, and says on the card
    what cannot be undone."""

    def __init__(self, inner: Approver, log: UndoLog) -> None:
        self.inner = inner
        self.log = log

    @property
    def cards(self) -> Mapping[str, Any]:
        """The inner approver's cards by call id (a step's outcome goes at the foot of its card)."""
        cards = getattr(self.inner, "cards", None)
        return cards if cards is not None else {}

    def decide(self, request: Request) -> Decision:
        code = _run_code(request)
        if isinstance(request, ApprovalRequest) and code is not None:
            notice = self.log.prepare(code, request.assessment).notice()
            if notice is not None:
                notices = [*request.details.get("notices", []), notice]
                request = dataclasses.replace(
                    request, details={**request.details, "notices": notices}
                )
        decision = self.inner.decide(request)
        if isinstance(decision, Deny):
            self.log.discard()  # nothing runs: the copies are let go
        return decision


def _run_code(request: Request) -> str | None:
    """The code of a run_code call's request (None for other tools and for replays)."""
    if not isinstance(request, ApprovalRequest) or request.call.name != "run_code":
        return None
    code = request.call.input.get("code")
    return code if isinstance(code, str) else None


class StepViews:
    """The changes and Undo shown for the steps of one kernel; only the last step's Undo works."""

    def __init__(self, log: UndoLog) -> None:
        self.log = log
        self.current: Any = None  # the StepChangesBox of the step Undo applies to
        self.current_step: StepChanges | None = None
        log.on_step.append(self._newer)
        log.on_undone.append(self._undone)

    def show(self, step: StepChanges, card: Any, interactive: bool) -> None:
        """Show what ``step`` did: at the foot of its card, on its own, or as lines (headless)."""
        lines = [redact_text(line) for line in step.shown_lines()]  # a value may be a secret
        notes = [f"not undone: {reason}" for reason in step.not_undone()]
        if not step.changes and not step.notebook and not notes:
            return
        if not interactive:
            line("changes: " + "; ".join(lines))
            for note in notes:
                line(note, "warn")
            return
        from IPython.display import display


        undo = (lambda: self.log.undo(step).lines()) if step.undoable else None
        box = StepChangesBox(lines, notes, undo)
        if step is self.log.last:
            self.current, self.current_step = box, step
        if card is not None:
            card.show_after(box.widget)
        else:
            display(box.widget)

    def _newer(self, step: StepChanges | None) -> None:
        if step is not None and self.current is not None and self.current_step is not step:
            self.current.retire(RETIRED)
            self.current, self.current_step = None, None

    def _undone(self, report: UndoReport) -> None:
        if self.current is not None:
            self.current.undone(report.lines())
        self.current, self.current_step = None, None


class StepOutcomes(TurnObserver):
    """Passes every event on to ``inner``; after each code step, shows what it changed."""

    def __init__(
        self,
        inner: TurnObserver,
        views: StepViews,
        *,
        cards: Mapping[str, Any] | None = None,
        interactive: bool = True,
    ) -> None:
        self.inner = inner
        self.views = views
        self.cards = cards if cards is not None else {}
        self.interactive = interactive

    def on_event(self, event: ModelEvent) -> None:
        self.inner.on_event(event)

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self.inner.on_response(response, usage, cost_usd)

    def on_tool_start(self, call: ToolCall) -> None:
        self.inner.on_tool_start(call)

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.inner.on_tool_end(outcome)
        card = self.cards.get(outcome.call.id)
        if card is not None and outcome.decision != "denied":
            card.finished(outcome.duration_s, outcome.is_error)
        if outcome.call.name not in STEP_TOOLS:
            return
        step = self.views.log.claim(outcome.call.id)
        if step is not None:
            self.views.show(step, self.cards.get(outcome.call.id), self.interactive)


def variable_changes(found: list[Change]) -> list[VariableChange]:
    """A step's changes as the record keeps them: summaries (redacted), never values."""
    return [
        VariableChange(name=c.name, kind=c.kind, summary=redact_text(c.summary), hash=c.hash)
        for c in found[:MAX_RECORDED_CHANGES]
    ]


def with_changes(record: CellRecord, recorded: Mapping[str, list[Change]]) -> CellRecord:
    """``record`` with the changes of each code step it holds that ran in this kernel."""
    calls = [
        call.model_copy(update={"changes": variable_changes(recorded[call.id])})
        if call.changes is None and call.id in recorded
        else call
        for call in record.tool_calls
    ]
    return record.model_copy(update={"tool_calls": calls})


class ChangesStore:
    """A RecordStore that adds each code step's changes to the records it saves."""

    def __init__(self, inner: Any, log: UndoLog) -> None:
        self.inner = inner
        self.log = log

    def save(self, record: CellRecord) -> None:
        self.inner.save(with_changes(record, self.log.recorded))

    def keep(self, record: CellRecord) -> None:
        self.inner.keep(record)
