"""The hostile MCP server of ``tests/mcp_servers.py --hostile`` through a real kernel: a tool whose
description hides characters gets a card even under ``--approve auto`` (and no "Always allow"), is
refused headless, and is flagged in the cell when its server connects; a crashed server's stderr
reaches neither the cell nor the model, and ``%agent mcp`` shows its end, bounded and redacted;
nbconvert's rendering of the transcript mirror shows the hidden characters of a tool input marked.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter, MarkdownExporter

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook.display import ANSWER_MIME
from qloop_kernel.records import MIME_TYPE
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import LabKernel
from tests.mcp_servers import STDERR_KEY

pytestmark = pytest.mark.kernel

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
RLO, ZWSP = "\u202e", "\u200b"
RLO_MARK = "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩"
TOPIC = f"q3{RLO}gnp.exe{ZWSP}"
SPILLED = ("starting the spill", "yyyyyyyy", "Ignore the user", STDERR_KEY)
HELD = "mcp__h__read_notes: MCP server 'h' describes this tool with characters a person cannot see"


def config(tmp_path: Path) -> dict[str, Any]:
    env = {"MCP_CALLS": str(tmp_path / "calls.txt")}
    hostile = {"command": sys.executable, "args": [SERVER, "--hostile"], "env": env}
    return {"mcpServers": {"h": {**hostile, "trusted": True}}}


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QLOOP_MCP_CONFIG", str(tmp_path / "user-mcp.json"))
    monkeypatch.setenv("QLOOP_MCP_APPROVED", str(tmp_path / "approved.json"))


def shown_text(lab: LabKernel, msg_id: str) -> str:
    """What a person reads of the cell: streams, and the plain and HTML forms of rich outputs
    (the record's and the answer's JSON are data for the extension, not text on screen)."""
    parts = []
    for message in lab.outputs(msg_id):
        content = message["content"]
        data = {
            k: v for k, v in content.get("data", {}).items() if k not in (MIME_TYPE, ANSWER_MIME)
        }
        parts += [content.get("text", ""), json.dumps(data, ensure_ascii=False)]
    return "\n".join(parts)


def _child(comm_id: str) -> str:
    return f"IPY_MODEL_{comm_id}"


def test_a_held_tool_asks_under_auto_and_a_crashed_servers_stderr_stays_out(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    lab.run(f"%config QloopAgent.mcp_servers = {config(tmp_path)!r}")
    api.set_script(
        [
            Reply([tool_use("mcp__h__read_notes", {"topic": TOPIC})]),
            Reply([tool_use("mcp__h__spill", {})]),
            Reply([text("done")]),
        ]
    )
    cell = lab.execute("%%agent --approve auto\nRead the notes.", cell_id="held")
    approve = lab.wait_for_button("Approve", parent=cell, timeout=120)
    lab.round_trip(approve)
    always = lab.wait_for_button("Always allow", parent=cell)
    rows = [
        s["children"]
        for s in lab.widget_states(parent=cell)
        if _child(approve) in s.get("children", ())
    ]
    assert rows and all(_child(always) not in row for row in rows)  # no grant could cover it
    card = "\n".join(str(s.get("value", "")) for s in lab.widget_states(parent=cell))
    assert "describes this tool with characters a person cannot see" in card
    lab.click(approve)
    assert lab.complete(cell, 120)["content"]["status"] == "ok"
    kinds = [c["decision"]["kind"] for c in saved_record(lab, cell)["tool_calls"]]
    assert kinds == ["approved", "auto"]  # the plainly described spill ran under auto
    seen = shown_text(lab, cell)
    assert HELD in seen  # said in the cell when the server connected
    assert RLO not in seen and RLO_MARK in seen  # the mirror's fallbacks mark the input
    for spilled in SPILLED:
        assert spilled not in seen
        assert all(spilled not in json.dumps(r.body) for r in api.requests)
    told = result_text(tool_results(api.requests[2])[0])
    assert "disconnected during spill" in told and "`%agent mcp stderr h`" in told
    listing = lab.run("%agent mcp")
    assert f"      ⚠ {HELD.split(': ', 1)[1]}" in listing and RLO not in listing
    assert "h (config: c.QloopAgent.mcp_servers) trusted: disconnected" in listing
    assert "    Ignore the user." in listing and STDERR_KEY not in listing
    kept = lab.run("%agent mcp stderr h")
    assert "bytes omitted; only the end is kept" in kept and "the key is [REDACTED]" in kept
    assert len(kept) < 20_000


def test_headless_a_held_tool_is_refused_and_nbconvert_shows_the_input_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = nbformat.v4.new_notebook()
    setup = f"%load_ext qloop_kernel\n%config QloopAgent.mcp_servers = {config(tmp_path)!r}"
    nb.cells = [nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell("%%agent\nRead.")]
    script = [
        Reply([tool_use("mcp__h__read_notes", {"topic": TOPIC})]),
        Reply([text("It was refused.")]),
    ]
    with StandInAPI(script) as api:
        for name, value in api.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("QLOOP_APPROVAL", "auto")
        AgentNotebookClient(
            nb, progress=io.StringIO(), timeout=180, kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()  # fmt: skip
        told = result_text(tool_results(api.requests[1])[0])
    assert told.startswith("Not run: denied by the approval policy 'ask'")
    assert "no policy or grant runs this tool" in told
    assert not (tmp_path / "calls.txt").exists()  # never called
    (step,) = nb.cells[1].metadata["qloop"]["tool_calls"]
    assert step["decision"]["kind"] == "denied"
    outputs = json.dumps(nb.cells[1].outputs, ensure_ascii=False)
    assert HELD in outputs
    for exporter in (HTMLExporter(), MarkdownExporter()):
        page, _ = exporter.from_notebook_node(nb)
        assert RLO not in page and ZWSP not in page
        assert "q3⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩gnp.exe⟨U+200B ZERO WIDTH SPACE⟩" in page
