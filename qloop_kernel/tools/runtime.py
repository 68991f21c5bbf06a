"""ToolRuntime: registered tools, input validation, permission, execution, result formatting.

Model-caused failures never raise from here: unknown tools, invalid input, denials and exceptions in a
tool all become ``is_error`` tool results that tell the model what to do next.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import time
import traceback
import types
import weakref
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema

from ..errors import ToolFailure, ToolInputError
from ..messages import Block, DecisionKind, ToolCall, ToolOutcome, now_iso
from ..policy.grants import Grant, Grants
from ..policy.permissions import (
    AlwaysAllow,
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    ApproveEdited,
    Approver,
    Decision,
    Deny,
    denial_line,
)
from ..policy.pipeline import LIVE, Permission, PermissionPipeline, Provenance
from ..policy.risk import Assessment, Reason
from ..redact import redact_text, redacted_truncate
from ..text import clip

log = logging.getLogger("qloop.tools")
_RUNNING_CALL: ContextVar[str | None] = ContextVar("qloop_running_call", default=None)


def running_call_id() -> str | None:
    """The id of the tool call whose function is running now (None outside one)."""
    return _RUNNING_CALL.get()


MAX_RESULT_CHARS = 20_000
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


@dataclass
class Tool:
    """A plain function exposed to the model, with its input schema and approval need.

    ``classify`` gives a call's risk class from its input (``run_code`` reads the code); calls of a
    tool without one have no class, and policies count them as ``unknown``. ``replayable`` calls
    are re-run by a replay of a saved cell, with their saved (approved) input.
    """

    name: str
    description: str
    input_model: type[BaseModel]
    func: Callable[..., Any]
    requires_approval: bool = True
    editable_field: str | None = None
    takes_model: bool = False
    replaces: bool = False  # registered with replace=True: may take a built-in tool's name
    classify: Callable[[dict[str, Any]], Assessment] | None = None
    replayable: bool = False
    notices: tuple[str, ...] = ()  # lines its approval card shows (an MCP tool: its server)
    # Why every call is put to a person, whatever the policy or grants (an MCP tool whose
    # description hides characters); None: the pipeline decides as for any tool.
    always_ask: str | None = None
    # The input as it is decided and runs, from the model's (run_cell reads the cell's source):
    # the card, the policy and the record see what ``prepare`` returns. Raises ToolFailure.
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    _schema: dict[str, Any] | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        requires_approval: bool = True,
        editable_field: str | None = None,
        classify: Callable[[dict[str, Any]], Assessment] | None = None,
        replayable: bool = False,
    ) -> Tool:
        """Build a tool from type hints and docstring, or from a single pydantic-model parameter."""
        summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
        model, takes_model = _input_model(func, arg_docs)
        return cls(
            name=name or func.__name__,
            description=summary or (name or func.__name__),
            input_model=model,
            func=func,
            requires_approval=requires_approval,
            editable_field=editable_field,
            takes_model=takes_model,
            classify=classify,
            replayable=replayable,
        )

    def assessment(self, input: dict[str, Any]) -> Assessment | None:
        """The risk class of a call with this input (None for a tool without a classifier).

        A classifier that fails gives ``unknown``: what cannot be read is never milder.
        """
        if self.classify is None:
            return None
        try:
            return self.classify(input)
        except Exception as exc:  # the classifier's failure must not crash the turn
            why = f"could not be classified ({type(exc).__name__}: {exc})"
            return Assessment("unknown", (Reason(1, "unknown", why),), None)

    def schema(self) -> dict[str, Any]:
        """The Messages API tool definition, built once (pydantic schema generation is slow).

        Shared between requests: callers copy before changing it.
        """
        if self._schema is None:
            self._schema = {
                "name": self.name,
                "description": self.description,
                "input_schema": _input_schema(self.input_model),
            }
        return self._schema

    def call(self, validated: BaseModel) -> Any:  # Any: whatever the tool function returns
        if self.takes_model:
            return self.func(validated)
        return self.func(**{k: getattr(validated, k) for k in type(validated).model_fields})


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the description and per-argument text."""
    lines = doc.splitlines()
    args: dict[str, str] = {}
    body: list[str] = []
    in_args = False
    for line in lines:
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        match = _ARG_LINE.match(line) if in_args else None
        if match:
            args[match.group(1).lstrip("*")] = match.group(2).strip()
        elif in_args and line.strip() and line.startswith((" ", "\t")) and args:
            last = list(args)[-1]
            args[last] += " " + line.strip()
        elif in_args and line.strip():
            in_args = False
            body.append(line)
        elif not in_args:
            body.append(line)
    return "\n".join(body).strip(), args


@dataclass(frozen=True)
class _Built:
    """An input model built for one function definition, and what it was built from."""

    hints: dict[str, Any]
    defaults: tuple[Any, ...]
    doc: str | None
    model: type[BaseModel]
    takes_model: bool

    def fits(self, hints: dict[str, Any], defaults: tuple[Any, ...], doc: str | None) -> bool:
        if doc != self.doc or len(defaults) != len(self.defaults):
            return False
        if not all(map(_same, defaults, self.defaults)):
            return False
        try:
            return bool(hints == self.hints)
        except Exception:  # a hint whose == fails cannot be matched: build again
            return False


def _same(a: object, b: object) -> bool:
    """The same default: one object, or equal values of a plain immutable type."""
    return a is b or (type(a) is type(b) and type(a) in (str, int, float, bytes) and a == b)


# Tools made again from functions defined again (each turn's proposal tools, closures over the
# turn's proposals; a cell defining a @tool run again): one model per definition (its code
# object), reused while the hints, defaults and docstring are the same objects or equal; pydantic
# model and schema generation cost about 1 ms per tool. The built-in tools are built once per
# kernel (notebook/tools.py: BuiltinTools).
_BUILT: weakref.WeakKeyDictionary[types.CodeType, _Built] = weakref.WeakKeyDictionary()
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


class _ToolSchema(GenerateJsonSchema):
    """pydantic's JSON schema without a title on each property: the property's name says it, and
    every request carries the tools' schemas (about 10 tokens a tool parameter)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without titles, built once per model (shared: do not change)."""
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = model.model_json_schema(schema_generator=_ToolSchema)
        schema.pop("title", None)
        _SCHEMAS[model] = schema
    return schema


def _input_model(
    func: Callable[..., Any], arg_docs: dict[str, str]
) -> tuple[type[BaseModel], bool]:
    hints = get_type_hints(func, include_extras=True)  # keep Annotated bounds
    target = getattr(func, "__func__", func)  # a bound method's function
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return _build_input_model(func, hints, arg_docs)
    kwdefaults = getattr(target, "__kwdefaults__", None) or {}
    defaults = (
        inspect.ismethod(func),
        getattr(func, "__name__", ""),
        *(getattr(target, "__defaults__", None) or ()),
        *(part for item in kwdefaults.items() for part in item),
    )
    doc = inspect.getdoc(func)
    built = _BUILT.get(code)
    if built is None or not built.fits(hints, defaults, doc):
        model, takes_model = _build_input_model(func, hints, arg_docs)
        built = _Built(hints, defaults, doc, model, takes_model)
        _BUILT[code] = built
    return built.model, built.takes_model


def _build_input_model(
    func: Callable[..., Any], hints: dict[str, Any], arg_docs: dict[str, str]
) -> tuple[type[BaseModel], bool]:
    params = list(inspect.signature(func).parameters.values())
    if len(params) == 1 and _is_model(hints.get(params[0].name)):
        return hints[params[0].name], True
    fields: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
    model = create_model(f"{func.__name__}_input", __config__=ConfigDict(extra="forbid"), **fields)
    return model, False


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def format_validation_error(tool: Tool, error: ValidationError) -> str:
    """Field-by-field errors the model can act on."""
    lines = [f"Invalid input for tool '{tool.name}':"]
    for err in error.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        lines.append(f"- {where}: {err['msg']}")
    props = tool.schema()["input_schema"].get("properties", {})
    lines.append(
        f"Expected fields: {', '.join(props) or '(none)'}. Fix the input and call it again."
    )
    return "\n".join(lines)


def format_exception(exc: BaseException, *, limit: int = 6) -> str:
    """``Type: message`` plus a short traceback without ANSI colour codes."""
    frames = traceback.extract_tb(exc.__traceback__)[-limit:]
    tb = "".join(traceback.format_list(frames))
    text = f"{type(exc).__name__}: {exc}\nTraceback (most recent call last, shortened):\n{tb}"
    return strip_ansi(text).rstrip()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def truncate(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text`` redacted, its head and tail kept around the package's one truncation marker when it
    is longer than ``limit``; each part is cut from the redacted whole, so no cut shows a piece of
    a secret."""
    return redacted_truncate(text, limit)


def to_content(value: Any, limit: int = MAX_RESULT_CHARS) -> list[Block]:
    """A tool's return value as tool_result content blocks, bounded in size."""
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return [_bound_block(b, limit) for b in value] or [{"type": "text", "text": "(no output)"}]
    text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return [{"type": "text", "text": truncate(text, limit) or "(no output)"}]


def _bound_block(block: Block, limit: int) -> Block:
    if block.get("type") == "text":
        return {**block, "text": truncate(str(block.get("text", "")), limit)}
    return block


@dataclass(frozen=True)
class _Permit:
    """What the permission pipeline decided about one call, as the runtime acts on it."""

    kind: DecisionKind
    denial: Deny | None = None
    waited: float = 0.0
    validated: BaseModel | None = None  # the input the person edited; None: as the model wrote it
    risk: str | None = None  # the call's class, as the pipeline saw it
    by: str = "policy"  # who decided (Permission.who); a read-only tool runs under every policy


class StepGuard(Protocol):
    """Checks around each tool execution that the step did not change how approval works."""

    def before(self, runtime: ToolRuntime) -> None: ...

    def after(self, runtime: ToolRuntime) -> str | None:
        """What changed, or None."""


@dataclass
class ToolRuntime:
    """Runs the model's tool calls: lookup, validation, permission, execution, formatting, logging.

    Permission, for a tool that needs approval: the policy decides by the call's risk class (run,
    ask, deny); a call it would ask about runs without asking when a grant covers it; otherwise the
    approver (the card, or a denier when nobody can click) decides. ``on_unasked`` is told of each
    call that runs without a card, before it runs, so the notebook can show what runs.
    """

    tools: dict[str, Tool]
    approver: Approver
    grants: Grants = field(default_factory=Grants)
    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    cell_id: str | None = None  # the agent cell of the turn, for grants scoped to a cell
    max_result_chars: int = MAX_RESULT_CHARS
    clock: Callable[[], float] = time.monotonic
    guard: StepGuard | None = None
    # Where the calls come from: the model now (LIVE), or steps approved ahead (a replay's saved
    # steps, an outside client's step), which the pipeline decides by that approval
    provenance: Provenance = LIVE
    on_unasked: Callable[[ApprovalRequest, str], None] | None = None
    # The calls of the model's response after the one running now (the loop sets them): an
    # approver may show the ones it will be asked about next together (proposals: Accept all).
    upcoming: list[ToolCall] = field(default_factory=list)

    @classmethod
    def of(cls, tools: Iterable[Tool], approver: Approver, **kwargs: Any) -> ToolRuntime:
        """A runtime for ``tools``, whose names must be unique (a later one never shadows another)."""
        table: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in table:
                raise ValueError(f"two tools are named {tool.name!r}")
            table[tool.name] = tool
        return cls(table, approver, **kwargs)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    def run(self, call: ToolCall) -> ToolOutcome:
        """Answer one tool call. Raises only KeyboardInterrupt (the user's, not the model's)."""
        started = self.clock()
        outcome = self._run(call)
        outcome.duration_s = self.clock() - started - outcome.approval_wait_s
        outcome.decided_at = outcome.decided_at or now_iso()
        self._log(outcome)
        return outcome

    def request(self, tool: Tool, call: ToolCall, input: dict[str, Any]) -> ApprovalRequest:
        """What the approver is asked about a call that would run with ``input``."""
        return ApprovalRequest(
            call,
            title=tool.name,
            editable_field=tool.editable_field,
            details={"notices": list(tool.notices)} if tool.notices else {},
            assessment=tool.assessment(input),
            classify=tool.assessment if tool.classify is not None else None,
            always_ask=tool.always_ask,
        )

    def pipeline(self) -> PermissionPipeline:
        """The permission pipeline of this runtime's policy, grants and approver (as set now)."""
        return PermissionPipeline(self.policy, self.grants, self.approver, self.cell_id, self.clock)

    def would_ask(self, call: ToolCall) -> ApprovalRequest | None:
        """The request the approver would get for ``call`` if it ran now (valid input, the policy
        asks, no grant covers it), or None. Decides nothing: the call still goes through
        :meth:`run` and the same pipeline."""
        tool = self.tools.get(call.name)
        if tool is None or not tool.requires_approval or tool.prepare is not None:
            return None
        try:
            validated = tool.input_model.model_validate(call.input)
        except ValidationError:
            return None
        request = self.request(tool, call, validated.model_dump(mode="json"))
        return request if self.pipeline().would_ask(request, self.provenance) else None

    def _run(self, call: ToolCall) -> ToolOutcome:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "(none)"
            return self._error(call, f"Unknown tool '{call.name}'. Available tools: {names}.")
        try:
            validated = tool.input_model.model_validate(call.input)
        except ValidationError as exc:
            return self._error(call, format_validation_error(tool, exc))
        if tool.prepare is not None:
            try:
                prepared = tool.prepare(validated.model_dump(mode="json"))
                validated = tool.input_model.model_validate(prepared)
            except (ToolInputError, ToolFailure) as exc:
                return self._error(call, str(exc))
            except ValidationError as exc:
                return self._error(call, format_validation_error(tool, exc))
            call = ToolCall(call.id, call.name, validated.model_dump(mode="json"))
        permit = self._permit(tool, call, validated)
        if permit.denial is not None:
            outcome = self._denied(call, permit.denial, permit.waited)
        else:
            validated = permit.validated or validated
            outcome = self._execute(tool, call, validated, permit.kind, permit.waited)
        outcome.risk, outcome.decided_by = permit.risk, permit.by
        return outcome

    def _permit(self, tool: Tool, call: ToolCall, validated: BaseModel) -> _Permit:
        if not tool.requires_approval:
            return _Permit("readonly")
        request = self.request(tool, call, validated.model_dump(mode="json"))
        permission = self.pipeline().decide(request, self.provenance)
        acted = self._act(tool, request, permission)
        return replace(acted, risk=request.risk, by=permission.who)

    def _act(self, tool: Tool, request: ApprovalRequest, permission: Permission) -> _Permit:
        decision = permission.decision
        if permission.by in ("policy", "provenance"):
            if isinstance(decision, Deny):
                return _Permit("denied", decision)
            self._tell_unasked(request, f"the approval policy '{self.policy.name}' runs it")
            return _Permit("auto")
        if permission.by == "grant":
            self._tell_unasked(request, f"granted: {permission.grants[0].describe()}")
            return _Permit("always")
        kind, denial, edited = self._apply(tool, request, decision)
        return _Permit(kind, denial, permission.waited_s, edited)

    def _apply(
        self, tool: Tool, request: ApprovalRequest, decision: Decision
    ) -> tuple[DecisionKind, Deny | None, BaseModel | None]:
        match decision:
            case Deny():
                return "denied", decision, None
            case AlwaysAllow(input=None, scope=scope):
                self._grant(tool, request.risk, scope)
                return "always", None, None
            case AlwaysAllow(input=edited) | ApproveEdited(input=edited):
                try:
                    validated = tool.input_model.model_validate(edited)
                except ValidationError as exc:
                    return "denied", Deny("the edited input is invalid: " + str(exc)), None
                if isinstance(decision, AlwaysAllow):  # the class of what runs: the edit's
                    ran = tool.assessment(validated.model_dump(mode="json"))
                    self._grant(tool, ran.risk if ran is not None else None, decision.scope)
                return "edited", None, validated
            case Approve(policy=policy):
                return ("approved" if policy is None else "auto"), None, None
        raise AssertionError(decision)  # pragma: no cover - the union is closed

    def _grant(self, tool: Tool, risk: Any, scope: Any) -> Grant:
        cell = self.cell_id if scope == "cell" else None
        return self.grants.add(Grant(tool.name, risk, scope, cell))

    def _tell_unasked(self, request: ApprovalRequest, why: str) -> None:
        if self.on_unasked is not None:
            self.on_unasked(request, why)

    def _execute(
        self, tool: Tool, call: ToolCall, validated: BaseModel, kind: DecisionKind, waited: float
    ) -> ToolOutcome:
        as_run = validated.model_dump(mode="json")
        if self.guard is not None:
            self.guard.before(self)
        running = _RUNNING_CALL.set(call.id)
        try:
            value, failure = tool.call(validated), None
        except (ToolInputError, ToolFailure) as exc:
            value, failure = None, str(exc)
        except Exception as exc:  # a tool's failure is reported to the model, never raised
            value, failure = None, format_exception(exc)
        finally:
            _RUNNING_CALL.reset(running)
            breach = self.guard.after(self) if self.guard is not None else None
        if breach is not None:
            outcome = self._error(call, f"Stopped: {breach}", kind, as_run, waited)
            outcome.fatal = breach
            return outcome
        if failure is not None:
            return self._error(call, failure, kind, as_run, waited)
        content = to_content(value, self.max_result_chars)
        if kind == "edited":
            note = f"Note: the user edited the input before approving; what ran was: {json.dumps(as_run)}"
            content = [{"type": "text", "text": truncate(note, 4000)}, *content]
        return ToolOutcome(call, content, False, kind, as_run, approval_wait_s=waited)

    def _denied(self, call: ToolCall, decision: Deny, waited: float) -> ToolOutcome:
        """A denied call: the first line is the short sentence a person reads; the model reads all.

        The record keeps the user's own reason, or the policy's short sentence.
        """
        said = decision.reason.strip()
        if decision.policy is not None:
            kept = denial_line(decision)
            text = (
                f"Not run: {kept}.\n{said}.\nDo not repeat it or make the same change another way; "
                "tell the user what needs their approval."
            )
        else:
            kept = said
            first = (
                f"The user denied this call: {said}"
                if said
                else ("The user denied this call (no reason given).")
            )
            text = (
                first
                + "\nIt was not run. Take the reason into account; do not repeat the same call."
            )
        return ToolOutcome(
            call,
            [{"type": "text", "text": text}],
            True,
            "denied",
            call.input,
            kept or None,
            0.0,
            waited,
        )

    def _error(
        self,
        call: ToolCall,
        text: str,
        kind: DecisionKind = "auto",
        as_run: dict[str, Any] | None = None,
        waited: float = 0.0,
    ) -> ToolOutcome:
        content: list[Block] = [{"type": "text", "text": truncate(text, 8000)}]
        return ToolOutcome(call, content, True, kind, as_run or call.input, approval_wait_s=waited)

    def _log(self, outcome: ToolOutcome) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        short = redact_text(json.dumps(outcome.input_as_run, ensure_ascii=False, default=repr))
        log.info(
            "tool=%s input=%s decision=%s duration=%.3fs outcome=%s",
            outcome.call.name,
            clip(short, 120, "..."),
            outcome.decision,
            outcome.duration_s,
            "error" if outcome.is_error else "ok",
        )
