"""Message parts, model events, usage, and the typed outcome of a turn.

Conversation messages are kept in the Messages API's own JSON shape (``{"role": ..., "content": [...]}``)
so they can be sent, saved and replayed without translation. Everything else here is a small typed value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypeAlias

from .errors import ModelError as ModelError  # re-exported: the loop's model-failure type
from .errors import ModelTimeout as ModelTimeout

Message: TypeAlias = dict[str, Any]
Block: TypeAlias = dict[str, Any]

TurnStatus: TypeAlias = Literal[
    "completed", "max_turns", "budget_exceeded", "timeout", "interrupted", "refused", "error"
]


@dataclass(frozen=True)
class Usage:
    """Token counters as the Messages API reports them (``input_tokens`` excludes cached tokens)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
        )

    @property
    def prompt_tokens(self) -> int:
        """All input tokens of a request, cached or not."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
        }


# --- Events a model client forwards while a response streams -----------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ThinkingDelta:
    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True)
class ToolCallReady:
    """A tool_use block whose input has finished streaming."""

    id: str
    name: str
    input: dict[str, Any]
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class UsageUpdate:
    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True)
class RetryNotice:
    """The client is about to retry a transient failure."""

    attempt: int
    delay_s: float
    reason: str
    kind: Literal["retry"] = "retry"


ModelEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallReady | UsageUpdate | RetryNotice


@dataclass(frozen=True)
class ModelRequest:
    """Everything one Messages API call needs, already in API shape."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    system: str
    max_tokens: int
    deadline: float | None = None  # time.monotonic() by which the call must have finished


@dataclass(frozen=True)
class ModelResponse:
    content: list[Block]
    stop_reason: str | None
    usage: Usage
    model: str
    stop_details: dict[str, Any] | None = None  # e.g. a refusal's category and explanation


# --- Tool calls ----------------------------------------------------------------------------------

DecisionKind: TypeAlias = Literal["approved", "edited", "denied", "auto", "always", "readonly"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass
class ToolOutcome:
    """What running one tool call produced: the API ``tool_result`` content plus bookkeeping."""

    call: ToolCall
    content: list[Block]
    is_error: bool
    decision: DecisionKind
    input_as_run: dict[str, Any]
    reason: str | None = None
    duration_s: float = 0.0
    approval_wait_s: float = 0.0
    decided_at: str = ""
    fatal: str | None = None  # the step broke a rule that ends the turn (see notebook.guard)
    risk: str | None = None  # the call's risk class as the permission pipeline saw it
    # Who decided (Permission.who: policy, provenance, grant, admin, person); None: nobody did (an
    # input that was not valid, an unknown tool)
    decided_by: str | None = None

    def result_block(self) -> Block:
        content: str | list[Block] = self.content
        if len(self.content) == 1 and self.content[0].keys() == {"type", "text"}:
            content = self.content[0]["text"]  # plain text: the lighter form of the same content
        block: Block = {"type": "tool_result", "tool_use_id": self.call.id, "content": content}
        if self.is_error:
            block["is_error"] = True
        return block

    @property
    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")


# --- Turn outcome (one closed, tagged union of stop reasons) -------------------------------------


@dataclass(frozen=True)
class Completed:
    status: Literal["completed"] = "completed"


@dataclass(frozen=True)
class MaxTurns:
    limit: int
    status: Literal["max_turns"] = "max_turns"


@dataclass(frozen=True)
class BudgetExceeded:
    what: Literal["tokens", "cost"]
    spent: float
    limit: float
    status: Literal["budget_exceeded"] = "budget_exceeded"
    cap: str = ""  # an admin's spend cap: the line naming it (spend.py); "" for the cell's budget


@dataclass(frozen=True)
class TimedOut:
    seconds: float
    status: Literal["timeout"] = "timeout"


@dataclass(frozen=True)
class Interrupted:
    by: Literal["stop", "keyboard"]
    status: Literal["interrupted"] = "interrupted"


@dataclass(frozen=True)
class Refused:
    """The model declined; ``explanation`` (meant for the user) and ``category`` come from the
    API's ``stop_details`` when it sends them."""

    category: str | None = None
    explanation: str | None = None
    status: Literal["refused"] = "refused"


@dataclass(frozen=True)
class Failed:
    message: str
    status: Literal["error"] = "error"


StopReason: TypeAlias = (
    Completed | MaxTurns | BudgetExceeded | TimedOut | Interrupted | Refused | Failed
)


def _cost_stop(spent: float, limit: float, cap: str) -> str:
    if cap:  # an admin's spend cap, named with its setting and file (spend.py)
        return f"stopped: {cap}"
    return f"stopped: cost budget reached (${spent:.4f} of ${limit:.4f}, --max-cost)"


def describe_stop(stop: StopReason) -> str:
    """One line for the user about why a turn ended."""
    match stop:
        case Completed():
            return "completed"
        case MaxTurns(limit=limit):
            return f"stopped: reached the limit of {limit} model calls (--max-turns)"
        case BudgetExceeded(what="tokens", spent=spent, limit=limit):
            return (
                f"stopped: token budget reached ({spent:,.0f} of {limit:,.0f} tokens, --max-tokens)"
            )
        case BudgetExceeded(spent=spent, limit=limit, cap=cap):
            return _cost_stop(spent, limit, cap)
        case TimedOut(seconds=seconds):
            return f"stopped: the turn ran past its {seconds:g} s time limit (--timeout)"
        case Interrupted(by="stop"):
            return "interrupted: stopped with the Stop button"
        case Interrupted():
            return "interrupted by the kernel interrupt"
        case Refused(category=category, explanation=explanation):
            kind = f"refusal, {category}" if category else "refusal"
            why = f": {' '.join(explanation.split())}" if explanation else ""
            return (
                f"the model declined this request (stop reason: {kind}){why}; no tool call was "
                "run, and the request was left out of the conversation"
            )
        case Failed(message=message):
            return f"error: {message}"
    raise AssertionError(stop)  # pragma: no cover - the union is closed


@dataclass
class TurnResult:
    stop: StopReason
    messages: list[Message]
    final_text: str
    usage: Usage
    cost_usd: float | None
    model_calls: int
    elapsed_s: float
    approval_wait_s: float
    outcomes: list[ToolOutcome] = field(default_factory=list)

    @property
    def status(self) -> TurnStatus:
        return self.stop.status


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds (records and decisions use this one clock)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# --- Outgoing messages ----------------------------------------------------------------------------


def api_ready(messages: list[Message]) -> list[Message]:
    """The conversation as the Messages API accepts it back, without changing what it sent.

    Drops the empty text blocks the API itself sends (before tool_use, on refusals; it refuses them
    back), and a message left with no block; removes stray ``cache_control`` markers so the caller
    can set its own breakpoints; sends a tool_use input that is not an object as ``{}`` (its
    tool_result says what was wrong). Every other block, thinking included, is passed through
    as it is: copies are made only of what changes.
    """
    ready: list[Message] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            if content:
                ready.append(message)
            continue
        blocks = [_ready_block(b) for b in content or [] if not _is_empty_text(b)]
        if blocks:
            ready.append({**message, "content": blocks} if blocks != content else message)
    return ready


def _is_empty_text(block: Block) -> bool:
    return block.get("type") == "text" and not block.get("text")


def _ready_block(block: Block) -> Block:
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
        block = {**block, "input": {}}
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        inner = [_ready_block(b) for b in block["content"] if not _is_empty_text(b)]
        if inner != block["content"]:
            block = {**block, "content": inner}
    return block
