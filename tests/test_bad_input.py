"""Bad input: fuzzed tool calls, a loop fed fuzzed replies, crafted saved records.

- ToolRuntime with the real built-in tools bound to a real IPython shell, plus user tools: whatever the
  model sends, a call returns a bounded ToolOutcome and never raises; only harmless generated code runs.
- QueryLoop with a scripted model replying with fuzzed tool calls: the turn completes and every tool_use
  gets its tool_result.
- Notebooks whose saved records were crafted: a clear message, and nothing runs that is not an approved
  recorded step (headless replay follows the approval policy).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell
from pydantic import BaseModel, Field, ValidationError
from traitlets.config import Config

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.loop import Limits, QueryLoop
from qloop_kernel.messages import ToolCall, ToolOutcome
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.policy.permissions import ApprovalRequest, Approve, Decision, Deny
from qloop_kernel.records import (
    CellRecord,
    DecisionRecord,
    Timings,
    ToolCallRecord,
)
from qloop_kernel.testing import Reply, StandInAPI, text
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.text import MARKER as TRUNCATION_MARKER
from qloop_kernel.tools.runtime import MAX_RESULT_CHARS, Tool, ToolRuntime

HARMLESS = re.compile(r"fuzz_[a-h]{1,8} = -?\d{1,12}")
RESULT_BOUND = MAX_RESULT_CHARS + len(TRUNCATION_MARKER) + 20  # the marker's numbers grow a little
MEGABYTE = 1_000_000


# -- tools: user tools beside the built-in ones ---------------------------------------------------


class Query(BaseModel):
    table: str = Field(description="table name")
    limit: int = Field(10, ge=1, le=1000)


def scale(values: list[float], factor: float = 1.0) -> list[float]:
    """Multiply every value by a factor.

    Args:
        values: the numbers
        factor: the multiplier
    """
    return [v * factor for v in values]


def query(q: Query) -> str:
    """Describe a query on a table."""
    return f"{q.table}: first {q.limit} rows"


def echo(message: str) -> str:
    """Repeat a message (its result can be as large as its input)."""
    return message * 3


def fragile(n: int) -> str:
    """Fail for most inputs, as user code does."""
    return str(10 // (n % 3))


def user_tools() -> list[Tool]:
    return [
        Tool.from_function(scale, requires_approval=False),
        Tool.from_function(query, requires_approval=False),
        Tool.from_function(echo, requires_approval=True),
        Tool.from_function(fragile, requires_approval=False),
    ]


class HarmlessCodeOnly:
    """Approves every call, except run_code whose code is not a generated harmless assignment."""

    def decide(self, request: ApprovalRequest) -> Decision:
        code = request.call.input.get("code")
        if request.call.name == "run_code" and not (
            isinstance(code, str) and HARMLESS.fullmatch(code)
        ):
            return Deny("only generated assignments run in this test")
        return Approve()


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ipython = InteractiveShell.instance(config=config)
    ipython.reset(new_session=True)
    setup = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': range(50), 'b': [str(i) * 3 for i in range(50)]})\n"
        "numbers = list(range(1000))\n"
        "nested = {'x': [1, {'y': (2, 3)}], 'text': 'z' * 5000}\n"
        "big_text = 'line\\n' * 200_000\n"
        "def helper(a, b=2):\n    '''Add.'''\n    return a + b\n"
    )
    assert ipython.run_cell(setup, store_history=True).success
    yield ipython
    InteractiveShell.clear_instance()


@pytest.fixture(scope="module")
def runtime(shell: InteractiveShell) -> ToolRuntime:
    tools = [*builtin_tools(shell), *user_tools()]
    return ToolRuntime.of(tools, HarmlessCodeOnly())


# -- strategies -----------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
junk = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=25,
)  # fmt: skip
field_names = st.sampled_from(
    ["name", "columns", "offset", "rows", "code", "last", "values", "factor", "q", "message", "n"]
) | st.text(max_size=12)
variable_paths = st.sampled_from(
    ["df", "numbers", "nested", "big_text", "helper", "df.a", "helper.__doc__", "In", "Out",
     "missing", "df.nope", "1x", "df[0]", "os.system", "__builtins__", ""]
) | st.text(max_size=30)  # fmt: skip
harmless_code = st.builds(
    lambda name, value: f"fuzz_{name} = {value}",
    st.text("abcdefgh", min_size=1, max_size=8),
    st.integers(-(10**11), 10**11),
)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes junk of any type."""
    return st.one_of(good, good, good, junk)


PLAUSIBLE_INPUTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "list_variables": st.just({}),
    "inspect_variable": st.fixed_dictionaries(
        {"name": variable_paths},
        optional={
            "offset": maybe(st.integers(-3, 10**6)),
            "rows": maybe(st.integers(-3, 2000)),
            "columns": maybe(
                st.lists(st.sampled_from(["a", "b", "c"]) | st.text(max_size=4), max_size=3)
            ),
        },
    ),
    "run_code": st.fixed_dictionaries({"code": maybe(harmless_code | st.text(max_size=60))}),
    "notebook_history": st.fixed_dictionaries({}, optional={"last": maybe(st.integers())}),
    "scale": st.fixed_dictionaries(
        {"values": maybe(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))},
        optional={"factor": maybe(st.floats(allow_nan=False, allow_infinity=False))},
    ),
    "query": st.fixed_dictionaries(
        {
            "q": maybe(
                st.fixed_dictionaries(
                    {"table": maybe(st.text(max_size=20))}, optional={"limit": maybe(st.integers())}
                )
            )
        }
    ),
    "echo": st.fixed_dictionaries({"message": maybe(st.text(max_size=100))}),
    "fragile": st.fixed_dictionaries({"n": maybe(st.integers())}),
}
TOOL_NAMES = list(PLAUSIBLE_INPUTS)
plausible_calls = st.sampled_from(TOOL_NAMES).flatmap(
    lambda name: st.tuples(st.just(name), PLAUSIBLE_INPUTS[name])
)
any_names = st.sampled_from(TOOL_NAMES) | st.text(max_size=20)
junk_objects = st.dictionaries(field_names, junk, max_size=5)
raw_inputs = junk.map(lambda value: {"_raw": value})  # how the loop hands over non-object input
calls = st.one_of(plausible_calls, st.tuples(any_names, junk_objects | raw_inputs))
object_calls = st.one_of(plausible_calls, st.tuples(any_names, junk_objects))


def result_size(outcome: ToolOutcome) -> int:
    return sum(len(block.get("text", "")) for block in outcome.content)


def expected_error(runtime: ToolRuntime, call: ToolCall) -> str | None:
    """The start of the error the runtime must answer with, when the call cannot run."""
    tool = runtime.tools.get(call.name)
    if tool is None:
        return f"Unknown tool '{call.name}'. Available tools: "
    try:
        tool.input_model.model_validate(call.input)
    except ValidationError:
        return f"Invalid input for tool '{call.name}':"
    code = call.input.get("code")
    if call.name == "run_code" and not (isinstance(code, str) and HARMLESS.fullmatch(code)):
        return "The user denied this call: only generated assignments run in this test"
    return None


def assert_answered(runtime: ToolRuntime, shell: InteractiveShell, call: ToolCall) -> ToolOutcome:
    before = {k for k in shell.user_ns if not k.startswith("_")}
    outcome = runtime.run(call)
    assert isinstance(outcome, ToolOutcome) and outcome.call == call
    assert outcome.content and all(isinstance(b, dict) and "type" in b for b in outcome.content)
    assert result_size(outcome) <= RESULT_BOUND
    json.dumps(outcome.result_block())  # the result can be sent as it is
    error = expected_error(runtime, call)
    if error is not None:
        assert outcome.is_error and outcome.text.startswith(error), (call, outcome.text[:300])
    added = {k for k in shell.user_ns if not k.startswith("_")} - before
    assert all(name.startswith("fuzz_") for name in added), added
    return outcome


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=calls)
def test_any_tool_call_gets_a_bounded_answer_and_never_raises(
    runtime: ToolRuntime, shell: InteractiveShell, call: tuple[str, dict[str, Any]]
) -> None:
    name, payload = call
    outcome = assert_answered(runtime, shell, ToolCall("toolu_fuzz", name, payload))
    event(
        f"{name if name in runtime.tools else 'unknown tool'}: {'error' if outcome.is_error else 'ran'}"
    )


HUGE_VALUES = {
    "1 MB string": "x" * MEGABYTE,
    "1 MB of newlines": "\n" * MEGABYTE,
    "1 MB identifier": "a" * MEGABYTE,
    "list of 100,000 numbers": list(range(100_000)),
    "nested 500 deep": json.loads("[" * 500 + "]" * 500),
}


@pytest.mark.slow
@pytest.mark.parametrize("tool", [*TOOL_NAMES, "no_such_tool"])
@pytest.mark.parametrize("kind", list(HUGE_VALUES))
def test_huge_values_in_every_field(
    runtime: ToolRuntime, shell: InteractiveShell, tool: str, kind: str
) -> None:
    value = HUGE_VALUES[kind]
    fields = list(runtime.tools[tool].input_model.model_fields) if tool in runtime.tools else []
    for field in [*fields, "unexpected", "_raw"]:
        assert_answered(runtime, shell, ToolCall("toolu_huge", tool, {field: value}))


def test_results_of_valid_calls_are_bounded(runtime: ToolRuntime, shell: InteractiveShell) -> None:
    calls = [
        ("echo", {"message": "y" * MEGABYTE}),
        ("inspect_variable", {"name": "big_text"}),
        ("inspect_variable", {"name": "df", "rows": 1000}),
        ("notebook_history", {"last": 100}),  # the most the schema allows
        ("scale", {"values": [1.5] * 100_000}),
    ]
    for name, payload in calls:
        outcome = assert_answered(runtime, shell, ToolCall("toolu_big", name, payload))
        assert not outcome.is_error, outcome.text[:300]


# -- the loop, fed fuzzed tool calls --------------------------------------------------------------

tool_call_blocks = st.lists(
    object_calls,  # the scripted model carries object inputs only
    min_size=1,
    max_size=3,
)


def replies_of(turns: list[list[tuple[str, dict[str, Any]]]]) -> list[Any]:
    replies = [
        respond(
            text(f"step {t}"),
            *({"type": "tool_use", "id": f"toolu_{t}_{c}", "name": n, "input": i}
              for c, (n, i) in enumerate(calls)),
        )
        for t, calls in enumerate(turns)
    ]  # fmt: skip
    return [*replies, respond(text("All done."))]


def result_text(block: dict[str, Any]) -> str:
    """The text of a tool_result (its content is a string or a list of blocks)."""
    content = block["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def assert_every_call_answered(messages: list[dict[str, Any]]) -> None:
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        asked = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not asked:
            continue
        answer = messages[index + 1]
        assert answer["role"] == "user"
        answered = [b["tool_use_id"] for b in answer["content"] if b.get("type") == "tool_result"]
        assert answered == asked


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(tool_call_blocks, min_size=1, max_size=4))
def test_the_loop_answers_fuzzed_calls_and_completes(
    runtime: ToolRuntime, turns: list[list[tuple[str, dict[str, Any]]]]
) -> None:
    model = ScriptedModel(replies_of(turns))
    loop = QueryLoop(model, runtime, system="test", limits=Limits(max_turns=len(turns) + 1))
    result = loop.run([{"role": "user", "content": [{"type": "text", "text": "go"}]}])
    assert result.status == "completed" and result.final_text == "All done.", result.stop
    assert len(model.requests) == len(turns) + 1 and model.script == []
    assert len(result.outcomes) == sum(len(calls) for calls in turns)
    assert_every_call_answered(result.messages)
    for request in model.requests:
        for message in request.messages:
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    assert len(result_text(block)) <= RESULT_BOUND


# -- crafted saved records ------------------------------------------------------------------------


def step(
    code: Any, kind: str = "approved", name: str = "run_code", **fields: Any
) -> ToolCallRecord:
    return ToolCallRecord(
        id=f"toolu_{kind}_{name}",
        name=name,
        input={"code": code},
        decision=DecisionRecord(kind=kind),  # type: ignore[arg-type]
        **fields,
    )


def record(prompt: str, **fields: Any) -> dict[str, Any]:
    """A record sealed with a valid digest, like one the agent saved."""
    made = CellRecord(
        session_id="crafted", prompt=prompt, model="claude-sonnet-4-6", status="completed",
        timings=Timings(started_at="2025-01-01T00:00:00.000+00:00"), **fields,
    )  # fmt: skip
    return made.to_json()


def changed(data: dict[str, Any], **updates: Any) -> dict[str, Any]:
    return {**data, **updates}


def tampered(data: dict[str, Any]) -> dict[str, Any]:
    copy = json.loads(json.dumps(data))
    copy["tool_calls"][0]["input"]["code"] = "ran_tampered = True"
    return copy


def crafted_cases() -> list[tuple[str, str, Any, str | None]]:
    """(key, options, saved metadata, the start of the refusal or None when the record loads)."""
    smuggled = [
        {"role": "user", "content": [{"type": "text", "text": "p"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_x", "name": "run_code", "input": {"code": "ran_messages = True"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]  # fmt: skip
    good = record("Case version_2.", tool_calls=[step("ran_schema = True")])
    huge = record("Case huge.", answer="z" * 5_100_000, tool_calls=[step("ran_huge = True")])
    refused = "the saved qloop record"
    digest = "was changed after it was written (digest mismatch)"
    return [
        ("control", "--approve auto", record("Case control.", tool_calls=[step("ran_control = True")]), None),
        ("messages", "--approve auto", record("Case messages.", messages=smuggled), None),
        ("answer", "--approve auto", record("Case answer.", answer="```python\nran_answer = True\n```"), None),
        ("denied", "--approve auto", record("Case denied.", tool_calls=[step("ran_denied = True", "denied")]), None),
        ("readonly_kind", "--approve auto", record("Case readonly_kind.", tool_calls=[step("ran_ro = True", "readonly")]), None),
        ("failed", "--approve auto", record("Case failed.", tool_calls=[step("ran_failed = True", is_error=True)]), None),
        ("other_tool", "--approve auto", record("Case other_tool.", tool_calls=[step("ran_other = True", name="inspect_variable")]), None),
        ("code_not_text", "--approve auto", record("Case code_not_text.", tool_calls=[step(["ran_list = True"])]), None),
        ("version_3", "--approve auto", changed(good, schema_version=3), f"{refused} has schema_version 3"),
        ("version_text", "--approve auto", changed(good, schema_version="1"), f"{refused} has schema_version '1'"),
        ("version_missing", "--approve auto", {k: v for k, v in good.items() if k != "schema_version"}, f"{refused} has schema_version None"),
        ("too_large", "--approve auto", huge, f"{refused} is too large"),
        ("tampered", "--approve auto", tampered(good), f"{refused} {digest}"),
        ("no_digest", "--approve auto", changed(good, digest=""), f"{refused} {digest}"),
        ("zero_digest", "--approve auto", changed(good, digest="sha256:" + "0" * 64), f"{refused} {digest}"),
        ("extra_field", "--approve auto", changed(good, run={"code": "ran_extra = True"}), f"{refused} is invalid"),
        ("not_an_object", "--approve auto", [good], f"{refused} is not an object"),
        # The cell's own text never chooses the policy for hidden code: the kernel's configuration does.
        ("option_ignored", "--approve deny", record("Case option_ignored.", tool_calls=[step("ran_option = True")]), None),
        ("received", "--approve auto", changed(record("Case received.", tool_calls=[step("ran_received = True")]), signature=""), None),
    ]  # fmt: skip


def crafted_notebook() -> nbformat.NotebookNode:
    """One agent cell per crafted case (prompt ``Case KEY.``), then a cell listing what ran."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext qloop_kernel")]
    for key, options, saved, _ in crafted_cases():
        cell = nbformat.v4.new_code_cell(f"%%agent {options}".strip() + f"\nCase {key}.")
        cell.metadata["qloop"] = saved
        nb.cells.append(cell)
    nb.cells.append(
        nbformat.v4.new_code_cell("print(sorted(n for n in dir() if n.startswith('ran_')))")
    )
    return nb


def outputs_text(cell: Any) -> str:
    parts = []
    for output in cell.outputs:
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif output["output_type"] == "error":
            parts.append(f"{output['ename']}: {output['evalue']}\n")
        else:
            parts.append(str(output.get("data", {}).get("text/plain", "")) + "\n")
    return "".join(parts)


@pytest.mark.kernel
def test_crafted_records_run_nothing_but_approved_steps_and_follow_the_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nb = crafted_notebook()
    # A record with nothing to replay (its code steps denied, failed or malformed) is asked again,
    # like a cell without a record; every other case must not reach the model.
    asked_again = ["denied", "readonly_kind", "failed", "code_not_text"]
    with StandInAPI([Reply([text("asked again")]) for _ in asked_again]) as api:
        for name, value in api.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("QLOOP_APPROVAL", "auto")  # the kernel's policy for hidden code
        monkeypatch.delenv("QLOOP_REPLAY_RECEIVED", raising=False)
        client = AgentNotebookClient(
            nb, progress=io.StringIO(), timeout=120, kernel_name="python3", allow_errors=True
        )
        client.execute()
        prompts = [r.body["messages"][-1]["content"][0]["text"] for r in api.requests]
    assert prompts == [f"Case {key}." for key in asked_again]
    assert nb.cells[-1].outputs[0]["text"].strip() == "['ran_control', 'ran_option']"
    cases = crafted_cases()
    shown = {key: outputs_text(cell) for cell, (key, *_) in zip(nb.cells[1:-1], cases, strict=True)}
    for key, _, _, refusal in cases:
        if key == "received":
            continue
        if key in asked_again:
            assert "replaying the saved turn" not in shown[key], key
        elif refusal is None:
            assert "Error" not in shown[key] and "replaying the saved turn" in shown[key], key
        else:
            assert_refused(nb.cells[1 + [c[0] for c in cases].index(key)], refusal)
    assert (
        "AgentError: replay not run: saved step 1 of 1 (`ran_received = True`)" in shown["received"]
    )
    assert "the saved record was received from elsewhere" in shown["received"]
    assert "qloop run --replay-received" in shown["received"]


def assert_refused(cell: Any, refusal: str) -> None:
    """The cell failed with one line on stderr that starts with ``refusal``."""
    text = outputs_text(cell)
    kinds = {(o["output_type"], o.get("name")) for o in cell.outputs}
    assert kinds in ({("stream", "stderr")}, {("error", None)}), text
    assert text.startswith((f"UsageError: {refusal}", f"AgentError: {refusal}")), text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text, text
