"""MCP tools through a real kernel: the stand-in model calls the tools of real MCP servers
(``tests/mcp_servers.py``) through qloop. Headless runs under a policy, a card clicked like
JupyterLab, redaction, replay, and no server left behind after a kernel restart.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
SECRET = "mcp-kernel-secret-5a4b3c2d1e0f9988"


def servers_config(tmp_path: Path) -> dict[str, Any]:
    env = {"MCP_CALLS": str(tmp_path / "calls.txt"), "MCP_TOKEN": SECRET}
    stdio = {"command": sys.executable, "args": [SERVER], "env": env}
    return {"mcpServers": {"t": {**stdio, "trusted": True}, "u": stdio}}


def setup(tmp_path: Path) -> str:
    return f"%load_ext qloop_kernel\n%config QloopAgent.mcp_servers = {servers_config(tmp_path)!r}"


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().split() if path.exists() else []


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QLOOP_MCP_CONFIG", str(tmp_path / "user-mcp.json"))
    monkeypatch.setenv("QLOOP_MCP_APPROVED", str(tmp_path / "approved.json"))


def notebook(tmp_path: Path) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(setup(tmp_path)),
        nbformat.v4.new_code_cell("%%agent\nUse the MCP tools."),
    ]
    return nb


def run(
    nb: Any, api: StandInAPI, monkeypatch: pytest.MonkeyPatch, policy: str | None, cwd: Path
) -> None:
    for name, value in api.environment().items():
        monkeypatch.setenv(name, value)
    if policy is None:
        monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
    else:
        monkeypatch.setenv("QLOOP_APPROVAL", policy)
    AgentNotebookClient(
        nb, progress=io.StringIO(), timeout=180, kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    ).execute()  # fmt: skip


def test_a_headless_readonly_run_uses_only_read_tools_of_trusted_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"p": {"command": "echo", "args": ["never started"]}}})
    )
    script = [
        Reply(
            [
                tool_use("mcp__t__lookup", {"key": "a"}),
                tool_use("mcp__u__lookup", {"key": "b"}),
                tool_use("mcp__t__drop_table", {"name": "sales"}),
                tool_use("mcp__t__chart", {}),
                tool_use("mcp__t__show_env", {}),
            ]
        ),
        Reply([text("Done what was allowed.")]),
    ]
    nb = notebook(tmp_path)
    with StandInAPI(script) as api:
        run(nb, api, monkeypatch, None, project)
        names = [t["name"] for t in api.requests[0].body["tools"]]
        told = tool_results(api.requests[1])
    assert "mcp__t__lookup" in names and "mcp__u__drop_table" in names
    assert not any(n.startswith("mcp__p__") for n in names)  # the project file is not approved
    texts = [result_text(b) for b in told]
    assert "the value of a is 42" in texts[0]
    assert texts[1].startswith("Not run: denied by the approval policy 'readonly'")  # untrusted
    assert "(a 'unknown' step)" in texts[1]
    assert texts[2].startswith("Not run") and "(a 'destructive' step)" in texts[2]
    assert [c["type"] for c in told[3]["content"]] == ["image"]  # the model sees the image
    assert "MCP_TOKEN=[REDACTED]" in texts[4]
    assert calls(tmp_path) == ["lookup", "chart", "show_env"]
    record = nb.cells[1].metadata["qloop"]
    assert [c["name"] for c in record["tool_calls"]] == [
        "mcp__t__lookup", "mcp__u__lookup", "mcp__t__drop_table", "mcp__t__chart",
        "mcp__t__show_env",
    ]  # fmt: skip
    assert [c["decision"]["kind"] for c in record["tool_calls"]] == [
        "auto", "denied", "denied", "auto", "auto",
    ]  # fmt: skip
    shown = json.dumps(nb.cells[1].outputs)
    assert "is not approved, so its servers are not started" in shown
    saved = json.dumps(nb)
    assert SECRET not in saved.replace(
        json.dumps(setup(tmp_path))[1:-1], ""
    )  # only the user's cell


def test_a_replay_repeats_only_read_tools_of_connected_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        Reply(
            [
                tool_use("mcp__t__lookup", {"key": "a"}),
                tool_use("mcp__t__write_note", {"text": "hi"}),
                tool_use("mcp__u__lookup", {"key": "b"}),
            ]
        ),
        Reply([text("Done.")]),
    ]
    nb = notebook(tmp_path)
    with StandInAPI(script) as api:
        run(nb, api, monkeypatch, "auto", tmp_path)
    assert calls(tmp_path) == ["lookup", "write_note", "lookup"]
    with StandInAPI() as api:
        run(nb, api, monkeypatch, "auto", tmp_path)
        assert api.requests == []  # a replay: no model call
    assert calls(tmp_path) == ["lookup", "write_note", "lookup", "lookup"]  # t's read tool only
    shown = json.dumps(nb.cells[1].outputs)
    for name in ("mcp__t__write_note", "mcp__u__lookup"):
        assert f"{name}: the saved result is shown; the call was not repeated" in shown
    assert "mcp__t__lookup: the saved result" not in shown
    assert "replay complete" in shown


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_the_card_names_the_server_and_no_server_outlives_a_restart(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    config = servers_config(tmp_path)
    config["mcpServers"]["u"]["env"]["MCP_PID"] = str(pid_file)
    config["mcpServers"]["u"]["env"]["MCP_LINGER"] = "1"
    lab.run(f"%config QloopAgent.mcp_servers = {config!r}")
    api.set_script(
        [Reply([tool_use("mcp__u__write_note", {"text": "hello"})]), Reply([text("ok")])]
    )
    cell = lab.execute("%%agent\nWrite a note.", cell_id="mcp-card")
    approve = lab.wait_for_button("Approve", parent=cell, timeout=120)
    lab.round_trip(approve)
    states = lab.widget_states(parent=cell, model_name="HTMLModel")
    card = "\n".join(str(s.get("value", "")) for s in states)
    assert "mcp__u__write_note" in card and "MCP server &#x27;u&#x27;" in card
    assert "the server gives no hint of what it does" in card
    lab.click(approve)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "noted: hello" in result_text(tool_results(api.requests[1])[0])
    assert saved_record(lab, cell)["tool_calls"][0]["decision"]["kind"] == "approved"
    listing = lab.run("%agent mcp")
    assert "u (config: c.QloopAgent.mcp_servers): connected" in listing
    assert "t (config: c.QloopAgent.mcp_servers) trusted: connected" in listing
    assert SECRET not in listing
    server_pid = int(pid_file.read_text())
    assert alive(server_pid)
    lab.restart()
    deadline = time.monotonic() + 15
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(server_pid)


def test_a_project_file_starts_only_after_its_card_is_approved(
    kernel_factory: Any, api: StandInAPI, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    entry = {"command": sys.executable, "args": [SERVER], "env": {"MCP_CALLS": str(tmp_path / "c")}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"p": entry}}))
    api.reset()
    lab = kernel_factory(api.environment(), cwd=str(project))
    lab.run("%load_ext qloop_kernel")
    assert "received, not approved (not started)" in lab.run("%agent mcp")
    api.set_script([Reply([text("ok")])])
    cell = lab.execute("%%agent\nHello.", cell_id="mcp-project")
    approve = lab.wait_for_button("Approve", parent=cell, timeout=120)
    lab.round_trip(approve)
    states = lab.widget_states(parent=cell, model_name="HTMLModel")
    card = "\n".join(str(s.get("value", "")) for s in states)
    assert f"MCP servers from {project / '.mcp.json'}" in card
    assert "mcp_servers.py (env: MCP_CALLS)" in card  # the exact command, env by name
    assert "received" in card
    lab.click(approve)
    assert lab.complete(cell, 120)["content"]["status"] == "ok"
    names = [t["name"] for t in api.requests[0].body["tools"]]
    assert "mcp__p__lookup" in names
    approved = json.loads((tmp_path / "approved.json").read_text())
    digest = hashlib.sha256((project / ".mcp.json").read_bytes()).hexdigest()
    assert approved == {str(project / ".mcp.json"): digest}
    listing = lab.run("%agent mcp")
    assert "p (project: " in listing and ": connected" in listing


def test_servers_added_in_a_cell_and_an_interrupt_ends_a_hanging_call(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    added = lab.run(f"%agent mcp add extra -- {sys.executable} {SERVER}")
    assert "MCP server 'extra' added" in added
    assert "extra (notebook: this notebook): not started" in lab.run("%agent mcp")
    lab.run("%agent mcp remove extra")
    assert "extra" not in lab.run("%agent mcp")
    config = servers_config(tmp_path)
    config["mcpServers"]["t"]["timeout"] = 300
    lab.run(f"%config QloopAgent.mcp_servers = {config!r}")
    api.set_script([Reply([tool_use("mcp__t__hang", {})]), Reply([text("stopped")])])
    cell = lab.execute("%%agent --approve auto\nWait.", cell_id="mcp-hang")
    lab.wait_for(lambda: "hang" in calls(tmp_path) or None, 120, "the hanging call")
    interrupted = time.monotonic()
    lab.interrupt()
    lab.complete(cell, 30)
    assert time.monotonic() - interrupted < 20
    assert "t (config: c.QloopAgent.mcp_servers) trusted: connected" in lab.run("%agent mcp")
    # The turn's deadline ends a waiting call the way the Stop button does (one timer).
    api.set_script([Reply([tool_use("mcp__t__hang", {})]), Reply([text("gave up")])])
    started = time.monotonic()
    cell = lab.execute("%%agent --approve auto --timeout 4\nWait again.", cell_id="mcp-deadline")
    lab.complete(cell, 60)
    assert time.monotonic() - started < 40
    (step,) = saved_record(lab, cell)["tool_calls"]
    assert step["name"] == "mcp__t__hang" and step["is_error"], step
    assert "MCP server" not in step["output_summary"]  # ended by the deadline, not a server error
