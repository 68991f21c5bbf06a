"""QueryLoop: one task turn. Call the model, run its tool calls, send the results back, repeat.

Every exit is a ``return`` of a typed stop reason. The budget (the cell's, and the admin's spend caps
through ``spend.py``) is checked before each model request.
This module imports neither IPython, ipywidgets nor anthropic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .context import estimate_tokens
from .contracts import CancelToken as CancelToken  # re-exported: the loop's contracts
from .contracts import Limits as Limits
from .contracts import ModelClient as ModelClient
from .contracts import TurnCancelled as TurnCancelled
from .contracts import TurnObserver as TurnObserver
from .messages import (
    Block,
    BudgetExceeded,
    Completed,
    Failed,
    Interrupted,
    MaxTurns,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelTimeout,
    Refused,
    StopReason,
    TimedOut,
    ToolCall,
    ToolOutcome,
    TurnResult,
    Usage,
    now_iso,
)
from .pricing import Price
from .spend import SpendGuard
from .text import clip
from .tools.runtime import ToolRuntime

CONTEXT_EXCEEDED = (
    "the conversation no longer fits in the model's context window. Start a fresh conversation with "
    "`%%agent --new` (or `%agent reset`), or ask for smaller outputs"
)
CUT_TOOL_CALL = (
    "Your previous response hit the output token limit while writing a call to '{name}'; that call was "
    "not run. Make it again with a shorter input (for example, split long code into several calls)."
)
CUT_TEXT = (
    "Your previous response was cut off at the output token limit. Continue where you stopped."
)
NOT_AN_OBJECT = (
    "The input of this '{name}' call was {value} (a JSON {kind}), not an object; nothing was run. "
    "Tool input must be a JSON object of named fields, as the tool's input schema says: make the "
    "call again with one."
)


@dataclass
class _Turn:
    messages: list[Message]
    started: float
    exchange_start: int = 0  # where this turn's prompt is: a refusal removes from here on
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    model_calls: int = 0
    approval_wait_s: float = 0.0
    last_prompt_tokens: int = 0
    last_cost: float = 0.0
    cut_calls_in_a_row: int = 0
    outcomes: list[ToolOutcome] = field(default_factory=list)
    pending: list[ToolOutcome] = field(default_factory=list)


class QueryLoop:
    """Runs one turn: model -> tool calls -> results -> model, until a typed stop."""

    def __init__(
        self,
        model: ModelClient,
        runtime: ToolRuntime,
        *,
        system: str,
        limits: Limits | None = None,
        price: Price | None = None,
        observer: TurnObserver | None = None,
        cancel: CancelToken | None = None,
        clock: Callable[[], float] = time.monotonic,
        spend: SpendGuard | None = None,
    ) -> None:
        self.model = model
        self.runtime = runtime
        self.system = system
        self.limits = limits or Limits()
        self.price = price
        self.observer = observer or TurnObserver()
        self.cancel = cancel or CancelToken()
        self.clock = clock
        self.spend = spend  # the user's ledger and the admin's spend caps

    def run(self, messages: list[Message]) -> TurnResult:
        """Run the turn on a copy of ``messages``; the result carries the updated list."""
        turn = _Turn(messages=list(messages), started=self.clock())
        ends_with_prompt = bool(messages) and messages[-1].get("role") == "user"
        turn.exchange_start = len(messages) - 1 if ends_with_prompt else len(messages)
        turn.cost_usd = 0.0 if self.price else None
        try:
            stop = self._loop(turn)
        except KeyboardInterrupt:
            stop = Interrupted("keyboard")
        self._answer_open_calls(turn, stop)
        return self._result(turn, stop)

    def _loop(self, turn: _Turn) -> StopReason:
        while True:
            stop = self._check_before_request(turn)
            if stop is not None:
                return stop
            try:
                response = self._request(turn)
            except TurnCancelled:
                return Interrupted("stop")
            except ModelTimeout:
                return TimedOut(self.limits.timeout_s or 0.0)
            except ModelError as exc:
                return Failed(str(exc))
            stop = self._handle(turn, response)
            if stop is not None:
                return stop

    def _check_before_request(self, turn: _Turn) -> StopReason | None:
        limits = self.limits
        if self.cancel.cancelled:
            return Interrupted("stop")
        if turn.model_calls >= limits.max_turns:
            return MaxTurns(limits.max_turns)
        if limits.timeout_s is not None and self._active_time(turn) >= limits.timeout_s:
            return TimedOut(limits.timeout_s)
        spent = turn.usage.total_tokens
        if limits.max_tokens is not None:
            expected = max(turn.last_prompt_tokens, self._estimate_prompt_tokens(turn))
            if spent + expected > limits.max_tokens:
                return BudgetExceeded("tokens", spent, limits.max_tokens)
        cost = turn.cost_usd or 0.0
        if limits.max_cost_usd is not None and cost + turn.last_cost > limits.max_cost_usd:
            return BudgetExceeded("cost", cost, limits.max_cost_usd)
        if self.spend is not None:
            return self.spend.check(cost, turn.last_cost, priced=self.price is not None)
        return None

    def _estimate_prompt_tokens(self, turn: _Turn) -> int:
        """A rough size of the next request (4 characters a token) for the first budget check."""
        if turn.model_calls:
            return 0
        return estimate_tokens(turn.messages) + estimate_tokens(self.system)

    def _active_time(self, turn: _Turn) -> float:
        return self.clock() - turn.started - turn.approval_wait_s

    def _request(self, turn: _Turn) -> ModelResponse:
        deadline = None
        if self.limits.timeout_s is not None:
            deadline = self.clock() + self.limits.timeout_s - self._active_time(turn)
        request = ModelRequest(
            messages=turn.messages,
            tools=self.runtime.schemas(),
            system=self.system,
            max_tokens=self.limits.max_output_tokens,
            deadline=deadline,
        )
        response = self.model.complete(request, self.observer.on_event, self.cancel)
        turn.model_calls += 1
        turn.usage = turn.usage + response.usage
        turn.last_prompt_tokens = response.usage.prompt_tokens
        if self.price is not None:
            turn.last_cost = self.price.cost(response.usage)
            turn.cost_usd = (turn.cost_usd or 0.0) + turn.last_cost
        if self.spend is not None:
            self.spend.record(response, self.model.model, turn.last_cost if self.price else None)
        self.observer.on_response(response, turn.usage, turn.cost_usd)
        return response

    def _handle(self, turn: _Turn, response: ModelResponse) -> StopReason | None:
        reason = response.stop_reason
        if reason == "refusal":
            # "Handling stop reasons": remove the refused turn before going on, so later turns
            # do not carry it; the tool calls it made are not run.
            del turn.messages[turn.exchange_start :]
            details = response.stop_details or {}
            return Refused(details.get("category"), details.get("explanation"))
        if reason == "model_context_window_exceeded":
            return Failed(CONTEXT_EXCEEDED)
        if reason is None:
            return Failed("the response stream ended before the model finished (no stop reason)")
        if reason == "pause_turn":
            _append_assistant(turn, response.content)
            return None
        if reason == "max_tokens":
            return self._handle_cut(turn, response.content)
        turn.cut_calls_in_a_row = 0
        _append_assistant(turn, response.content)
        calls = _tool_calls(response.content)
        if not calls:
            return Completed()
        return self._run_tools(turn, calls, notes=[])

    def _handle_cut(self, turn: _Turn, content: list[Block]) -> StopReason | None:
        if not content or content[-1].get("type") != "tool_use":
            _append_assistant(turn, content)
            turn.messages.append({"role": "user", "content": [{"type": "text", "text": CUT_TEXT}]})
            return None
        cut = content[-1]
        turn.cut_calls_in_a_row += 1
        if turn.cut_calls_in_a_row > 1:
            return Failed(
                f"the model's output limit ({self.limits.max_output_tokens} tokens) is too small for "
                f"the '{cut.get('name')}' call it is writing; raise it with `%agent set "
                "max_output_tokens N`"
            )
        kept = content[:-1]
        _append_assistant(turn, kept)
        note = CUT_TOOL_CALL.format(name=cut.get("name"))
        return self._run_tools(turn, _tool_calls(kept), notes=[note])

    def _run_tools(self, turn: _Turn, calls: list[ToolCall], notes: list[str]) -> StopReason | None:
        turn.pending = []
        for index, call in enumerate(calls):
            if self.cancel.cancelled:
                return Interrupted("stop")
            self.runtime.upcoming = calls[index + 1 :]
            self.observer.on_tool_start(call)
            outcome = _not_an_object(call) or self.runtime.run(call)
            turn.approval_wait_s += outcome.approval_wait_s
            turn.pending.append(outcome)
            turn.outcomes.append(outcome)
            self.observer.on_tool_end(outcome)
            if outcome.fatal is not None:
                return Failed(outcome.fatal)  # the open calls are answered on the way out
        content: list[Block] = [o.result_block() for o in turn.pending]
        content += [{"type": "text", "text": note} for note in notes]
        turn.pending = []
        turn.messages.append({"role": "user", "content": content})
        return None

    def _answer_open_calls(self, turn: _Turn, stop: StopReason) -> None:
        """After an interrupt, answer every unanswered tool call so the conversation stays valid."""
        last = turn.messages[-1] if turn.messages else None
        if last is None or last["role"] != "assistant":
            return
        answered = {o.call.id for o in turn.pending}
        content: list[Block] = [o.result_block() for o in turn.pending]
        why = "not run: the turn was interrupted" if stop.status == "interrupted" else "not run"
        for call in _tool_calls(last["content"]):
            if call.id not in answered:
                outcome = ToolOutcome(
                    call, [{"type": "text", "text": why}], True, "denied", call.input, reason=why
                )
                turn.outcomes.append(outcome)  # recorded: the call was made, and not run
                content.append(outcome.result_block())
        if content:
            turn.messages.append({"role": "user", "content": content})
        turn.pending = []

    def _result(self, turn: _Turn, stop: StopReason) -> TurnResult:
        # A refused turn has no answer of its own; the API's explanation stands in for it.
        answer = (stop.explanation or "") if isinstance(stop, Refused) else _final_text(turn.messages)
        return TurnResult(
            stop=stop,
            messages=turn.messages,
            final_text=answer,
            usage=turn.usage,
            cost_usd=turn.cost_usd,
            model_calls=turn.model_calls,
            elapsed_s=self.clock() - turn.started,
            approval_wait_s=turn.approval_wait_s,
            outcomes=turn.outcomes,
        )


def _append_assistant(turn: _Turn, content: list[Block]) -> None:
    if not content:
        content = [{"type": "text", "text": "(no content)"}]
    turn.messages.append({"role": "assistant", "content": list(content)})


def _tool_calls(content: list[Block]) -> list[ToolCall]:
    return [
        ToolCall(str(b["id"]), str(b["name"]), _as_input(b.get("input")))
        for b in content
        if b.get("type") == "tool_use"
    ]


def _as_input(value: Any) -> dict[str, Any]:
    # Tool schemas are pydantic models, whose fields cannot start with "_": no real input is this.
    return value if isinstance(value, dict) else {"_raw": value}


def _not_an_object(call: ToolCall) -> ToolOutcome | None:
    """The is_error answer to a call whose input is not a JSON object (None when it is one)."""
    if call.input.keys() != {"_raw"}:
        return None
    raw = call.input["_raw"]
    kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(raw), "number"
    )
    value = json.dumps(raw, ensure_ascii=False, default=repr)
    value = clip(value, 200)
    text = NOT_AN_OBJECT.format(name=call.name, value=value, kind=kind)
    return ToolOutcome(call, [{"type": "text", "text": text}], True, "auto", call.input,
                       decided_at=now_iso())  # fmt: skip


def _final_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message["role"] != "assistant":
            continue
        text = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
        if text.strip():
            return text
    return ""
