"""Rules files, ``--with`` attachments and ``%agent context`` through a real kernel and `qloop run`,
against the loopback Messages API."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.context import estimate_tokens
from qloop_kernel.headless.cli import main as qloop_main
from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.records import load_record
from qloop_kernel.testing import Reply, StandInAPI, text
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel
RULES = "Use snake_case column names."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp/repo (.git, AGENTS.md) / nb: the notebook's folder; the user's file and state beside."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text(RULES, "utf-8")
    (repo / "nb").mkdir()
    (tmp_path / "user-rules.md").write_text("Answer in one sentence.", "utf-8")
    return repo


def context_env(project: Path) -> dict[str, str]:
    home = project.parent
    return {
        "QLOOP_USER_RULES": str(home / "user-rules.md"),
        "QLOOP_RULES_APPROVALS": str(home / "state" / "approved.json"),
        "JPY_SESSION_NAME": str(project / "nb" / "analysis.ipynb"),
        "QLOOP_RULES": "",
    }


@pytest.fixture
def agent_kernel(project: Path) -> Iterator[tuple[LabKernel, StandInAPI]]:
    with StandInAPI() as api:
        env = {**api.environment(), **context_env(project)}
        with LabKernel(env, cwd=str(project.parent)) as kernel:  # JPY_SESSION_NAME wins
            kernel.run("%load_ext qloop_kernel")
            yield kernel, api


def system_text(request: Any) -> str:
    return "".join(block["text"] for block in request.body["system"])


def card_text(lab: LabKernel, parent: str, showing: str) -> str:
    """The card's text once it shows ``showing`` (its widgets arrive one by one)."""
    deadline = time.monotonic() + 15
    while True:
        states = lab.widget_states(parent=parent, model_name="HTMLModel")
        found = "\n".join(str(s.get("value")) for s in states)
        found = html.unescape(re.sub(r"<[^>]+>", "", found))
        if showing in found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_an_unseen_project_file_asks_once_and_a_changed_one_shows_its_diff(
    agent_kernel: tuple[LabKernel, StandInAPI], project: Path
) -> None:
    lab, api = agent_kernel
    api.set_script([Reply([text("One.")]), Reply([text("Two.")]), Reply([text("Three.")])])
    first = lab.execute("%%agent\nSummarise the data.", cell_id="r1")
    approve = lab.wait_for_button("Approve", parent=first, timeout=30)
    shown = card_text(lab, first, RULES)
    assert RULES in shown and str(project / "AGENTS.md") in shown
    assert api.requests == []  # nothing is sent before the answer
    lab.click(approve)
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    sent = system_text(api.requests[0])
    assert sent.index("Answer in one sentence.") < sent.index(RULES)  # the user's file first
    assert "rules: " in lab.text(first) and "AGENTS.md" in lab.text(first)
    record = load_record(saved_record(lab, first))
    assert record.context is not None
    assert [(r.origin, r.status) for r in record.context.rules] == [
        ("user", "used"),
        ("project", "used"),
    ]
    assert record.fingerprint is not None and len(record.fingerprint.sources) == 2
    assert {e.kind for e in record.egress} >= {"prompt", "rules"}
    approved = json.loads((project.parent / "state" / "approved.json").read_text("utf-8"))
    assert list(approved["approved"]) == [str(project / "AGENTS.md")]

    second = lab.execute("%%agent\nAgain.", cell_id="r2")  # approved: no card
    assert lab.complete(second, 60)["content"]["status"] == "ok"
    buttons = lab.widget_states(parent=second, model_name="ButtonModel")
    assert [b for b in buttons if b.get("description") == "Approve"] == []
    assert RULES in system_text(api.requests[1])

    (project / "AGENTS.md").write_text(RULES + "\nNever drop tables.", "utf-8")
    third = lab.execute("%%agent\nOnce more.", cell_id="r3")
    deny = lab.wait_for_button("Deny", parent=third, timeout=30)
    assert "+Never drop tables." in card_text(lab, third, "Never drop")
    lab.click(deny)
    assert lab.complete(third, 60)["content"]["status"] == "ok"
    assert "Never drop" not in system_text(api.requests[2])
    assert RULES not in system_text(api.requests[2])  # the changed file is not used at all
    assert "not used: you declined it" in lab.text(third)


def png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(1, 1))
    axes.plot([1, 3, 2])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def files(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "notes.md").write_text("Revenue is in EUR.", "utf-8")
    (folder / "sales.csv").write_text("region,revenue\nnorth,10.5\nsouth,7.25\n", "utf-8")
    pq.write_table(pa.table({"day": [1, 2, 3]}), folder / "days.parquet")
    (folder / "plot.png").write_bytes(png())


def test_attachments_of_each_kind_reach_the_model_and_the_record(
    agent_kernel: tuple[LabKernel, StandInAPI], project: Path
) -> None:
    lab, api = agent_kernel
    files(project / "nb")
    (project / "AGENTS.md").unlink()  # no card in this test
    lab.run("import pandas as pd\nframe = pd.DataFrame({'a': [1, 2]})", cell_id="setup")
    api.set_script([Reply([text("Seen.")])])
    cell = lab.execute(
        "%%agent --with notes.md,sales.csv --with days.parquet --with plot.png "
        "--with frame,@setup\nLook at all of it.",
        cell_id="att",
    )
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    blocks = api.requests[0].body["messages"][0]["content"]
    texts = "\n".join(b.get("text", "") for b in blocks)
    assert "Revenue is in EUR." in texts and "revenue: float64" in texts
    assert "Parquet file, 3 rows" in texts and "DataFrame" in texts
    assert "frame = pd.DataFrame" in texts  # the cell's source
    [image] = [b for b in blocks if b["type"] == "image"]
    assert base64.b64decode(image["source"]["data"]) == (project / "nb" / "plot.png").read_bytes()
    assert blocks[-1]["text"] == "Look at all of it."  # the prompt last
    record = load_record(saved_record(lab, cell))
    assert record.context is not None
    assert [(a.kind, a.name) for a in record.context.attachments] == [
        ("file", "notes.md"),
        ("table", "sales.csv"),
        ("table", "days.parquet"),
        ("image", "plot.png"),
        ("variable", "frame"),
        ("cell", "setup"),
    ]
    kinds = [e.kind for e in record.egress]
    assert kinds == ["prompt", "rules", *["file"] * 4, "variable", "cell"]  # the user's rules
    assert "base64" not in json.dumps(record.messages)  # the image saved as a placeholder
    bad = lab.execute("%%agent --with @nowhere\nLook.", cell_id="bad")
    lab.complete(bad, 30)
    said = lab.error_text(bad) + lab.stderr(bad) + lab.text(bad)
    assert "no cell with id 'nowhere' has run in this kernel" in said
    assert len(api.requests) == 1  # nothing sent for the bad item


def test_agent_context_figures_match_the_request_the_model_receives(
    agent_kernel: tuple[LabKernel, StandInAPI], project: Path
) -> None:
    lab, api = agent_kernel
    (project / "nb" / "notes.md").write_text("Revenue is in EUR. " * 50, "utf-8")
    view = lab.run("%agent context --with notes.md")
    assert "not used: a project rules file you have not approved" in view
    (project / "AGENTS.md").unlink()
    view = lab.run("%agent context --with notes.md")
    api.set_script([Reply([text("Fine.")])])
    cell = lab.execute("%%agent --with notes.md\nHi", cell_id="c1")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    body = api.requests[0].body
    system = system_text(api.requests[0])
    assert f"system prompt: {len(system):,} characters" in view
    assert "user-rules.md (user): used" in view
    for tool in body["tools"]:
        plain = {k: v for k, v in tool.items() if k != "cache_control"}
        size = len(json.dumps(plain, separators=(",", ":"), ensure_ascii=False))
        assert f"  {tool['name']}: {size:,} characters" in view
    assert f"tools: {len(body['tools'])} " in view
    assert "file notes.md: " in view and "conversation: 0 earlier messages" in view
    estimated = int(re.search(r"first request: ~([\d,]+) input tokens", view)[1].replace(",", ""))
    usage = api.requests[0].usage
    counted = sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens",
                                     "cache_creation_input_tokens"))  # fmt: skip
    prompt = estimate_tokens({"type": "text", "text": "Hi"})
    assert abs(counted - prompt - estimated) <= 0.03 * counted  # the stand-in counts per block
    record = load_record(saved_record(lab, cell))
    assert record.context is not None and record.context.system_chars == len(system)
    assert abs(record.context.estimated_tokens - counted) <= 0.03 * counted


def headless_notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    return nb


def shown(cell: Any) -> str:
    return "\n".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for o in cell.outputs
    )


def test_agent_context_under_qloop_run_counts_the_request_the_next_agent_cell_sends(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = headless_notebook([
        "%load_ext qloop_kernel\nx = 41\ny = [1, 2]",
        "%agent context --with x --with y",  # --with twice: still a command, no model call
        "%agent context",
        "%%agent\nHi",
    ])  # fmt: skip
    with StandInAPI([Reply([text("Fine.")])]) as api:
        for name, value in {**api.environment(), **context_env(project)}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("JPY_SESSION_NAME")
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120,
                            resources={"metadata": {"path": str(project / "nb")}}).execute()  # fmt: skip
        requests = list(api.requests)
    assert len(requests) == 1  # the agent cell's: neither %agent context called the model
    attached = shown(nb.cells[1])
    assert "attached (before the prompt):" in attached
    assert "variable x" in attached and "variable y" in attached
    view, body = shown(nb.cells[2]), requests[0].body
    tools = body["tools"]
    assert {"read_notebook", "add_cell", "edit_cell", "run_cell"} <= {t["name"] for t in tools}
    assert f"tools: {len(tools)} (" in view
    for tool in tools:
        plain = {k: v for k, v in tool.items() if k != "cache_control"}
        size = len(json.dumps(plain, separators=(",", ":"), ensure_ascii=False))
        assert f"  {tool['name']}: {size:,} characters" in view
    system = system_text(requests[0])
    assert f"system prompt: {len(system):,} characters" in view
    assert "cache_control" in body["system"][-1]  # the request's prefix is long enough to cache
    assert "the tools and system prompt end in a cache breakpoint" in view
    # The estimate is of the request as sent, less the prompt's message.
    sent = {"tools": tools, "system": body["system"], "messages": body["messages"][:-1]}
    plain = json.loads(json.dumps(sent), object_hook=lambda d: {k: v for k, v in d.items()
                                                                 if k != "cache_control"})  # fmt: skip
    tokens = len(json.dumps(plain, separators=(",", ":"), ensure_ascii=False)) // 4
    assert f"first request: ~{tokens:,} input tokens besides the prompt" in view


def test_headless_an_unapproved_project_file_is_skipped_unless_configured_and_drift_is_told(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = headless_notebook(["%load_ext qloop_kernel", "%%agent\nWhat is here?"])
    with StandInAPI([Reply([text("Nothing.")]), Reply([text("Rules seen.")])]) as api:
        for name, value in {**api.environment(), **context_env(project)}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("JPY_SESSION_NAME")  # nbclient: the kernel runs in the folder
        progress = io.StringIO()  # what `qloop run` prints, one line per note
        client = AgentNotebookClient(nb, progress=progress, timeout=120,
                                     resources={"metadata": {"path": str(project / "nb")}})  # fmt: skip
        client.execute()
        assert RULES not in system_text(api.requests[0])
        [said] = [line for line in progress.getvalue().splitlines() if "rules:" in line]
        assert "user-rules.md" in said and "AGENTS.md (project): not used" in said
        assert "AGENTS.md (project): not used" in shown(nb.cells[1])
        assert "QLOOP_RULES=all" in shown(nb.cells[1])
        monkeypatch.setenv("QLOOP_RULES", "all")
        nb.cells[1].source = "%%agent\nWhat is here now?"
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120,
                            resources={"metadata": {"path": str(project / "nb")}}).execute()  # fmt: skip
        assert RULES in system_text(api.requests[1])
        (project / "AGENTS.md").write_text("Use camelCase.", "utf-8")
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120,
                            resources={"metadata": {"path": str(project / "nb")}}).execute()  # fmt: skip
        assert len(api.requests) == 2  # replayed, no model call
    assert f"rules file {project / 'AGENTS.md'}: changed since the turn ran" in shown(nb.cells[1])


def test_qloop_run_sends_attachments(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = project / "nb"
    files(folder)
    nb = headless_notebook(
        ["%load_ext qloop_kernel\nx = 41", "%%agent --with sales.csv,plot.png,x\nCheck."]
    )
    path = folder / "attach.ipynb"
    nbformat.write(nb, path)
    with StandInAPI([Reply([text("Checked.")])]) as api:
        for name, value in {**api.environment(), **context_env(project)}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("JPY_SESSION_NAME")
        assert qloop_main(["run", str(path), "-o", str(folder / "out.ipynb")]) == 0
        blocks = api.requests[0].body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "text", "image", "text", "text"]
    assert "north" in blocks[0]["text"] and "int" in blocks[3]["text"]
    record = load_record(
        nbformat.read(folder / "out.ipynb", as_version=4).cells[1].metadata["qloop"]
    )
    assert record.context is not None
    assert [a.kind for a in record.context.attachments] == ["table", "image", "variable"]


def test_replay_says_when_an_attached_cell_was_edited(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = headless_notebook(["%load_ext qloop_kernel", "rate = 0.2", "%%agent --with @rate\nCheck."])
    nb.cells[1].id = "rate"
    with StandInAPI([Reply([text("The rate is 0.2.")])]) as api:
        for name, value in {**api.environment(), **context_env(project)}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("JPY_SESSION_NAME")
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        assert "rate = 0.2" in json.dumps(api.requests[0].body["messages"][0])
        record = load_record(nb.cells[2].metadata["qloop"])
        assert record.fingerprint is not None
        assert [c.cell_id for c in record.fingerprint.cells] == ["rate"]
        nb.cells[1].source = "rate = 0.25"
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        assert len(api.requests) == 1  # replayed
    assert "the cell that defines rate was edited" in shown(nb.cells[2])
