"""CellRecord: the versioned, validated record of one agent cell's turn, saved in cell metadata.

Loading validates the record and its digest; a record that fails either is refused with a clear message and
nothing is run from it. Secrets are redacted and image bytes replaced by placeholders before saving.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import RecordError
from ..messages import ToolOutcome, TurnResult, Usage, now_iso
from ..redact import redact

SCHEMA_VERSION = 1
METADATA_KEY = "qloop"
MIME_TYPE = "application/vnd.qloop.transcript+json"
MAX_RECORD_BYTES = 5_000_000
REPLAYABLE_DECISIONS = ("approved", "edited", "auto", "always")

Status = Literal[
    "running",
    "completed",
    "max_turns",
    "budget_exceeded",
    "timeout",
    "interrupted",
    "refused",
    "error",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecisionRecord(_Strict):
    kind: Literal["approved", "edited", "denied", "auto", "always", "readonly"]
    reason: str | None = None
    at: str = ""


class ImagePlaceholder(_Strict):
    placeholder: Literal[True] = True
    mime: str
    bytes: int = Field(ge=0)
    sha256: str


class ToolCallRecord(_Strict):
    id: str
    name: str
    input: dict[str, Any]
    decision: DecisionRecord
    is_error: bool = False
    output_summary: str = ""
    duration_s: float = 0.0
    images: list[ImagePlaceholder] = Field(default_factory=list)


class UsageRecord(_Strict):
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cache_read_input_tokens: int = Field(0, ge=0)
    cache_creation_input_tokens: int = Field(0, ge=0)


class Timings(_Strict):
    started_at: str
    ended_at: str | None = None
    elapsed_s: float = 0.0
    approval_wait_s: float = 0.0


class CellRecord(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: str
    cell_id: str | None = None
    prompt: str
    model: str
    settings: dict[str, Any] = Field(default_factory=dict)
    status: Status
    error: str | None = None
    answer: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: UsageRecord = Field(default_factory=UsageRecord)
    cost_usd: float | None = None
    model_calls: int = 0
    timings: Timings
    updated_at: str = ""
    digest: str = ""

    @field_validator("messages")
    @classmethod
    def _messages_shape(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, message in enumerate(value):
            if message.get("role") not in ("user", "assistant"):
                raise ValueError(f"message {i} has no valid role")
            if not isinstance(message.get("content"), str | list):
                raise ValueError(f"message {i} has no content list")
        return value

    def replay_steps(self) -> list[ToolCallRecord]:
        """The code steps that ran successfully with the user's approval, in order."""
        return [
            call
            for call in self.tool_calls
            if call.name == "run_code"
            and call.decision.kind in REPLAYABLE_DECISIONS
            and not call.is_error
            and isinstance(call.input.get("code"), str)
        ]

    def computed_digest(self) -> str:
        body = _canonical(self.model_dump(mode="json", exclude={"digest"}))
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def sealed(self) -> CellRecord:
        """A copy stamped with ``updated_at`` and its digest, ready to save."""
        stamped = self.model_copy(update={"updated_at": now_iso(), "digest": ""})
        return stamped.model_copy(update={"digest": stamped.computed_digest()})

    def to_json(self) -> dict[str, Any]:
        return self.sealed().model_dump(mode="json")


def _canonical(value: Any) -> Any:
    """Whole-number floats as ints: a browser saves 1.0 as 1, and the digest must survive that."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def load_record(data: object) -> CellRecord:
    """Validate saved metadata; raise RecordError with a clear message if it cannot be trusted."""
    if not isinstance(data, dict):
        raise RecordError(f"the saved qloop record is not an object (got {type(data).__name__})")
    size = len(json.dumps(data, default=str))
    if size > MAX_RECORD_BYTES:
        raise RecordError(f"the saved qloop record is too large ({size:,} bytes)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(
            f"the saved qloop record has schema_version {version!r}; this version of qloop-kernel "
            f"reads version {SCHEMA_VERSION}. Re-run the cell with --fresh to make a new record"
        )
    try:
        record = CellRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RecordError(
            f"the saved qloop record is invalid ({exc.error_count()} problem(s); first: {where}: "
            f"{first['msg']}). Re-run the cell with --fresh to make a new record"
        ) from None
    if record.digest != record.computed_digest():
        raise RecordError(
            "the saved qloop record was changed after it was written (digest mismatch); nothing from it "
            "runs. Re-run the cell with --fresh to make a new record"
        )
    return record


def usage_record(usage: Usage) -> UsageRecord:
    return UsageRecord(**usage.as_dict())


def tool_call_record(outcome: ToolOutcome) -> ToolCallRecord:
    images = [image_placeholder(b) for b in outcome.content if b.get("type") == "image"]
    return ToolCallRecord(
        id=outcome.call.id,
        name=outcome.call.name,
        input=redact(outcome.input_as_run),
        decision=DecisionRecord(
            kind=outcome.decision, reason=outcome.reason, at=outcome.decided_at
        ),
        is_error=outcome.is_error,
        output_summary=redact(_summary(outcome.text)),
        duration_s=round(outcome.duration_s, 4),
        images=[i for i in images if i is not None],
    )


def _summary(text: str, limit: int = 2000) -> str:
    return (
        text
        if len(text) <= limit
        else text[:limit] + f"\n[... {len(text) - limit:,} more characters]"
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
    """The record of a turn, running (``result`` None) or finished. Redacted, images stripped."""
    record = CellRecord(
        session_id=session_id,
        cell_id=cell_id,
        prompt=redact(prompt),
        model=model,
        settings=redact(settings),
        status="running" if result is None else result.status,
        error=None if result is None or result.stop.status != "error" else redact(_error(result)),
        answer=redact(result.final_text) if result else "",
        messages=redact(strip_images(turn_messages)),
        tool_calls=[tool_call_record(o) for o in outcomes],
        timings=Timings(started_at=started_at),
    )
    spent = progress or TurnProgress()
    if result is not None:
        spent = TurnProgress(result.usage, result.cost_usd, result.model_calls)
    record.usage = usage_record(spent.usage)
    record.cost_usd = None if spent.cost_usd is None else round(spent.cost_usd, 6)
    record.model_calls = spent.model_calls
    if result is not None:
        record.timings = Timings(
            started_at=started_at,
            ended_at=now_iso(),
            elapsed_s=round(result.elapsed_s, 3),
            approval_wait_s=round(result.approval_wait_s, 3),
        )
    return record


def _error(result: TurnResult) -> str:
    return str(getattr(result.stop, "message", result.status))
