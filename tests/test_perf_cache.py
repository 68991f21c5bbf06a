"""Cache breakpoints where a prefix can be cached, and within the API's 20-block lookback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qloop_kernel.loop import Limits, QueryLoop
from qloop_kernel.messages import ModelRequest
from qloop_kernel.model import AnthropicModel, build_params, cache_minimum
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.testing.tokens import prompt_segments
from qloop_kernel.tools.runtime import Tool, ToolRuntime

USER = [{"role": "user", "content": [{"type": "text", "text": "Check every column."}]}]
TOOL = {"name": "describe", "description": "Describe a column.", "input_schema": {"type": "object"}}


def describe(name: str) -> str:
    """Describe a column."""
    return f"{name}: " + "count 1000, mean 12.5, std 3.1, min 1.0, max 30.0; " * 12


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server


def marks(params: dict) -> list[str]:
    found = [f"tools[{i}]" for i, t in enumerate(params["tools"]) if "cache_control" in t]
    found += [
        f"system[{i}]" for i, b in enumerate(params.get("system", [])) if "cache_control" in b
    ]
    for i, message in enumerate(params["messages"]):
        found += [f"messages[{i}][{j}]" for j, b in enumerate(message["content"])
                  if "cache_control" in b]  # fmt: skip
    return found


def test_short_stable_prefixes_get_no_breakpoint_and_long_ones_do() -> None:
    short = ModelRequest(messages=USER, tools=[TOOL], system="Be brief.", max_tokens=64)
    assert marks(build_params("claude-sonnet-5-5", short)) == []  # nothing reaches 1,024 tokens
    long_system = ModelRequest(messages=USER, tools=[TOOL], system="s" * 6000, max_tokens=64)
    assert marks(build_params("claude-sonnet-5-5", long_system)) == ["system[0]", "messages[0][0]"]
    # Haiku 5.5 caches from 4,096 tokens: the same prompt is too short there
    assert marks(build_params("claude-haiku-5-5", long_system)) == []
    assert cache_minimum("claude-opus-5-5") == 512 and cache_minimum("some-new-model") == 1024


def test_a_newest_exchange_longer_than_the_lookback_gets_bridging_breakpoints() -> None:
    calls = [
        {"type": "tool_use", "id": f"t{i}", "name": "describe", "input": {}} for i in range(15)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 400} for i in range(15)
    ]
    messages = [
        *USER,
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]
    request = ModelRequest(messages=messages, tools=[TOOL], system="s" * 6000, max_tokens=64)
    found = marks(build_params("claude-sonnet-5-5", request))
    assert found == ["system[0]", "messages[2][3]", "messages[2][14]"]  # 19 blocks apart, then last
    assert len(found) <= 4


def test_parallel_tool_calls_still_read_the_previous_prefix(api: StandInAPI) -> None:
    """Twelve calls at once make a 25-block exchange: its request reads what the previous wrote."""
    runtime = ToolRuntime.of(
        [Tool.from_function(describe, requires_approval=False)], AutoApprover()
    )
    many = [tool_use("describe", {"name": f"c{i}"}) for i in range(12)]
    api.set_script([Reply([text("First one column."), tool_use("describe", {"name": "a"})]),
                    Reply([text("Now all the others."), *many]), Reply([text("All clean.")])])  # fmt: skip
    result = QueryLoop(AnthropicModel("claude-sonnet-5-5"), runtime, system="s" * 6000,
                       limits=Limits(max_turns=5)).run(USER)  # fmt: skip
    assert result.status == "completed"
    usage = api.requests[2].usage
    previous = api.requests[1].usage
    written_before = previous["cache_read_input_tokens"] + previous["cache_creation_input_tokens"]
    assert usage["cache_read_input_tokens"] >= written_before  # the whole previous prompt was read


def summarize(name: str) -> str:
    """Summarize a column (about 500 tokens, as a real column summary)."""
    return describe(name) * 3


def shared_prefix_ceiling(bodies: list[dict], minimum: int) -> list[int]:
    """Per request, its longest prefix shared with an earlier one that reaches ``minimum``."""
    chains = [[(s.digest, s.tokens) for s in prompt_segments(body)] for body in bodies]
    ceilings = []
    for n, chain in enumerate(chains):
        best = 0
        for earlier in chains[:n]:
            shared = 0
            for (digest, tokens), (other, _) in zip(chain, earlier, strict=False):
                if digest != other:
                    break
                shared += tokens
            best = max(best, shared if shared >= minimum else 0)
        ceilings.append(best)
    return ceilings


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-haiku-5-5"])
def test_every_request_reads_all_that_any_breakpoints_could(api: StandInAPI, model: str) -> None:
    """The first requests are below the minimum (nothing of them is ever cached); every later one
    reads the whole prefix it shares with the one before: no placement could read more."""
    runtime = ToolRuntime.of(
        [Tool.from_function(summarize, requires_approval=False)], AutoApprover()
    )
    steps = [Reply([text(f"Column c{i}."), tool_use("summarize", {"name": f"c{i}"})])
             for i in range(14)]  # fmt: skip
    api.set_script([*steps, Reply([text("All clean.")])])
    result = QueryLoop(AnthropicModel(model), runtime, system="Profile the frame.",
                       limits=Limits(max_turns=20)).run(USER)  # fmt: skip
    assert result.status == "completed" and result.model_calls == 15
    minimum = cache_minimum(model)
    ceilings = shared_prefix_ceiling([r.body for r in api.requests], minimum)
    reads = [r.usage["cache_read_input_tokens"] for r in api.requests]
    assert reads == ceilings
    assert ceilings[:2] == [0, 0] and ceilings[-1] > 0  # too short at first, then read
