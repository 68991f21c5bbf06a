"""Building the record of a turn from its outcomes: redacted, images as placeholders, bounded in size.

Every record the kernel writes can be read back: it is cut to the same limit ``load_record`` applies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Refused, ToolOutcome, TurnResult, Usage, now_iso
from ..redact import Redactor, redact
from ..text import truncate
from .schema import (
    MAX_RECORD_BYTES,
    CellRecord,
    ContextRecord,
    DecisionRecord,
    EgressRecord,
    ImagePlaceholder,
    RefusalRecord,
    Timings,
    ToolCallRecord,
    UsageRecord,
)

OUTPUT_SUMMARY_CHARS = 2000
RUNNING_SUMMARY_CHARS = 200  # a running record is re-sent as it grows: it carries shorter summaries
SIGNED_BLOCKS = ("thinking", "redacted_thinking")


def usage_record(usage: Usage) -> UsageRecord:
    return UsageRecord(**usage.as_dict())


def tool_call_record(outcome: ToolOutcome) -> ToolCallRecord:
    images = [image_placeholder(b) for b in outcome.content if b.get("type") == "image"]
    redact = Redactor.from_environ().value  # the secrets read once for the whole call
    saved_input = redact(outcome.input_as_run)
    return ToolCallRecord(
        id=outcome.call.id,
        name=outcome.call.name,
        input=saved_input,
        input_redacted=saved_input != outcome.input_as_run,
        decision=DecisionRecord(
            kind=outcome.decision, reason=outcome.reason, at=outcome.decided_at
        ),
        is_error=outcome.is_error,
        output_summary=redact(truncate(outcome.text, OUTPUT_SUMMARY_CHARS)),
        duration_s=round(outcome.duration_s, 4),
        images=[i for i in images if i is not None],
    )


def image_placeholder(block: dict[str, Any]) -> ImagePlaceholder | None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    raw = base64.b64decode(str(source.get("data", "")), validate=False)
    return ImagePlaceholder(
        mime=str(source.get("media_type", "image/png")),
        bytes=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def strip_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every base64 image replaced by a text placeholder (size and hash)."""
    return [_strip_value(m) for m in messages]


# Any: a JSON value of any shape (a message, its content, a block), given back in that shape
def _strip_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_strip_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "image":
        placeholder = image_placeholder(value)
        if placeholder is not None:
            return {
                "type": "text",
                "text": f"[image {placeholder.mime}, {placeholder.bytes:,} bytes, "
                f"sha256 {placeholder.sha256[:16]}]",
            }
    return {k: _strip_value(v) for k, v in value.items()}


@dataclass(frozen=True)
class TurnProgress:
    """What a running turn has spent so far (the finished turn's result carries the totals)."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    model_calls: int = 0


class RecordBuilder:
    """The record of one turn, built as the turn runs: each tool call once, when its outcome arrives.

    A running record holds the prompt, the tool calls so far and what was spent; the finished one adds
    the conversation, the answer and the timings. Everything in either is redacted, images stripped.
    """

    def __init__(
        self,
        *,
        session_id: str,
        cell_id: str | None,
        prompt: str,
        model: str,
        settings: dict[str, Any],
        started_at: str,
        opening: list[dict[str, Any]] | None = None,
        context: ContextRecord | None = None,
    ) -> None:
        self._fields: dict[str, Any] = {
            "session_id": session_id,
            "cell_id": cell_id,
            "prompt": redact(prompt),
            "model": model,
            "settings": redact(settings),
            "context": context,
        }
        self.started_at = started_at
        self._opening = saved_messages(opening or [])  # what a running record shows of the talk
        self._outcomes: list[ToolOutcome] = []
        self.tool_calls: list[ToolCallRecord] = []
        self._running_calls: list[ToolCallRecord] = []  # the same, output summaries shortened
        self.egress: list[EgressRecord] = [
            EgressRecord(kind="prompt", name="prompt", chars=len(prompt)),
            *context_egress(context),
        ]
        self._sent_first = len(self.egress)  # what the first request sent besides tool results

    def add(self, outcome: ToolOutcome) -> None:
        """Record one answered tool call (its record is built now, and only now)."""
        self._outcomes.append(outcome)
        call = tool_call_record(outcome)
        self.tool_calls.append(call)
        self._running_calls.append(_shortened(call, RUNNING_SUMMARY_CHARS))
        sent = egress_of(outcome)
        if sent is not None:
            self.egress.append(sent)

    @property
    def calls(self) -> int:
        return len(self._outcomes)

    def running(self, progress: TurnProgress | None = None) -> CellRecord:
        """The record of the turn so far (status ``running``; output summaries shortened)."""
        record = self._record("running", self._opening, progress or TurnProgress())
        record.tool_calls = list(self._running_calls)
        return bounded(record)

    def finished(self, result: TurnResult, turn_messages: list[dict[str, Any]]) -> CellRecord:
        """The record of the finished turn: its conversation, answer, totals and timings."""
        self._catch_up(result.outcomes)
        spent = TurnProgress(result.usage, result.cost_usd, result.model_calls)
        record = self._record(result.status, saved_messages(turn_messages), spent)
        record.answer = redact(result.final_text)
        if result.stop.status == "error":
            record.error = redact(_error(result))
        if isinstance(result.stop, Refused):
            record.refusal = RefusalRecord(
                category=result.stop.category, explanation=redact(result.stop.explanation or "")
            )
        record.timings = Timings(
            started_at=self.started_at,
            ended_at=now_iso(),
            elapsed_s=round(result.elapsed_s, 3),
            approval_wait_s=round(result.approval_wait_s, 3),
        )
        return bounded(record)

    def _catch_up(self, outcomes: list[ToolOutcome]) -> None:
        """Add the outcomes the turn recorded without announcing them (calls left open at a stop)."""
        known = len(self._outcomes)
        same = len(outcomes) >= known and all(map(operator.is_, outcomes, self._outcomes))
        if not same:  # not the outcomes announced so far: build them all again
            self._outcomes, self.tool_calls = [], []
            self.egress = self.egress[: self._sent_first]
            self._running_calls = []
            known = 0
        for outcome in outcomes[known:]:
            self.add(outcome)

    def _record(
        self, status: Any, messages: list[dict[str, Any]], spent: TurnProgress
    ) -> CellRecord:
        return CellRecord(
            **self._fields,
            status=status,
            messages=messages,
            tool_calls=list(self.tool_calls),
            egress=list(self.egress),
            timings=Timings(started_at=self.started_at),
            usage=usage_record(spent.usage),
            cost_usd=None if spent.cost_usd is None else round(spent.cost_usd, 6),
            model_calls=spent.model_calls,
        )


def build_record(
    *,
    session_id: str,
    cell_id: str | None,
    prompt: str,
    model: str,
    settings: dict[str, Any],
    started_at: str,
    result: TurnResult | None,
    turn_messages: list[dict[str, Any]],
    outcomes: list[ToolOutcome],
    progress: TurnProgress | None = None,
) -> CellRecord:
    """The record of a turn, running (``result`` None) or finished, built in one go."""
    builder = RecordBuilder(
        session_id=session_id, cell_id=cell_id, prompt=prompt, model=model, settings=settings,
        started_at=started_at, opening=turn_messages if result is None else None,
    )  # fmt: skip
    for outcome in outcomes:
        builder.add(outcome)
    if result is None:
        return builder.running(progress)
    return builder.finished(result, turn_messages)


def unsigned_json(record: CellRecord) -> dict[str, Any]:
    """A running record as sent while the turn runs: stamped and digested, so it loads, but unsigned.

    Signing is for the finished record: a running one is never replayed, and is replaced at the end.
    """
    stamped = record.model_copy(update={"updated_at": now_iso(), "digest": "", "signature": ""})
    digested = stamped.model_copy(update={"digest": stamped.computed_digest()})
    return digested.model_dump(mode="json")


def _error(result: TurnResult) -> str:
    return str(getattr(result.stop, "message", result.status))


def saved_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as saved: images as placeholders, secrets redacted, and signed blocks never altered.

    A thinking block is signed by the API and must go back byte-identical, so one that holds a secret is
    left out of the record rather than changed (the API allows omitting thinking of earlier turns).
    """
    redact = Redactor.from_environ().value  # the secrets read once for all the messages
    saved = []
    for message in strip_images(messages):
        content = message.get("content")
        if isinstance(content, list):
            kept = [_saved_block(b, redact) for b in content]
            message = {**message, "content": [b for b in kept if b is not None]}
            message = {k: redact(v) if k != "content" else v for k, v in message.items()}
        else:
            message = redact(message)
        saved.append(message)
    return saved


def _saved_block(block: Any, redact: Callable[[Any], Any]) -> object:  # None: left out
    if isinstance(block, dict) and block.get("type") in SIGNED_BLOCKS:
        return block if redact(block) == block else None
    return redact(block)


def context_egress(context: ContextRecord | None) -> list[EgressRecord]:
    """What a turn's rules files and attachments sent to the model."""
    if context is None:
        return []
    sent = [EgressRecord(kind="rules", name=r.path[-200:], chars=r.chars)
            for r in context.rules if r.chars]  # fmt: skip
    kinds = {"variable": "variable", "cell": "cell"}
    for item in context.attachments:
        kind: Any = kinds.get(item.kind, "file")
        sent.append(EgressRecord(kind=kind, name=item.name[-200:],
                                 chars=item.chars + item.image_bytes))  # fmt: skip
    return sent


_EGRESS_KIND = {
    "list_variables": "variables",
    "inspect_variable": "variable",
    "run_code": "output",
    "notebook_history": "history",
    "read_notebook": "cell",  # the notebook's cells and their outputs, as the page shows them
}


def egress(prompt: str, outcomes: list[ToolOutcome]) -> list[EgressRecord]:
    """What left the kernel for the model: the prompt and each tool result that was sent."""
    sent = [EgressRecord(kind="prompt", name="prompt", chars=len(prompt))]
    return sent + [e for e in map(egress_of, outcomes) if e is not None]


def egress_of(outcome: ToolOutcome) -> EgressRecord | None:
    """What one tool call sent to the model (None: it was denied, nothing of the kernel was sent)."""
    if outcome.decision == "denied":
        return None
    kind = _EGRESS_KIND.get(outcome.call.name, "tool")
    name = outcome.call.name
    if kind == "variable":
        name = str(outcome.input_as_run.get("name", ""))[:200]
    return EgressRecord(kind=kind, name=name, chars=len(outcome.text))  # type: ignore[arg-type]


# Long texts are cut in this order until the record fits; code steps are never cut (replay runs them).
_BODY_LIMITS = (20_000, 4_000, 1_000)


def bounded(record: CellRecord, limit: int = MAX_RECORD_BYTES) -> CellRecord:
    """``record`` cut to fit ``limit`` bytes of JSON, each cut marked; the same limit loading applies."""
    if _fits(record, limit):
        return record
    for chars in _BODY_LIMITS:
        record = record.model_copy(
            update={
                "answer": truncate(record.answer, chars * 5),
                "prompt": truncate(record.prompt, chars * 5),
                "error": None if record.error is None else truncate(record.error, chars),
                "messages": [_cut_message(m, chars) for m in record.messages],
                "tool_calls": [_cut_call(c, chars) for c in record.tool_calls],
            }
        )
        if _size(record) <= limit:
            return record
    # Still too large: the conversation is dropped (later cells will not see this turn).
    record = record.model_copy(update={"messages": []})
    if _size(record) > limit:
        raise ValueError(f"the turn's record does not fit in {limit:,} bytes even when cut")
    return record


def _fits(record: CellRecord, limit: int) -> bool:
    # pydantic's compact JSON is fast to write; escapes and separators make another writer's text
    # at most three times longer, so a record that small fits without the exact count.
    if 3 * len(record.model_dump_json().encode("utf-8")) + 400 <= limit:
        return True
    return _size(record) <= limit


def _size(record: CellRecord) -> int:
    return len(json.dumps(record.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")) + 400


def _cut_message(message: dict[str, Any], chars: int) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": truncate(content, chars)}
    if not isinstance(content, list):
        return message
    return {**message, "content": [_cut_block(b, chars) for b in content if _keep_when_cut(b)]}


def _keep_when_cut(block: Any) -> bool:
    return not (isinstance(block, dict) and block.get("type") in SIGNED_BLOCKS)


def _cut_block(block: Any, chars: int) -> object:
    if not isinstance(block, dict):
        return block
    if isinstance(block.get("text"), str):
        return {**block, "text": truncate(block["text"], chars)}
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        return {**block, "content": [_cut_block(b, chars) for b in block["content"]]}
    if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
        return {**block, "content": truncate(block["content"], chars)}
    return block


def _shortened(call: ToolCallRecord, chars: int) -> ToolCallRecord:
    if len(call.output_summary) <= chars:
        return call
    return call.model_copy(update={"output_summary": truncate(call.output_summary, chars)})


def _cut_call(call: ToolCallRecord, chars: int) -> ToolCallRecord:
    return call.model_copy(
        update={"output_summary": truncate(call.output_summary, min(chars, 2000))}
    )
