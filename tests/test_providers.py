"""Model platforms through the real SDK clients against loopback stand-ins of their wire formats.

Each platform runs a full turn: a streamed tool call, a scripted approval, the tool's result sent
back and a final answer. Bedrock's answers come in the AWS event-stream framing and are decoded by
botocore as in production; Vertex gets an access token through the SDK's ``access_token`` parameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from qloop_kernel.loop import Limits, QueryLoop
from qloop_kernel.messages import Completed, Failed
from qloop_kernel.model import AnthropicModel, RetryPolicy, adapt_params
from qloop_kernel.policy.permissions import ApprovalRequest, Approve, Decision
from qloop_kernel.probe import forget_probes
from qloop_kernel.providers import (
    FULL,
    PROVIDERS,
    Capabilities,
    ProviderError,
    build_client,
    missing_setting,
    model_id,
    provider_from,
)
from qloop_kernel.settings import Settings, SettingsError, settings_from
from qloop_kernel.testing import Fault, Reply, StreamError, text, tool_use
from qloop_kernel.testing.platforms import PlatformStandIn, chunk_frame, event_stream_frame
from qloop_kernel.tools.runtime import Tool, ToolRuntime

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=5.0, read_timeout_s=5.0)
MODEL = "claude-sonnet-4-6"
TOKEN = "platform-token-123"


@pytest.fixture(autouse=True)
def _platform_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing is looked up outside the test: no AWS metadata, profile files or shared config."""
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL",
                 "ANTHROPIC_VERTEX_BASE_URL", "ANTHROPIC_FOUNDRY_BASE_URL",
                 "ANTHROPIC_FOUNDRY_RESOURCE", "ANTHROPIC_FOUNDRY_API_KEY"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    forget_probes()
    yield
    forget_probes()


class ScriptedApprover:
    """Approves every call and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return Approve()


ran: list[str] = []


def run_code(code: str) -> str:
    """Run Python code in the notebook."""
    ran.append(code)
    return "42"


def turn_script() -> list[Reply]:
    return [
        Reply([text("Computing."), tool_use("run_code", {"code": "6 * 7"})]),
        Reply([text("The answer is 42.")]),
    ]


def model_for(server: PlatformStandIn, **extra: Any) -> AnthropicModel:
    platform = server.platform
    options: dict[str, Any] = {"base_url": server.base_url}
    if platform == "vertex":
        options.update(region="us-east5", project_id="proj-1", access_token=TOKEN)
    elif platform == "bedrock":
        options.update(aws_region="us-east-1", api_key=TOKEN)
    elif platform == "foundry":
        options.update(api_key=TOKEN)
    return AnthropicModel(MODEL, provider=platform, retry=FAST, strict=True,
                          client_options=options, **extra)  # fmt: skip


def full_turn(server: PlatformStandIn, **extra: Any) -> tuple[Any, ScriptedApprover]:
    ran.clear()
    approver = ScriptedApprover()
    tool = Tool.from_function(run_code, requires_approval=True)
    runtime = ToolRuntime.of([tool], approver)
    with model_for(server, **extra) as model:
        model.capability_notes()
        result = QueryLoop(model, runtime, system="s", limits=Limits(max_turns=4)).run(
            [{"role": "user", "content": "What is 6 * 7?"}]
        )
    return result, approver


@pytest.mark.parametrize("platform", ["vertex", "bedrock", "foundry", "compatible"])
def test_a_full_turn_with_a_tool_call_and_an_approval_on_each_platform(platform: str) -> None:
    token = None if platform == "compatible" else TOKEN
    with PlatformStandIn(turn_script(), platform=platform, token=token) as server:  # type: ignore[arg-type]
        result, approver = full_turn(server)
        turn = [r for r in server.requests if "x-qloop-probe" not in r.headers]
    assert isinstance(result.stop, Completed), result.stop
    assert result.final_text == "The answer is 42."
    assert ran == ["6 * 7"]
    assert [a.call.name for a in approver.asked] == ["run_code"]
    assert len(turn) == 2 and all(r.status == 200 for r in turn)
    sent_back = turn[1].body["messages"][-1]["content"]
    assert sent_back[0]["type"] == "tool_result" and "42" in str(sent_back[0]["content"])
    assert result.usage.output_tokens > 0


def test_each_platform_is_reached_at_its_own_path() -> None:
    paths = {}
    for platform in ("vertex", "bedrock", "foundry"):
        with PlatformStandIn(turn_script(), platform=platform, token=TOKEN) as server:  # type: ignore[arg-type]
            full_turn(server)
            paths[platform] = server.requests[0].path
    assert paths == {
        "vertex": f"/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/{MODEL}"
        ":streamRawPredict",
        "bedrock": "/model/anthropic.claude-sonnet-4-6/invoke-with-response-stream",
        "foundry": "/anthropic/v1/messages",
    }


def test_a_wrong_platform_credential_is_a_clean_error_not_a_retry() -> None:
    for platform in ("vertex", "bedrock", "foundry"):
        with PlatformStandIn(turn_script(), platform=platform, token="other") as server:  # type: ignore[arg-type]
            result, approver = full_turn(server)
            assert isinstance(result.stop, Failed), (platform, result.stop)
            assert "401" in result.stop.message
            assert len(server.requests) == 1  # not retried
            assert approver.asked == [] and ran == []


def test_bedrock_throttling_is_retried_and_a_validation_exception_mid_stream_is_not() -> None:
    script = [Fault(429, "rate_limit_error", "Too many requests", retry_after=0.01), *turn_script()]
    with PlatformStandIn(script, platform="bedrock", token=TOKEN) as server:
        result, _ = full_turn(server)
        assert isinstance(result.stop, Completed), result.stop
        assert [r.status for r in server.requests] == [429, 200, 200]
    broken = Reply([text("x" * 50)], stream_fault=StreamError(3, "invalid_request_error", "bad input"))  # fmt: skip
    with PlatformStandIn([broken, *turn_script()], platform="bedrock", token=TOKEN) as server:
        result, _ = full_turn(server)
        assert isinstance(result.stop, Failed)
        assert "validationException" in result.stop.message
        assert len(server.requests) == 1
    overloaded = Reply([text("x" * 50)], stream_fault=StreamError(3, "overloaded_error", "busy"))  # fmt: skip
    with PlatformStandIn([overloaded, *turn_script()], platform="bedrock", token=TOKEN) as server:
        result, _ = full_turn(server)
        assert isinstance(result.stop, Completed), result.stop
        assert len(server.requests) == 3


def test_vertex_quota_exhaustion_is_retried() -> None:
    script = [Fault(429, "rate_limit_error", "Quota exceeded", retry_after=0.01), *turn_script()]
    with PlatformStandIn(script, platform="vertex", token=TOKEN) as server:
        result, _ = full_turn(server)
        assert isinstance(result.stop, Completed), result.stop
        assert [r.status for r in server.requests] == [429, 200, 200]


def test_the_compatible_probe_switches_off_what_the_server_lacks() -> None:
    with PlatformStandIn(turn_script(), platform="compatible") as server:
        with model_for(server) as model:
            notes = model.capability_notes()
            assert model.capability_notes() == []  # probed once
        assert model.capabilities == FULL.without("prompt_caching", "thinking", "token_counting")
        assert len(notes) == 1
        assert "prompt_caching, thinking, token_counting: switched off" in notes[0]
        assert server.remaining == 2  # the probes used no scripted reply
        result, _ = full_turn(server)  # a second model on the same URL reuses the probe
        assert isinstance(result.stop, Completed), result.stop
        assert len(server.probes) == 6
        turn = [r for r in server.requests if "x-qloop-probe" not in r.headers]
    assert all("cache_control" not in str(r.body) for r in turn)


def test_a_compatible_server_without_streaming_or_images_still_runs_the_turn() -> None:
    lacks = ("streaming", "images", "prompt_caching", "thinking", "token_counting")
    with PlatformStandIn(turn_script(), platform="compatible", lacks=lacks) as server:
        with model_for(server) as model:
            model.capability_notes()
        assert model.capabilities == Capabilities(
            streaming=False, images=False, prompt_caching=False, thinking=False,
            token_counting=False,
        )  # fmt: skip
        result, approver = full_turn(server)
        turn = [r for r in server.requests if "x-qloop-probe" not in r.headers]
    assert isinstance(result.stop, Completed), result.stop
    assert result.final_text == "The answer is 42."
    assert len(approver.asked) == 1 and ran == ["6 * 7"]
    assert [r.stream for r in turn] == [False, False] and all(r.status == 200 for r in turn)


def test_adapt_params_drops_what_is_switched_off() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    params = {
        "model": "m",
        "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "s"},
                                              {"type": "tool_use", "id": "t1", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [image]}]},
        ],
    }  # fmt: skip
    assert adapt_params(params, FULL) is params
    out = adapt_params(params, Capabilities(prompt_caching=False, thinking=False, images=False))
    assert "cache_control" not in str(out)
    assert [b["type"] for b in out["messages"][0]["content"]] == ["tool_use"]
    assert out["messages"][1]["content"][0]["content"][0]["type"] == "text"
    assert "cache_control" in str(params)  # the input is not changed
    assert "tools" not in adapt_params(params, Capabilities(tools=False))


def test_event_stream_frames_decode_with_botocore() -> None:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(chunk_frame({"type": "ping"}) + event_stream_frame({":a": "b"}, b"{}"))
    frames = list(buffer)
    assert [f.headers.get(":event-type") for f in frames] == ["chunk", None]


def test_provider_names_and_model_ids() -> None:
    assert provider_from(" Bedrock ") == "bedrock"
    with pytest.raises(ProviderError, match="is not one of anthropic, bedrock"):
        provider_from("azure")
    assert model_id("bedrock", "claude-sonnet-4-6") == "anthropic.claude-sonnet-4-6"
    assert model_id("bedrock", "global.anthropic.claude-x") == "global.anthropic.claude-x"
    assert model_id("vertex", "claude-haiku-4-5") == "claude-haiku-4-5@20251001"
    assert model_id("foundry", "claude-sonnet-4-6") == "claude-sonnet-4-6"


@pytest.mark.parametrize(
    ("provider", "env", "names"),
    [
        ("anthropic", {}, "ANTHROPIC_API_KEY"),
        ("bedrock", {}, "AWS_REGION"),
        ("vertex", {}, "CLOUD_ML_REGION"),
        ("foundry", {}, "ANTHROPIC_FOUNDRY_RESOURCE"),
        ("foundry", {"ANTHROPIC_FOUNDRY_RESOURCE": "r"}, "ANTHROPIC_FOUNDRY_API_KEY"),
        ("compatible", {}, "ANTHROPIC_BASE_URL"),
    ],
)
def test_a_missing_setting_is_one_line_naming_it(
    provider: str, env: dict[str, str], names: str
) -> None:
    line = missing_setting(provider, env)  # type: ignore[arg-type]
    assert line is not None and names in line and "\n" not in line


def test_ready_platforms_need_nothing_more() -> None:
    assert missing_setting("bedrock", {"AWS_REGION": "us-east-1"}) is None
    assert missing_setting("foundry", {"ANTHROPIC_FOUNDRY_RESOURCE": "r",
                                       "ANTHROPIC_FOUNDRY_API_KEY": "k"}) is None  # fmt: skip
    assert missing_setting("compatible", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}) is None


def test_a_client_that_cannot_be_built_is_one_line() -> None:
    import anthropic

    with pytest.raises(ProviderError, match="provider vertex: .*region"):
        build_client(anthropic, "vertex", options={"region": ""})


def test_the_provider_setting_from_config_and_environment() -> None:
    assert Settings().provider == "anthropic"
    assert settings_from({}, {"QLOOP_PROVIDER": "Vertex"}).provider == "vertex"
    assert (
        settings_from({"provider": "bedrock"}, {"QLOOP_PROVIDER": "vertex"}).provider == "bedrock"
    )
    with pytest.raises(SettingsError, match="QLOOP_PROVIDER"):
        settings_from({}, {"QLOOP_PROVIDER": "azure"})
    assert set(PROVIDERS) == {"anthropic", "bedrock", "vertex", "foundry", "compatible"}


def test_a_refused_platform_credential_names_the_platforms_own_sources() -> None:
    with PlatformStandIn(turn_script(), platform="bedrock", token="other") as server:
        result, _ = full_turn(server)
    assert isinstance(result.stop, Failed)
    assert "AWS_PROFILE" in result.stop.message and "ANTHROPIC_API_KEY" not in result.stop.message


def test_cost_is_unknown_on_a_platform_without_a_published_price() -> None:
    from qloop_kernel.errors import UnknownModelPrice

    assert Settings().resolved_price("claude-sonnet-4-6") is not None  # first-party table
    on_bedrock = Settings(provider="bedrock")
    assert on_bedrock.resolved_price("anthropic.claude-sonnet-4-6") is None
    with pytest.raises(UnknownModelPrice, match="on bedrock.*%agent price"):
        on_bedrock.updated(max_cost=1.0).resolved_price("claude-sonnet-4-6")
    priced = on_bedrock.updated(price=(3.0, 15.0), max_cost=1.0)
    assert priced.resolved_price("claude-sonnet-4-6") is not None
    assert Settings(provider="compatible").resolved_price("llama") is None


def test_the_default_model_maps_to_its_bedrock_inference_profile() -> None:
    assert model_id("bedrock", "claude-sonnet-5-5") == "global.anthropic.claude-sonnet-5-5"
    with PlatformStandIn(turn_script(), platform="bedrock", token=TOKEN) as server:
        ran.clear()
        runtime = ToolRuntime.of([Tool.from_function(run_code)], ScriptedApprover())
        options = {"base_url": server.base_url, "aws_region": "us-east-1", "api_key": TOKEN}
        with AnthropicModel("claude-sonnet-5-5", provider="bedrock", retry=FAST,
                            client_options=options) as model:  # fmt: skip
            result = QueryLoop(model, runtime, system="s").run([{"role": "user", "content": "q"}])
        assert isinstance(result.stop, Completed), result.stop
        assert server.requests[0].path == (
            "/model/global.anthropic.claude-sonnet-5-5/invoke-with-response-stream"
        )


class FakeGoogleCredentials:
    """What the SDK's Vertex client reads of google-auth credentials: a token, not expired."""

    token = TOKEN
    expired = False

    def refresh(self, request: Any) -> None:
        raise AssertionError("a valid token is not refreshed")


def test_vertex_takes_a_credentials_object_through_the_sdks_parameter() -> None:
    with PlatformStandIn(turn_script(), platform="vertex", token=TOKEN) as server:
        options = {"base_url": server.base_url, "region": "europe-west1", "project_id": "p-2",
                   "credentials": FakeGoogleCredentials()}  # fmt: skip
        runtime = ToolRuntime.of([Tool.from_function(run_code)], ScriptedApprover())
        with AnthropicModel(MODEL, provider="vertex", retry=FAST, client_options=options) as model:
            result = QueryLoop(model, runtime, system="s").run([{"role": "user", "content": "q"}])
        assert isinstance(result.stop, Completed), result.stop
        assert "/locations/europe-west1/" in server.requests[0].path


def test_a_compatible_server_that_refuses_the_key_fails_the_probe_in_one_line() -> None:
    with PlatformStandIn(turn_script(), platform="compatible", token="needed") as server:
        with model_for(server) as model, pytest.raises(ProviderError) as refused:
            model.capability_notes()
        assert server.remaining == 2
    assert "refused the capability probe (401)" in str(refused.value)
    assert "\n" not in str(refused.value)
