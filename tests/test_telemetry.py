"""Audit traces: every turn, model call and decision as OTLP spans (GenAI semantic conventions), sent
to a real OTLP/HTTP receiver on loopback; from the loop in this process, from a real kernel driven
like JupyterLab (a turn, an approved and a denied step, a replay), and from the Jupyter server for an
outside agent's calls. No secret and no content leave without content capture; redacted content with
it. Without an endpoint nothing of OpenTelemetry's SDK is imported and nothing is sent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.conversation import ConversationManager
from qloop_kernel.policy.admin import ADMIN_ENV, AdminFloor, admin_floor
from qloop_kernel.policy.permissions import ApprovalPolicy, Approve, Deny
from qloop_kernel.policy.risk import Assessment, Reason
from qloop_kernel.settings import Settings
from qloop_kernel.telemetry import CAPTURE_ENV, trace_config
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import Tool, ToolRuntime
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

FAKE_KEY = "sk-ant-api03-telemetry0test0key0value0abcdefghijklmnop0123456789"
HELD_KEY = "sk-ant-api03-held0in0a0variable0zyxwvutsrqponmlkjih0987654321"
TRACES_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def no_admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jupyter_core.paths

    monkeypatch.setattr(jupyter_core.paths, "SYSTEM_CONFIG_PATH", [str(tmp_path / "etc")])
    monkeypatch.setattr(jupyter_core.paths, "ENV_CONFIG_PATH", [str(tmp_path / "env")])
    monkeypatch.delenv(ADMIN_ENV, raising=False)
    for name in (TRACES_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT", CAPTURE_ENV, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)


def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> AdminFloor:
    path = tmp_path / f"admin-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(settings), encoding="utf-8")
    with monkeypatch.context() as patched:
        patched.setenv(ADMIN_ENV, str(path))
        return admin_floor()


def by_name(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


# --- where traces go, and whether they carry content ---------------------------------------------


def test_the_endpoint_and_content_capture_come_from_the_admin_first_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_admin: None
) -> None:
    none = AdminFloor()
    assert trace_config({}, none) is None  # nothing configured: no traces
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert trace_config(base, none).endpoint == "http://collector:4318/v1/traces"  # type: ignore[union-attr]
    signal = {**base, TRACES_ENV: "http://traces.example/custom"}
    assert trace_config(signal, none).endpoint == "http://traces.example/custom"  # type: ignore[union-attr]
    assert trace_config({**signal, "OTEL_SDK_DISABLED": "true"}, none) is None
    assert trace_config(signal, none).capture_content is False  # type: ignore[union-attr]
    assert trace_config({**signal, CAPTURE_ENV: "true"}, none).capture_content is True  # type: ignore[union-attr]
    # The admin's endpoint wins over the user's environment; its capture setting binds both ways.
    floor = admin(tmp_path, monkeypatch, otel_endpoint="http://audit:4318", capture_content=False)
    found = trace_config({**signal, CAPTURE_ENV: "true", "OTEL_SDK_DISABLED": "true"}, floor)
    assert found is not None
    assert (found.endpoint, found.capture_content) == ("http://audit:4318/v1/traces", False)
    floor = admin(
        tmp_path, monkeypatch, otel_endpoint="http://audit:4318/v1/traces", capture_content=True
    )
    assert trace_config({}, floor) == trace_config({CAPTURE_ENV: "false"}, floor)
    assert trace_config({}, floor).capture_content is True  # type: ignore[union-attr]
    floor = admin(
        tmp_path, monkeypatch, capture_content=True
    )  # content on, but no endpoint: nothing is sent
    assert trace_config({}, floor) is None


def test_with_no_endpoint_a_turn_imports_nothing_of_opentelemetry(tmp_path: Path) -> None:
    program = """
import sys
from qloop_kernel.conversation import ConversationManager
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.settings import Settings
from qloop_kernel.testing.script import text
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import ToolRuntime
result, _ = ConversationManager().run_turn(
    "hi", model=ScriptedModel([respond(text("hello"))]), runtime=ToolRuntime.of([], AutoApprover()),
    settings=Settings())
print(result.status, sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env[ADMIN_ENV] = ""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.stdout.strip() == "completed []", done.stderr


def test_without_the_sdk_a_configured_endpoint_is_said_once_and_the_turn_runs(
    tmp_path: Path,
) -> None:
    program = """
import logging, sys
sys.modules["opentelemetry.sdk"] = None  # as if qloop-kernel[otel] were not installed
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
from qloop_kernel.conversation import ConversationManager
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.settings import Settings
from qloop_kernel.testing.script import text
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import ToolRuntime
manager = ConversationManager()
for _ in range(2):
    result, _ = manager.run_turn(
        "hi", model=ScriptedModel([respond(text("hello"))]),
        runtime=ToolRuntime.of([], AutoApprover()), settings=Settings())
    print(result.status)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({ADMIN_ENV: "", TRACES_ENV: "http://127.0.0.1:9/v1/traces"})
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.stdout.split() == ["completed", "completed"], done.stderr
    assert done.stderr.count("qloop.telemetry: traces are configured") == 1, done.stderr
    assert "pip install 'qloop-kernel[otel]'" in done.stderr


# --- a turn in this process -----------------------------------------------------------------------


def set_flag(name: str) -> str:
    """Set a flag.

    Args:
        name: the flag's name
    """
    return f"set {name}"


def look(name: str) -> str:
    """Look at a flag.

    Args:
        name: the flag's name
    """
    return f"{name} is up"


def write_class(_: dict[str, Any]) -> Assessment:
    return Assessment("write", (Reason(1, "write", "sets a flag"),), frozenset())


class Person:
    """Approves the first call it is asked about and denies the next ones."""

    def __init__(self) -> None:
        self.asked = 0

    def decide(self, request: Any) -> Approve | Deny:
        self.asked += 1
        return Approve() if self.asked == 1 else Deny("not that one")


def turn(monkeypatch: pytest.MonkeyPatch, receiver: OtlpReceiver, *, capture: bool) -> str:
    monkeypatch.setenv(TRACES_ENV, receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv(CAPTURE_ENV, "true" if capture else "false")
    monkeypatch.setenv("JPY_SESSION_NAME", "work/analysis.ipynb")
    tools = [Tool.from_function(set_flag, classify=write_class), Tool.from_function(look,
             requires_approval=False)]  # fmt: skip
    runtime = ToolRuntime.of(tools, Person(), policy=ApprovalPolicy("ask"))
    model = ScriptedModel([
        respond(tool_use("set_flag", {"name": "ready"}, id="call_1"),
                tool_use("set_flag", {"name": f"key {HELD_KEY}"}, id="call_2")),
        respond(tool_use("look", {"name": "ready"}, id="call_3")),
        respond(text(f"Done; the key was {HELD_KEY}.")),
    ])  # fmt: skip
    manager = ConversationManager()
    result, _ = manager.run_turn(
        f"Set the flags. My key is {FAKE_KEY}", model=model, runtime=runtime,
        settings=Settings(), cell_id="cell-1",
    )  # fmt: skip
    assert result.status == "completed"
    return manager.session_id


def test_a_turn_is_a_trace_of_its_model_calls_and_decisions(
    monkeypatch: pytest.MonkeyPatch, receiver: OtlpReceiver, no_admin: None
) -> None:
    session = turn(monkeypatch, receiver, capture=False)
    spans = receiver.wait_for(lambda found: len(found) == 7)
    [agent] = by_name(spans, "invoke_agent qloop")
    chats = by_name(spans, "chat claude-sonnet-5-5")
    tools = sorted(by_name(spans, "execute_tool set_flag") + by_name(spans, "execute_tool look"),
                   key=lambda s: s.start_ns)  # fmt: skip
    assert len(chats) == 3 and len(tools) == 3
    assert agent.parent_id == "" and agent.kind == 1
    assert all(s.trace_id == agent.trace_id and s.parent_id == agent.span_id for s in chats + tools)
    assert agent.attributes == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "qloop",
        "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5-5",
        "gen_ai.conversation.id": session, "qloop.cell_id": "cell-1",
        "qloop.notebook": "work/analysis.ipynb", "qloop.stop_reason": "completed",
        "qloop.model_calls": 3, "qloop.steps": 3, "qloop.cost_usd": agent.attributes["qloop.cost_usd"],
        "gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 60,
        "gen_ai.usage.cache_read.input_tokens": 0, "gen_ai.usage.cache_creation.input_tokens": 0,
    }  # fmt: skip
    assert agent.attributes["qloop.cost_usd"] > 0
    first = min(chats, key=lambda s: s.start_ns)
    assert first.kind == 3 and first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.response.model"] == "scripted"
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first.attributes["gen_ai.usage.input_tokens"] == 100
    assert first.attributes["gen_ai.request.max_tokens"] == 8192
    assert first.attributes["qloop.cost_usd"] == pytest.approx(
        agent.attributes["qloop.cost_usd"] / 3
    )
    decided = [(s.attributes["gen_ai.tool.call.id"], s.attributes["qloop.decision"],
                s.attributes["qloop.decided_by"], s.attributes.get("qloop.risk_class"))
               for s in tools]  # fmt: skip
    assert decided == [
        ("call_1", "approved", "person", "write"),
        ("call_2", "denied", "person", "write"),
        ("call_3", "readonly", "policy", None),
    ]
    assert tools[0].attributes["gen_ai.tool.type"] == "function"
    assert tools[0].status == 0 and tools[1].status == 0  # a denial is a decision, not an error
    assert {s.resource["service.name"] for s in spans} == {"qloop-kernel"}
    # No content without capture: no prompt, input, result or answer, and no secret.
    raw = receiver.raw()
    for absent in (FAKE_KEY, HELD_KEY, "Set the flags", "ready", "not that one", "Done"):
        assert absent.encode() not in raw
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg",
                                 "gen_ai.tool.call.result")) for s in spans for k in s.attributes)  # fmt: skip


def test_captured_content_is_redacted(
    monkeypatch: pytest.MonkeyPatch, receiver: OtlpReceiver, no_admin: None
) -> None:
    turn(monkeypatch, receiver, capture=True)
    spans = receiver.wait_for(lambda found: len(found) == 7)
    [agent] = by_name(spans, "invoke_agent qloop")
    prompt = json.loads(agent.attributes["gen_ai.input.messages"])
    assert prompt == [{"role": "user", "parts": [
        {"type": "text", "content": "Set the flags. My key is [REDACTED]"}]}]  # fmt: skip
    answer = json.loads(agent.attributes["gen_ai.output.messages"])
    assert answer[0]["parts"][0]["content"] == "Done; the key was [REDACTED]."
    chat = min(by_name(spans, "chat claude-sonnet-5-5"), key=lambda s: s.start_ns)
    output = json.loads(chat.attributes["gen_ai.output.messages"])
    assert output[0]["parts"][1] == {"type": "tool_call", "id": "call_2", "name": "set_flag",
                                     "arguments": {"name": "key [REDACTED]"}}  # fmt: skip
    [denied] = [s for s in by_name(spans, "execute_tool set_flag")
                if s.attributes["gen_ai.tool.call.id"] == "call_2"]  # fmt: skip
    assert json.loads(denied.attributes["gen_ai.tool.call.arguments"]) == {"name": "key [REDACTED]"}
    assert json.loads(denied.attributes["qloop.decision.reason"]) == "not that one"
    assert FAKE_KEY.encode() not in receiver.raw() and HELD_KEY.encode() not in receiver.raw()


# --- a real kernel: a turn with an approved and a denied step, then a replay --------------------


def kernel_env(api: StandInAPI, receiver: OtlpReceiver, **extra: str) -> dict[str, str]:
    env = api.environment(api_key=FAKE_KEY)
    env.pop(ADMIN_ENV, None)
    return {**env, TRACES_ENV: receiver.url, **extra}


@pytest.mark.kernel
def test_a_kernels_turn_and_replay_are_traced_and_flushed_when_the_kernel_exits(
    api: StandInAPI, receiver: OtlpReceiver
) -> None:
    api.reset()
    api.set_script([
        Reply([tool_use("run_code", {"code": "total = 41 + 1"})]),
        Reply([tool_use("run_code", {"code": "print(token)"})]),
        Reply([text("total is 42")]),
    ])  # fmt: skip
    lab = LabKernel(kernel_env(api, receiver)).start()
    try:
        lab.run(f"%load_ext qloop_kernel\ntoken = {HELD_KEY!r}")
        cell = lab.execute("%%agent\nAdd up.", cell_id="traced")
        first_deny = lab.wait_for_button("Deny", parent=cell)
        lab.click(lab.wait_for_button("Approve", parent=cell))
        lab.click(lab.wait_for_button("Deny", parent=cell, exclude={first_deny}))
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
        saved = saved_record(lab, cell)
        lab.run("del total")
        again = lab.execute("%%agent\nAdd up.", cell_id="traced", metadata={"qloop": saved})
        lab.click(lab.wait_for_button("Approve", parent=again))
        assert lab.complete(again, 60)["content"]["status"] == "ok"
        assert lab.run("print(total)").strip() == "42"
        assert receiver.spans() == []  # batched: nothing was sent while the turn ran
        lab.request("shutdown_request", {"restart": False}, channel="control")
        lab.wait_for(lambda: not lab.is_alive(), 20, "the kernel's exit")  # it sends what is queued
    finally:
        lab.shutdown()
    spans = receiver.wait_for(lambda found: len(found) == 8, timeout=5)
    agents = sorted(by_name(spans, "invoke_agent qloop"), key=lambda s: s.start_ns)
    turn_span, replay_span = agents
    steps = [s for s in by_name(spans, "execute_tool run_code") if s.parent_id == turn_span.span_id]
    decided = [(s.attributes["qloop.decision"], s.attributes["qloop.decided_by"],
                s.attributes["qloop.risk_class"]) for s in sorted(steps, key=lambda s: s.start_ns)]  # fmt: skip
    assert decided == [("approved", "person", "write"), ("denied", "person", "read")]
    assert len([s for s in spans if s.name.startswith("chat ")]) == 3
    assert turn_span.attributes["gen_ai.conversation.id"] == replay_span.attributes[
        "gen_ai.conversation.id"]  # fmt: skip
    assert replay_span.attributes["qloop.replay"] is True
    assert (replay_span.attributes["qloop.decision"], replay_span.attributes["qloop.decided_by"]) == (
        "approved", "person")  # fmt: skip
    [rerun] = [s for s in spans if s.parent_id == replay_span.span_id]
    assert (rerun.attributes["qloop.decided_by"], rerun.attributes["qloop.risk_class"]) == (
        "replay", "write")  # fmt: skip
    assert rerun.attributes["gen_ai.tool.call.id"] == saved["tool_calls"][0]["id"]
    raw = receiver.raw()
    for absent in (FAKE_KEY, HELD_KEY, "41 + 1", "Add up", "total is 42"):
        assert absent.encode() not in raw


@pytest.mark.kernel
def test_with_no_endpoint_a_kernels_turn_loads_no_opentelemetry_sdk(api: StandInAPI) -> None:
    api.reset()
    api.set_script([Reply([text("hello")])])
    env = {k: v for k, v in api.environment().items() if not k.startswith("OTEL_")}
    with LabKernel(env) as lab:
        lab.run("%load_ext qloop_kernel")
        assert lab.complete(lab.execute("%%agent\nHi.", cell_id="plain"), 60)["content"][
            "status"] == "ok"  # fmt: skip
        # anthropic's SDK imports the OpenTelemetry API (a no-op without an SDK); qloop loads no more
        loaded = lab.run(
            "import sys\nprint(sorted({m.split('.')[1] for m in sys.modules "
            "if m.startswith('opentelemetry.')}))"
        )
        assert not {"sdk", "exporter", "proto"} & set(eval(loaded.strip())), loaded


# --- an outside agent's call, through the Jupyter server ------------------------------------------


@pytest.mark.timeout(240)
def test_an_outside_agents_calls_are_traced_in_the_jupyter_server(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    from tests.jupyter_server import Page, jupyter_server
    from tests.test_mcp_server import call, session

    env = {TRACES_ENV: receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50", "ANTHROPIC_API_KEY": FAKE_KEY}
    with jupyter_server(tmp_path / "root", env=env) as server:
        path = server.open_notebook(f"nb-{uuid.uuid4().hex[:8]}.ipynb")

        async def scenario() -> None:
            async with session(server, "audited-agent") as client:
                refused = await call(client, "run_code", path=path, code="nobody = 1")
                assert refused.is_error  # no page shows the notebook
                answers = iter([{"decision": "approve", "reason": ""},
                                {"decision": "deny", "reason": "no"}])  # fmt: skip
                page = Page(server, path, lambda card: next(answers))
                async with page.open():
                    ran = await call(client, "run_code", path=path, code=f"kept = {HELD_KEY!r}")
                    assert not ran.is_error
                    denied = await call(client, "run_code", path=path, code="import os")
                    assert denied.is_error

        asyncio.run(scenario())
        spans = receiver.wait_for(lambda found: len(found) == 3)
    decided = [(s.attributes["qloop.decision"], s.attributes["qloop.decided_by"])
               for s in sorted(spans, key=lambda s: s.start_ns)]  # fmt: skip
    assert decided == [("denied", "policy"), ("approved", "person"), ("denied", "person")]
    for span in spans:
        assert span.name == "execute_tool run_code" and span.parent_id == ""
        assert span.attributes["qloop.outside"] is True
        assert span.attributes["gen_ai.agent.name"] == "audited-agent"
        assert span.attributes["qloop.notebook"] == path
        assert span.attributes["gen_ai.conversation.id"]  # the MCP session the server issued
    assert len({s.attributes["gen_ai.conversation.id"] for s in spans}) == 1
    assert FAKE_KEY.encode() not in receiver.raw() and HELD_KEY.encode() not in receiver.raw()
    assert b"nobody = 1" not in receiver.raw()
