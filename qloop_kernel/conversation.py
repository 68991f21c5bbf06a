"""ConversationManager: the durable state of an agent session.

Owns the session id, the shared conversation, user settings, budget accounting across turns and the
per-cell records. It is the only place that knows about persistence (through a ``RecordStore``); it never
calls the model itself, it hands each turn to a QueryLoop.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .context import ContextPolicy
from .contracts import CancelToken, ModelClient, TurnObserver
from .loop import QueryLoop
from .messages import (
    Block,
    Message,
    ModelEvent,
    ModelResponse,
    ToolCall,
    ToolOutcome,
    TurnResult,
    Usage,
    now_iso,
)
from .records import CellRecord, RecordBuilder, TurnProgress
from .redact import redact
from .settings import Settings
from .spend import spend_guard
from .telemetry import turn_trace
from .tools.runtime import ToolRuntime
from .turn_context import TurnContext, context_record, estimate_request

SYSTEM_PROMPT = """\
You are a data-science assistant working inside a live Jupyter kernel, next to the user. The user's \
variables (data frames, arrays, models) live in the kernel namespace. Use the tools: list_variables and \
inspect_variable to look before you act, run_code to run Python in the user's namespace (its variables \
persist; plots show inline), notebook_history to see what the user ran, and, where they are offered, \
read_notebook to read the notebook's cells, add_cell / edit_cell to propose cells and run_cell to re-run \
one: put work the user will keep (a cleaning step, a plot, an explanation) into proposed cells, and use \
run_code to look and check. Prefer small, reviewable code steps; every step that changes something is shown to the user, who may edit or deny it. When a call is \
denied, respect the reason. Never print secrets such as API keys. Finish with a short answer in Markdown \
that says what you did and what you found."""


def answers_every_tool_call(messages: list[Message]) -> bool:
    """Whether each assistant tool_use is answered by a tool_result in the next message."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        asked = {
            b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        if not asked:
            continue
        reply = messages[index + 1].get("content") if index + 1 < len(messages) else None
        answered = {
            b.get("tool_use_id")
            for b in (reply if isinstance(reply, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        if not asked <= answered:
            return False
    return True


_DROPPED_ON_ADOPT = ("thinking", "redacted_thinking")


def adoptable(messages: list[Message]) -> list[Message] | None:
    """Saved messages made fit to send again, or None if they cannot form a valid conversation."""
    cleaned: list[Message] = []
    for message in redact(messages):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return None
        blocks = [_without_cache_marks(b) for b in content if _kept_on_adopt(b)]
        if not blocks:
            return None
        cleaned.append({"role": message.get("role"), "content": blocks})
    roles = [m["role"] for m in cleaned]
    alternating = all(a != b for a, b in zip(roles, roles[1:], strict=False))
    if not cleaned or roles[0] != "user" or roles[-1] != "assistant" or not alternating:
        return None
    return cleaned if answers_every_tool_call(cleaned) else None


def _kept_on_adopt(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in _DROPPED_ON_ADOPT:
        return False
    return not (block.get("type") == "text" and not str(block.get("text", "")).strip())


def _without_cache_marks(block: Block) -> Block:
    cleaned = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(cleaned.get("content"), list):
        cleaned["content"] = [
            _without_cache_marks(b) if isinstance(b, dict) else b for b in cleaned["content"]
        ]
    return cleaned


class RecordStore(Protocol):
    """Where records go: the notebook (comm + output mirror) in a kernel, a list in tests."""

    def save(self, record: CellRecord) -> None:
        """Write a record of this kernel's turn: a finished one sealed (stamped, digested, signed),
        a running one (status ``running``, saved as the turn grows) stamped and digested only."""

    def keep(self, record: CellRecord) -> None:
        """Write a saved record unchanged (a replay shows it again; digest and signature kept)."""


@dataclass
class SessionTotals:
    turns: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cost_known: bool = True


SAVE_EVERY_S = 5.0  # a running turn's record is saved at most this often, and once at the end


class _SavingObserver(TurnObserver):
    """Forwards to the display observer, builds the record as the turn grows and saves it, throttled.

    Each answered tool call is added to the record once. The running record is saved when the turn
    starts and then at most every ``every_s`` seconds, only when something changed; a crash loses
    at most that much. The finished record is saved by the manager.
    """

    def __init__(
        self,
        inner: TurnObserver,
        builder: RecordBuilder,
        save: Callable[[CellRecord], None],
        *,
        every_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.inner = inner
        self.builder = builder
        self.save = save
        self.every_s = every_s
        self.clock = clock
        self.progress = TurnProgress()
        self._saved_at = -math.inf
        self._changed = True

    def save_running(self, *, force: bool = False) -> None:
        now = self.clock()
        if self._changed and (force or now - self._saved_at >= self.every_s):
            self.save(self.builder.running(self.progress))
            self._saved_at, self._changed = now, False

    def on_event(self, event: ModelEvent) -> None:
        self.inner.on_event(event)

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self.progress = TurnProgress(usage, cost_usd, self.progress.model_calls + 1)
        self._changed = True
        self.inner.on_response(response, usage, cost_usd)
        self.save_running()

    def on_tool_start(self, call: ToolCall) -> None:
        self.inner.on_tool_start(call)

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.builder.add(outcome)
        self._changed = True
        self.inner.on_tool_end(outcome)
        self.save_running()


class ConversationManager:
    """One agent session in a kernel: the shared conversation and its records."""

    def __init__(
        self,
        *,
        settings: Settings | None = None,
        context_policy: ContextPolicy | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        save_every_s: float = SAVE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or Settings()
        self.context_policy = context_policy or ContextPolicy()
        self.system_prompt = system_prompt
        self.save_every_s = save_every_s  # how often a running turn's record is saved
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """Start a fresh conversation (a new session id); settings are kept (grants are the
        kernel agent's: ``%agent reset`` clears them)."""
        self.session_id = uuid.uuid4().hex[:12]
        self.messages: list[Message] = []
        self.records: dict[str, CellRecord] = {}
        self.totals = SessionTotals()

    def run_turn(
        self,
        prompt: str,
        *,
        model: ModelClient,
        runtime: ToolRuntime,
        settings: Settings,
        cell_id: str | None = None,
        observer: TurnObserver | None = None,
        cancel: CancelToken | None = None,
        store: RecordStore | None = None,
        context: TurnContext | None = None,
    ) -> tuple[TurnResult, CellRecord]:
        """Run one turn of the shared conversation and save its record to ``store``.

        ``context``: the rules files (their text goes after the system prompt, in its cached block)
        and the attached items (before the prompt, in the turn's first message).
        """
        price = settings.resolved_price(model.model)
        history = self.context_policy.apply(self.messages)
        context = context or TurnContext()
        system = context.system(self.system_prompt)
        user = context.first_message(prompt)
        estimate = estimate_request(
            model.model, system=system, tools=runtime.schemas(), messages=[*history, user],
            max_tokens=settings.max_output_tokens, price=price,
        )  # fmt: skip
        builder = RecordBuilder(
            session_id=self.session_id, cell_id=cell_id, prompt=prompt, model=model.model,
            settings=settings.model_dump(mode="json"), started_at=now_iso(), opening=[user],
            context=context_record(context, estimate, len(history)),
        )  # fmt: skip
        trace = turn_trace(self.session_id, model=model.model, provider=settings.provider,
                           cell_id=cell_id, prompt=prompt)  # fmt: skip
        saving = _SavingObserver(
            trace.observing(observer or TurnObserver()), builder, lambda r: self._save(r, store),
            every_s=self.save_every_s, clock=self.clock,
        )  # fmt: skip
        saving.save_running(force=True)
        loop = QueryLoop(
            trace.traced(model, price), runtime, system=system, limits=settings.limits(),
            price=price, observer=saving, cancel=cancel, spend=spend_guard(self.session_id),
        )  # fmt: skip
        with trace:
            result = loop.run([*history, user])
            trace.finished(result)
        self.messages.extend(result.messages[len(history) :])
        self._account(result)
        record = builder.finished(result, result.messages[len(history) :])
        self._save(record, store)
        return result, record

    def adopt(self, record: CellRecord) -> bool:
        """Take a replayed record's messages into the shared conversation (no model call made).

        Adopting is an approved act (the replay card says so). The messages are cleaned for the API:
        redacted again (the record may come from a kernel with other secrets), without cache markers,
        thinking blocks (allowed to be left out of earlier turns) or empty text. A record whose messages
        would make the next request fail is left out, and False says so; one with none (outside
        agents' calls, replayed without a model) adds nothing and is kept.
        """
        messages = adoptable(record.messages) if record.messages else []  # none: outside calls
        if messages is None:
            return False
        self.messages.extend(messages)
        if record.cell_id:
            self.records[record.cell_id] = record
        return True

    def _account(self, result: TurnResult) -> None:
        totals = self.totals
        totals.turns += 1
        totals.model_calls += result.model_calls
        totals.usage = totals.usage + result.usage
        if result.cost_usd is None:
            totals.cost_known = totals.cost_known and result.model_calls == 0
        else:
            totals.cost_usd += result.cost_usd

    def _save(self, record: CellRecord, store: RecordStore | None) -> None:
        if record.cell_id:
            self.records[record.cell_id] = record
        if store is not None:
            store.save(record)
