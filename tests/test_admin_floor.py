"""The admin floor: read from the system-wide Jupyter config folders and QLOOP_ADMIN_CONFIG, applied to
settings, the permission pipeline, MCP servers, redaction and outside agents; a user's config, the
environment, a cell's options and a notebook's saved grants cannot go below it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jupyter_core.paths
import pytest

from qloop_kernel.effective import effective_lines
from qloop_kernel.mcp.config import Configured, ServerConfig, admitted
from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.admin import ADMIN_ENV, AdminError, admin_floor, admin_paths
from qloop_kernel.policy.grants import Grant, Grants
from qloop_kernel.policy.permissions import ApprovalPolicy, ApprovalRequest, Approve, Deny
from qloop_kernel.policy.pipeline import PermissionPipeline
from qloop_kernel.policy.risk import Assessment
from qloop_kernel.redact import redact_shapes, redact_text
from qloop_kernel.settings import SettingsError, settings_from
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import saved_record
from tests.jupyter_server import jupyter_server
from tests.kernel_client import CellFailed, LabKernel

FLOOR = {
    "blocked_policies": ["auto"],
    "always_ask": ["external", "destructive"],
    "blocked_models": ["claude-fable-*"],
    "default_model": "claude-haiku-5-5",
    "allowed_mcp_servers": ["python -m allowed_server*", "https://mcp.example.com/*"],
    "redact_patterns": ["ACME-[0-9]{6}"],
}


def write_floor(folder: Path, floor: dict[str, Any], name: str = "qloop_admin.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(floor), encoding="utf-8")
    return path


@pytest.fixture
def floor_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The floor above in a file QLOOP_ADMIN_CONFIG names (no system folder holds one)."""
    monkeypatch.setattr(jupyter_core.paths, "SYSTEM_CONFIG_PATH", [str(tmp_path / "etc")])
    monkeypatch.setattr(jupyter_core.paths, "ENV_CONFIG_PATH", [str(tmp_path / "env")])
    path = write_floor(tmp_path, FLOOR, "admin.json")
    monkeypatch.setenv(ADMIN_ENV, str(path))
    yield path
    redact_shapes(())


def test_the_system_config_folders_are_read_and_every_file_adds_to_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system, env = tmp_path / "etc" / "jupyter", tmp_path / "venv" / "etc" / "jupyter"
    system.mkdir(parents=True)
    env.mkdir(parents=True)
    monkeypatch.setattr(jupyter_core.paths, "SYSTEM_CONFIG_PATH", [str(system)])
    monkeypatch.setattr(jupyter_core.paths, "ENV_CONFIG_PATH", [str(env)])
    monkeypatch.delenv(ADMIN_ENV, raising=False)
    assert admin_paths() == [] and not admin_floor()
    etc = write_floor(system, {"blocked_policies": ["auto"]})
    assert admin_paths() == [etc]
    # A file the user names adds rules; it cannot take the system's away.
    mine = write_floor(tmp_path, {"blocked_policies": []}, "mine.json")
    monkeypatch.setenv(ADMIN_ENV, str(mine))
    floor = admin_floor()
    assert [f.path for f in floor.files] == [str(mine), str(etc)]
    assert floor.policy_refusal("auto") == (
        f"the approval policy 'auto' is not available: the admin setting blocked_policies in {etc}"
    )
    with pytest.raises(SettingsError, match="blocked_policies"):
        settings_from({}, {"QLOOP_APPROVAL": "auto"})


def test_an_unusable_admin_file_fails_closed_saying_which_and_why(
    floor_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    floor_file.write_text('{"blocked_policies": ["auto"], "allow_everything": true}')
    with pytest.raises(AdminError, match=f"{floor_file}: allow_everything: Extra inputs"):
        admin_floor()
    with pytest.raises(SettingsError, match="allow_everything"):
        settings_from({}, {})
    monkeypatch.setenv(ADMIN_ENV, str(floor_file) + ".missing")
    with pytest.raises(AdminError, match="no such file"):
        admin_floor()


def test_config_and_environment_below_the_floor_are_refused_with_the_admins_line(
    floor_file: Path,
) -> None:
    line = f"the admin setting blocked_policies in {floor_file}"
    with pytest.raises(SettingsError, match=line):
        settings_from({"approve": "auto"}, {})
    with pytest.raises(SettingsError, match=line):
        settings_from({}, {"QLOOP_APPROVAL": "auto"})
    with pytest.raises(SettingsError, match=f"'claude-fable-5-1' is blocked: .* {floor_file}"):
        settings_from({"model": "claude-fable-5-1"}, {})
    chosen = settings_from({}, {"QLOOP_APPROVAL": "write"})
    assert chosen.approve == "write" and chosen.model == "claude-haiku-5-5"  # the admin's default
    shown = "\n".join(effective_lines({}, {"QLOOP_APPROVAL": "write"}))
    assert "approve = write  (user (QLOOP_APPROVAL))" in shown
    assert f"model = claude-haiku-5-5  (admin (default_model in {floor_file}))" in shown
    assert f"always_ask = external, destructive  (admin: {floor_file})" in shown


def test_qloop_config_show_lists_the_settings_their_sources_and_the_floor(
    floor_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qloop_kernel.headless.cli import main

    assert main(["config", "--show"]) == 0
    out = capsys.readouterr().out
    assert f"model = claude-haiku-5-5  (admin (default_model in {floor_file}))" in out
    assert f"blocked_policies = auto  (admin: {floor_file})" in out


def request(risk: Any) -> ApprovalRequest:
    return ApprovalRequest(ToolCall("c1", "run_code", {"code": "x"}), "run_code",
                           assessment=Assessment(risk, (), frozenset()))  # fmt: skip


class Person:
    def __init__(self) -> None:
        self.asked: list[Any] = []

    def decide(self, request: Any) -> Approve:
        self.asked.append(request)
        return Approve()


def test_a_class_the_floor_holds_is_asked_whatever_the_policy_and_grants_and_denied_headless(
    floor_file: Path,
) -> None:
    grants = Grants()
    grants.add(Grant("fetch_data", "external", "session"))
    person = Person()
    live = PermissionPipeline(ApprovalPolicy("write"), grants, person)
    assert live.decide(request("write")).by == "policy"  # the policy still decides the rest
    asked = live.decide(request("external"))
    assert asked.by == "approver" and len(person.asked) == 1  # the grant did not run it
    assert f"always_ask in {floor_file}" in person.asked[0].details["notices"][-1]
    # The card offers no "Always allow": a grant would never run the class the floor holds.
    assert person.asked[0].always_ask == person.asked[0].details["notices"][-1]
    assert live.decide(request("write")).decision == Approve("write")
    headless = PermissionPipeline(ApprovalPolicy("write", interactive=False), Grants(), None)
    assert headless.settle(request("destructive")) is not None
    # under a headless policy that would run it (the admin file allows 'auto' here)
    floor_file.write_text(json.dumps({**FLOOR, "blocked_policies": []}))
    auto = PermissionPipeline(ApprovalPolicy("auto", interactive=False), Grants(), None)
    denied = auto.settle(request("external"))
    assert denied is not None and denied.by == "admin"
    assert isinstance(denied.decision, Deny)
    assert denied.decision.reason == (
        "denied: every 'external' step needs a person's approval: the admin setting always_ask "
        f"in {floor_file}"
    )
    assert auto.settle(request("write")) == auto.settle(request("write"))  # run by the policy


def test_the_grants_line_leaves_out_the_classes_the_floor_holds(floor_file: Path) -> None:
    grants = Grants()
    grants.add(Grant("run_code", "destructive", "notebook"))
    grants.add(Grant("fetch_data", "external", "session"))
    assert grants.summary(held=()) == (
        "allowed without asking: run_code 'read', 'write', 'compute', 'unknown' and 'destructive' "
        "steps, this notebook; fetch_data 'read', 'write', 'compute', 'unknown' and 'external' "
        "steps, this session"
    )
    assert grants.summary() == (  # the floor holds 'external' and 'destructive'
        "allowed without asking: run_code 'read', 'write', 'compute' and 'unknown' steps, this "
        "notebook; fetch_data 'read', 'write', 'compute' and 'unknown' steps, this session"
    )
    held = {"read", "write", "compute", "unknown", "destructive"}
    assert grants.summary(held=held) == (
        "allowed without asking: fetch_data 'external' steps, this session"
    )
    assert grants.summary(held={*held, "external"}) == ""


def test_mcp_servers_outside_the_admins_list_are_left_out_with_a_line(floor_file: Path) -> None:
    def entry(name: str, **config: Any) -> Configured:
        return Configured(name, ServerConfig(**config), "user", "mcp.json")

    kept, refused = admitted([
        entry("ok", command="python", args=["-m", "allowed_server"]),
        entry("web", url="https://mcp.example.com/x"),
        entry("shell", command="bash", args=["-c", "curl evil"]),
    ])  # fmt: skip
    assert [e.name for e in kept] == ["ok", "web"]
    assert refused == [
        "MCP server 'shell' is left out: the MCP server 'bash -c curl evil' is not allowed: the "
        f"admin setting allowed_mcp_servers in {floor_file}"
    ]
    floor_file.write_text(json.dumps({
        "user_mcp_servers": False,
        "mcp_servers": {"team": {"command": "python", "args": ["-m", "team_server"]}},
    }))  # fmt: skip
    kept, refused = admitted([entry("ok", command="python", args=["-m", "allowed_server"])])
    assert [(e.name, e.source) for e in kept] == [("team", "admin")]
    assert "users may not add MCP servers" in refused[0]


def test_the_admins_redaction_patterns_apply_everywhere(floor_file: Path) -> None:
    assert "ACME-123456" in redact_text("badge ACME-123456")  # not yet read
    admin_floor()
    assert redact_text("badge ACME-123456 ok") == "badge [REDACTED] ok"


# -- through a real kernel ------------------------------------------------------------------------


def usage_error(lab: LabKernel, code: str, **execute: Any) -> str:
    with pytest.raises(CellFailed) as failed:
        lab.run(code, **execute)
    return str(failed.value)


@pytest.fixture
def admin_env(tmp_path: Path, api: StandInAPI) -> dict[str, str]:
    path = write_floor(tmp_path, FLOOR, "admin.json")
    return {**api.environment(), ADMIN_ENV: str(path)}


@pytest.mark.kernel
def test_a_cell_option_and_the_environment_are_refused_in_the_kernel(
    admin_env: dict[str, str], api: StandInAPI
) -> None:
    path = admin_env[ADMIN_ENV]
    with LabKernel(admin_env) as lab:
        lab.run("%load_ext qloop_kernel")
        api.set_script([Reply([text("never")])])
        error = usage_error(lab, "%%agent --approve auto\nClean up.", cell_id="c1")
        assert f"'auto' is not available: the admin setting blocked_policies in {path}" in error
        error = usage_error(lab, "%%agent --model claude-fable-5-1\nHi.", cell_id="c2")
        assert f"blocked: the admin setting blocked_models in {path}" in error
        config = lab.run("%agent config")
        assert "model = claude-haiku-5-5  (admin (default_model in" in config
        assert api.requests == []  # no model call was made
    with LabKernel({**admin_env, "QLOOP_APPROVAL": "auto"}) as lab:
        lab.run("%load_ext qloop_kernel")
        error = usage_error(lab, "%%agent\nClean up.", cell_id="c3")
        assert f"the admin setting blocked_policies in {path}" in error
    assert api.requests == []


@pytest.mark.kernel
def test_a_notebooks_saved_grant_does_not_run_a_class_the_floor_holds(
    admin_env: dict[str, str], api: StandInAPI
) -> None:
    from tests.test_approval_kernel import answer_hello, saved_grants, shown

    code = "import shutil\nshutil.rmtree('nothing-here', ignore_errors=True)\nremoved = True"
    with LabKernel(api.environment()) as lab:  # granted before the admin held the class
        lab.run("%load_ext qloop_kernel")
        api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("done")])])
        cell = lab.execute("%%agent\nRemove it.", cell_id="g1")
        answer_hello(lab, cell)
        scope = lab.wait_for_widget(model_name="DropdownModel", parent=cell)
        lab.set_value(scope, "index", 2)
        lab.click(lab.wait_for_button("Always allow", parent=cell))
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
        value = saved_grants(lab, cell)["value"]
        assert value["grants"][0]["risk"] == "destructive"

    with LabKernel(admin_env) as lab:  # the notebook opened again under the floor
        lab.run("%load_ext qloop_kernel")
        api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("done")])])
        again = lab.execute("%%agent\nRemove it again.", cell_id="g2")
        answer_hello(lab, again, grants=value)
        deny = lab.wait_for_button("Deny", parent=again)  # the notebook's grant did not run it
        lab.round_trip(deny)
        card = shown(lab, again)
        assert "every 'destructive' step needs a person's approval: the admin setting " in card
        # Nothing says the grant lets these steps run, and no new grant is offered for them.
        assert "run_code 'read', 'write', 'compute' and 'unknown' steps, this notebook" in card
        assert "'destructive' steps, this notebook" not in card
        always = f"IPY_MODEL_{lab.wait_for_button('Always allow', parent=again)}"
        rows = [s["children"] for s in lab.widget_states(parent=again)
                if f"IPY_MODEL_{deny}" in s.get("children", ())]  # fmt: skip
        assert rows and all(always not in row for row in rows)  # the card's row has no such button
        lab.click(deny)
        assert lab.complete(again, 60)["content"]["status"] == "ok"
        assert saved_record(lab, again)["tool_calls"][0]["decision"]["kind"] == "denied"
        assert lab.run("print('removed' in dir())").strip() == "False"


def test_outside_agents_are_refused_with_a_403_naming_the_admin_setting(tmp_path: Path) -> None:
    path = write_floor(tmp_path, {"outside_agents": False}, "admin.json")
    with jupyter_server(tmp_path / "root", env={ADMIN_ENV: str(path)}) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        reply = httpx.post(server.mcp_url, json=body, headers=server.headers, timeout=30)
        assert reply.status_code == 403, reply.text
        assert reply.json()["message"] == (
            f"outside agents may not connect: the admin setting outside_agents in {path}"
        )
        path.write_text(json.dumps({"outside_agents": True}))  # read again when it changes
        reply = httpx.post(server.mcp_url, json=body, headers=server.headers, timeout=30)
        assert reply.status_code != 403, reply.text
