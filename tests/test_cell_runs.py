"""run_cell and add_cell with run: the kernel runs the cell's source as the page holds it when the
call is decided (the card shows it), and the outputs land in that cell through the page (played
here by the test, answering the kernel's comm as the extension does); the model reads them."""

from __future__ import annotations

from typing import Any

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.tools.runtime import strip_ansi
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.test_card_visible import card_html, read
from tests.test_proposals import next_request
from tests.test_read_notebook import OPERATIONS, answer_hello

pytestmark = pytest.mark.kernel

RUNS = [*OPERATIONS, "cell_source", "set_outputs"]
CLEANING = "df = df.dropna()\nprint('rows', len(df))\ndf.shape"


def answer(lab: Any, comm_id: str, request: dict[str, Any], **fields: Any) -> None:
    lab.comm_msg(comm_id, {"op": "ack", "request_id": request["request_id"], "ok": True, **fields})


def refuse(lab: Any, comm_id: str, request: dict[str, Any], error: str) -> None:
    lab.comm_msg(comm_id, {"op": "ack", "request_id": request["request_id"], "ok": False,
                           "error": error})  # fmt: skip


def start(lab: Any, api: StandInAPI, replies: list[Reply], head: str = "") -> tuple[str, str]:
    api.set_script(replies)
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None, 3]})")
    cell = lab.execute(f"%%agent {head}\nRe-run the cleaning.", cell_id="agent")
    return cell, answer_hello(lab, cell, "work/a.ipynb", RUNS)


def test_run_cell_runs_the_source_the_card_showed_and_its_outputs_land_in_that_cell(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = start(lab, api, [
        Reply([tool_use("run_cell", {"cell_id": "clean"})]), Reply([text("done")])])  # fmt: skip
    seen: set[str] = set()
    asked = next_request(lab, cell, "cell_source", seen)
    assert asked["target"] == "clean" and asked["cell_id"] == "agent"
    answer(lab, comm_id, asked, cell_type="code", source=CLEANING)
    approve = lab.wait_for_button("Approve", parent=cell)
    assert "df.dropna()" in read(card_html(lab, cell, approve))  # the card shows the source
    ops = [m["content"]["data"].get("op") for m in lab.messages(cell, "comm_msg")]
    assert "set_outputs" not in ops  # nothing ran before the click
    lab.click(approve)
    sent = next_request(lab, cell, "set_outputs", seen)
    assert sent["target"] == "clean" and sent["source"] == CLEANING
    outputs = sent["outputs"]
    assert [o["output_type"] for o in outputs] == ["stream", "execute_result"]
    assert outputs[0] == {"output_type": "stream", "name": "stdout", "text": "rows 2\n"}
    assert outputs[1]["data"]["text/plain"] == "(2, 1)"
    assert outputs[1]["execution_count"] is None
    assert sent["effect"] == "df: DataFrame 3×1 → 2×1"  # what the run did to the namespace
    assert "namespace changes" not in sent["effect"]
    answer(lab, comm_id, sent)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    result = result_text(tool_results(api.requests[1])[0])
    assert "cell clean ran; its outputs are in that cell" in result
    assert "rows 2" in result and "(2, 1)" in result
    assert lab.messages(cell, "execute_result") == []  # the Out went to the cell it belongs to
    call = saved_record(lab, cell)["tool_calls"][0]
    assert call["input"] == {"cell_id": "clean", "source": CLEANING}
    assert call["decision"]["kind"] == "approved"
    assert lab.run("print(len(df))").strip() == "2"


def test_an_error_in_the_cell_lands_in_that_cell_and_the_model_reads_it(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = start(lab, api, [
        Reply([tool_use("run_cell", {"cell_id": "broken"})]), Reply([text("it failed")])],
        "--approve auto")  # fmt: skip
    seen: set[str] = set()
    answer(lab, comm_id, next_request(lab, cell, "cell_source", seen), cell_type="code",
           source="print('before')\n1 / 0")  # fmt: skip
    sent = next_request(lab, cell, "set_outputs", seen)
    error = sent["outputs"][-1]
    assert error["output_type"] == "error" and error["ename"] == "ZeroDivisionError"
    assert any("1 / 0" in strip_ansi(line) for line in error["traceback"])  # as IPython shows it
    answer(lab, comm_id, sent)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.messages(cell, "error") == []  # not shown as the agent cell's error
    block = tool_results(api.requests[1])[0]
    assert block.get("is_error") and "ZeroDivisionError" in result_text(block)
    assert saved_record(lab, cell)["tool_calls"][0]["decision"]["kind"] == "auto"


def test_cells_that_cannot_run_are_refused_before_anything_is_asked(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = start(lab, api, [
        Reply([tool_use("run_cell", {"cell_id": "notes"}),
               tool_use("run_cell", {"cell_id": "other"}),
               tool_use("run_cell", {"cell_id": "gone"}),
               tool_use("run_cell", {"cell_id": "agent"})]),
        Reply([text("none ran")])])  # fmt: skip
    seen: set[str] = set()
    answer(lab, comm_id, next_request(lab, cell, "cell_source", seen),
           cell_type="markdown", source="# notes")  # fmt: skip
    answer(lab, comm_id, next_request(lab, cell, "cell_source", seen),
           cell_type="code", source="%%agent\nanother task")  # fmt: skip
    refuse(lab, comm_id, next_request(lab, cell, "cell_source", seen), "no cell with id gone")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    results = [result_text(b) for b in tool_results(api.requests[1])]
    assert "cell notes is a markdown cell: only code cells run" in results[0]
    assert "cell other is an agent cell" in results[1]
    assert "the notebook has no cell with id 'gone'" in results[2]
    assert "the running agent cell: it cannot run itself" in results[3]
    cards = lab.widget_states(parent=cell, model_name="ButtonModel")
    assert not [s for s in cards if s.get("description") == "Approve"]  # no card was shown
    assert lab.run("print(len(df))").strip() == "3"


def test_an_accepted_cell_that_runs_runs_the_accepted_source_and_the_model_reads_both(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = start(lab, api, [
        Reply([tool_use("add_cell", {"source": "del df", "run": True})]),
        Reply([text("done")])])  # fmt: skip
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    proposal = propose["proposal"]
    assert proposal["run"] is True and proposal["kind"] == "add"
    assert proposal["risk"] == "destructive"  # it runs when accepted: the code's class
    edited = "df = df.fillna(0)\nint(df.a.sum())"
    answer(lab, comm_id, propose, decision="accepted", cell_id="new1", source=edited, reason="")
    sent = next_request(lab, cell, "set_outputs", seen)
    assert sent["target"] == "new1" and sent["source"] == edited
    assert sent["outputs"][-1]["data"]["text/plain"] == "4"
    answer(lab, comm_id, sent)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    result = result_text(tool_results(api.requests[1])[0])
    assert "accepted: added cell new1 after agent by the user; it ran." in result
    assert "cell new1 ran; its outputs are in that cell" in result and "result:\n4" in result
    assert lab.run("print(df.a.tolist())").strip() == "[1.0, 0.0, 3.0]"  # the edit ran, not del


def test_without_a_page_that_takes_outputs_no_cell_runs_are_offered(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text("nothing")])])
    cell = lab.execute("%%agent\nLook.", cell_id="agent")
    answer_hello(lab, cell, "work/a.ipynb", OPERATIONS)  # proposals, but no outputs
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    tools = {t["name"]: t for t in api.requests[0].body["tools"]}
    assert "add_cell" in tools and "run_cell" not in tools
    assert "run" not in tools["add_cell"]["input_schema"]["properties"]


def test_run_cell_shows_the_model_only_the_cell_id_it_names(lab: Any, api: StandInAPI) -> None:
    cell, comm_id = start(lab, api, [Reply([text("nothing")])])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    tools = {t["name"]: t for t in api.requests[0].body["tools"]}
    schema = tools["run_cell"]["input_schema"]
    assert list(schema["properties"]) == ["cell_id"] and schema["required"] == ["cell_id"]
    assert "run" in tools["add_cell"]["input_schema"]["properties"]


# -- qloop run: the runner sends the cells, and moves the outputs into the cell that ran ----------


def run_headless(policy: str) -> tuple[Any, list[Any], str]:
    import io
    import os

    import nbformat

    from qloop_kernel.headless.runner import AgentNotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nn = 1", id="setup"),
        nbformat.v4.new_code_cell("m = n * 10\nprint('n is', n)", id="show"),
        nbformat.v4.new_code_cell("%%agent\nSet n to 2 and show it.", id="agent"),
    ]
    script = [
        Reply([tool_use("run_code", {"code": "n = 2"})]),
        Reply([tool_use("run_cell", {"cell_id": "show"})]),
        Reply([text("done")]),
    ]
    progress = io.StringIO()
    with StandInAPI(script) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": policy}
        AgentNotebookClient(nb, progress=progress, timeout=120).execute(env=env)
        requests = list(api.requests)
    return nb, requests, progress.getvalue()


def test_qloop_run_runs_the_cell_and_its_outputs_land_in_that_cell_of_the_output() -> None:
    nb, requests, progress = run_headless("auto")
    show = nb.cells[1]
    assert [o.get("text") for o in show.outputs] == ["n is 2\n"]
    assert show.execution_count is None  # not a run of this notebook's order
    assert all("application/vnd.qloop.cell-run+json" not in o.get("data", {})
               for o in nb.cells[2].outputs)  # fmt: skip
    result = result_text(tool_results(requests[2])[0])
    assert "cell show ran; its outputs are in that cell" in result and "n is 2" in result
    assert "qloop run: ran cell show: m: int 10 → 20" in progress
    tools = {t["name"]: t for t in requests[0].body["tools"]}
    assert "run_cell" in tools and "run" in tools["add_cell"]["input_schema"]["properties"]


def test_qloop_run_under_readonly_leaves_the_cell_as_it_ran() -> None:
    nb, requests, _ = run_headless("readonly")
    assert [o.get("text") for o in nb.cells[1].outputs] == ["n is 1\n"]
    assert nb.cells[1].execution_count == 2
    assert "readonly" in result_text(tool_results(requests[2])[0])
