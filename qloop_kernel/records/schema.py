"""CellRecord: the versioned, validated record of one agent cell's turn, saved in cell metadata.

Loading validates the record and its digest; a record that fails either is refused with a clear message and
nothing is run from it. The signature tells the user's own records from received ones (``signing``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import RecordError
from ..messages import now_iso
from ..text import counted
from . import signing

SCHEMA_VERSION: Final = 2
READABLE_VERSIONS = (1, 2)  # version 1: the same fields, never signed
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


class VariableChange(_Strict):
    """What one code step did to one variable: a one-line summary, never the value itself."""

    name: str
    kind: Literal["created", "changed", "deleted"]
    summary: str  # "DataFrame 600×5 → 598×5, column date str → datetime64[us]"
    hash: str = ""  # of a bounded sample of the value after the step ("" when not cheap)


class ToolCallRecord(_Strict):
    id: str
    name: str
    input: dict[str, Any]
    input_redacted: bool = False  # a secret was cut from the input: the saved input is not what ran
    decision: DecisionRecord
    is_error: bool = False
    output_summary: str = ""
    duration_s: float = 0.0
    images: list[ImagePlaceholder] = Field(default_factory=list)
    # What a code step created, changed and deleted; None: not recorded (records made before).
    changes: list[VariableChange] | None = None


def shown_code(call: ToolCallRecord) -> str | None:
    """The code a step's card showed: a code step's ``code``, a cell proposal's ``source``; None
    for a call whose input is not code (shown as JSON). Every view of a record shows this."""
    field = "source" if call.name in ("add_cell", "edit_cell") else "code"
    value = call.input.get(field)
    return value if isinstance(value, str) else None


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


class EgressRecord(_Strict):
    """Something that left the kernel for the model during the turn."""

    kind: Literal[
        "prompt", "variables", "variable", "output", "history", "tool", "rules", "file", "cell"
    ]
    name: str
    chars: int = Field(0, ge=0)


class RefusalRecord(_Strict):
    category: str | None = None
    explanation: str = ""


class VariablePrint(_Strict):
    """What a variable was: type, shape, dtypes and a content hash of a bounded sample."""

    name: str
    type: str
    shape: str = ""
    dtypes: str = ""
    hash: str = ""  # empty when the value cannot be hashed cheaply


class CellPrint(_Strict):
    """A notebook cell the turn read (it defined a variable the turn used), as it was run."""

    cell_id: str
    sha256: str  # of the cell's source
    defines: list[str] = Field(default_factory=list)


class SourcePrint(_Strict):
    """A rules file or an attached file or cell the turn was sent: where, and the SHA-256 of it."""

    kind: Literal["rules", "file", "cell"]
    path: str  # a file's path, a cell's id
    sha256: str


class Fingerprint(_Strict):
    """What the turn read and changed, and with which Python and libraries: drift is told from it."""

    python: str = ""
    libraries: dict[str, str] = Field(default_factory=dict)  # top-level module -> version
    read: list[VariablePrint] = Field(default_factory=list)  # as the turn first read them
    changed: list[VariablePrint] = Field(default_factory=list)  # as the turn left them
    cells: list[CellPrint] = Field(default_factory=list)
    sources: list[SourcePrint] = Field(default_factory=list)  # rules and attachments sent


class RulesRecord(_Strict):
    """A rules file found for the turn: whose, its hash and size, and whether it was sent."""

    path: str
    origin: Literal["user", "project"]
    sha256: str = ""
    chars: int = Field(0, ge=0)  # characters sent (0 when not used)
    status: str  # used, cut, unapproved, changed, declined, off, unreadable, no room


class AttachmentRecord(_Strict):
    """An item of ``--with``: its kind, name, hash and size as sent."""

    kind: Literal["file", "table", "image", "variable", "cell"]
    name: str
    sha256: str = ""
    chars: int = Field(0, ge=0)
    image_bytes: int = Field(0, ge=0)
    note: str = ""


class ToolSize(_Strict):
    name: str
    chars: int = Field(0, ge=0)  # of its definition's JSON as sent


class ContextRecord(_Strict):
    """What the turn's first request held besides the prompt, and its estimated size and cost."""

    system_chars: int = Field(0, ge=0)  # the system prompt with the rules
    rules: list[RulesRecord] = Field(default_factory=list)
    attachments: list[AttachmentRecord] = Field(default_factory=list)
    tools: list[ToolSize] = Field(default_factory=list)
    history_messages: int = Field(0, ge=0)  # earlier messages of the conversation sent
    estimated_tokens: int = Field(0, ge=0)  # of the first request, prompt included
    estimated_cost_usd: float | None = None  # of its input, uncached; None: no known price
    estimate_method: str = ""


class PlanRecord(_Strict):
    """A ``--run-plan`` turn's plan: the plan proposed (the ``--plan`` turn's steps, as the session
    kept them; "" when it kept none) and the plan run (as the user edited it); ``task``: its task."""

    task: str = ""
    proposed: str = ""
    run: str

    @property
    def edited(self) -> bool:
        return self.run != self.proposed


# Fields added after version 2 was first written: left out of the digest while they hold their
# default, so that records written before them still verify. ``history`` is never digested: each
# entry is a whole record that verifies on its own.
_LATER_FIELDS = ("metadata_unseen", "fingerprint", "context", "plan")
_NEVER_DIGESTED = ("digest", "signature", "history")


class CellRecord(_Strict):
    schema_version: Literal[1, 2] = SCHEMA_VERSION
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
    egress: list[EgressRecord] = Field(default_factory=list)
    refusal: RefusalRecord | None = None
    updated_at: str = ""
    # The run could not see the cell's saved record (its client sent no cell metadata).
    metadata_unseen: bool = False
    fingerprint: Fingerprint | None = None
    context: ContextRecord | None = None  # what the first request held besides the prompt
    plan: PlanRecord | None = None  # a --run-plan turn: the plan proposed and the plan run
    history: list[dict[str, Any]] = Field(default_factory=list)  # earlier records, newest first
    digest: str = ""
    signature: str = ""

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

    @property
    def code_steps(self) -> list[ToolCallRecord]:
        return [call for call in self.tool_calls if call.name == "run_code"]

    @property
    def replayable(self) -> bool:
        """Completed, and not a turn whose code steps were all denied or failed."""
        return self.status == "completed" and (not self.code_steps or bool(self.replay_steps()))

    def _body(self) -> bytes:
        exclude: Any = set(_NEVER_DIGESTED)
        exclude |= {name for name in _LATER_FIELDS if not getattr(self, name)}
        # A step's changes are digested only where recorded: records made before them verify.
        unrecorded = {i: {"changes"} for i, c in enumerate(self.tool_calls) if c.changes is None}
        if self.schema_version == 1:  # what version 1 digested: the fields it had
            exclude = {**dict.fromkeys(exclude | {"egress", "refusal"}, True),
                       "tool_calls": {"__all__": {"input_redacted", "changes"}}}  # fmt: skip
        elif unrecorded:
            exclude = {**dict.fromkeys(exclude, True), "tool_calls": unrecorded}
        body = _canonical(self.model_dump(mode="json", exclude=exclude))
        if isinstance(body.get("fingerprint"), dict) and not body["fingerprint"].get("sources"):
            body["fingerprint"].pop("sources", None)  # added later: earlier records verify
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8")

    def computed_digest(self) -> str:
        return "sha256:" + hashlib.sha256(self._body()).hexdigest()

    def is_own(self) -> bool:
        """Whether this user's kernel wrote the record (its signature verifies with the user's secret)."""
        return signing.verify(self.signature, self._body())

    def sealed(self) -> CellRecord:
        """A copy stamped with ``updated_at``, its digest and this user's signature, ready to save."""
        stamped = self.model_copy(update={"updated_at": now_iso(), "digest": "", "signature": ""})
        body = stamped._body()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        return stamped.model_copy(update={"digest": digest, "signature": signing.sign(body)})

    def to_json(self) -> dict[str, Any]:
        return self.sealed().model_dump(mode="json")


def _canonical(value: Any) -> Any:  # Any: a JSON value of any shape, returned in that shape
    """Whole-number floats as ints: a browser saves 1.0 as 1, and the digest must survive that.

    Changes ``value``'s containers in place: it is a dump made for the digest, never shared.
    """
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    pending = [value] if isinstance(value, dict | list) else []
    while pending:  # one walk, no copies: a record is mostly strings
        container = pending.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if isinstance(item, float):
                if item.is_integer():
                    container[key] = int(item)  # an existing key: the dict keeps its size
            elif isinstance(item, dict | list):
                pending.append(item)
    return value


def mirrored_record(cell: Any) -> dict[str, Any] | None:
    """The newest record mirrored in a cell's outputs (its ``MIME_TYPE`` output), if any: a
    notebook saved by a client that keeps outputs but not the cell's metadata still holds it."""
    for output in reversed(cell.get("outputs", [])):
        data = output.get("data") or {}
        if MIME_TYPE in data and isinstance(data[MIME_TYPE], dict):
            return dict(data[MIME_TYPE])
    return None


def load_record(data: object) -> CellRecord:
    """Validate saved metadata; raise RecordError with a clear message if it cannot be trusted."""
    if not isinstance(data, dict):
        raise RecordError(f"the saved qloop record is not an object (got {type(data).__name__})")
    size = len(json.dumps(data, default=str))
    if size > MAX_RECORD_BYTES:
        raise RecordError(f"the saved qloop record is too large ({size:,} bytes)")
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
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
            f"the saved qloop record is invalid ({counted(exc.error_count(), 'problem')}; first: {where}: "
            f"{first['msg']}). Re-run the cell with --fresh to make a new record"
        ) from None
    if record.digest != record.computed_digest():
        raise RecordError(
            "the saved qloop record was changed after it was written (digest mismatch); nothing from it "
            "runs. Re-run the cell with --fresh to make a new record"
        )
    return record
