"""read_notebook: the notebook as the user sees it, from the extension of the page that runs the
cell (played here by the test, answering the kernel's comm as the extension does) or from `qloop run`;
not offered where neither can show it. The view's bounds hold whatever the notebook holds."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook_view import (
    ANSWER_CHARS,
    OUTPUT_CHARS,
    SOURCE_CHARS,
    notebook_view,
    render,
    select,
)
from qloop_kernel.records import load_record
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 3000).decode()


def cells() -> list[Any]:
    v4 = nbformat.v4
    code = v4.new_code_cell("df = load()\ndf.head()", id="load", execution_count=3)
    code.outputs = [
        v4.new_output("stream", name="stdout", text="loaded 10 rows\n"),
        v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
        v4.new_output("execute_result", data={"text/plain": "   a  b\n0  1  2"}, execution_count=3),
    ]
    failed = v4.new_code_cell("df['missing']", id="fails", execution_count=4)
    failed.outputs = [v4.new_output("error", ename="KeyError", evalue="'missing'", traceback=["TB"])]
    agent = v4.new_code_cell("%%agent\nTidy df.", id="agent", metadata={"qloop": {"v": 1}})
    return [
        v4.new_markdown_cell("# Revenue\nMonthly revenue by region.", id="title"),
        code,
        failed,
        agent,
        v4.new_code_cell("plot(df)", id="later"),
    ]


def test_the_view_lists_every_cell_in_order_with_bounded_sources_and_output_summaries() -> None:
    view = notebook_view(cells(), path="work/revenue.ipynb")
    assert [c["id"] for c in view["cells"]] == ["title", "load", "fails", "agent", "later"]
    assert view["total_cells"] == 5 and view["missing"] == []
    load = view["cells"][1]
    assert load["execution_count"] == 3 and load["outputs"][1]["mime"] == ["image/png", "text/plain"]
    assert PNG[:200] not in json.dumps(view)  # never image bytes
    assert view["cells"][2]["outputs"] == [
        {"output_type": "error", "ename": "KeyError", "evalue": "'missing'"}
    ]
    assert view["cells"][3]["agent"] and view["cells"][4]["execution_count"] is None
    shown = render(view, running_cell="agent")
    assert shown.startswith("work/revenue.ipynb: 5 cells")
    assert "#1 id=title markdown\n# Revenue" in shown
    assert "#2 id=load code, In [3]" in shown and "-> stdout: loaded 10 rows" in shown
    assert "-> display: <Figure>; a figure" in shown
    assert "-> error: KeyError: 'missing'" in shown and "TB" not in shown
    assert "#4 id=agent code, not run, agent cell (this agent cell, running now)" in shown
    assert "#5 id=later code, not run" in shown


def test_the_view_is_bounded_per_cell_per_output_and_in_all() -> None:
    v4 = nbformat.v4
    long = v4.new_code_cell("x" * 10_000, id="long", execution_count=1)
    long.outputs = [v4.new_output("stream", name="stdout", text="y" * 5_000) for _ in range(7)]
    view = notebook_view([long])
    cell = view["cells"][0]
    assert len(cell["source"]) == SOURCE_CHARS and cell["source_chars"] == 10_000
    assert len(cell["outputs"]) == 5 and cell["more_outputs"] == 2
    assert len(cell["outputs"][0]["text"]) == OUTPUT_CHARS and cell["outputs"][0]["chars"] == 5_000
    shown = render(view)
    assert "[... 7,000 characters omitted; the rest of the cell's source ...]" in shown
    assert "[... 2 outputs omitted ...]" in shown
    big = [v4.new_code_cell("z" * 2_000, id=f"c{i}") for i in range(500)]
    for cell_ in big:
        cell_.outputs = [v4.new_output("stream", name="stdout", text="o" * 100_000)]
    view = notebook_view(big)
    assert len(json.dumps(view)) < 200_000
    kept = [c for c in view["cells"] if not c.get("omitted")]
    assert sum(len(c["source"]) + len(c["outputs"][0]["text"]) for c in kept) <= ANSWER_CHARS
    assert view["cells"][-1] == {"id": "c499", "cell_type": "code", "execution_count": None,
                                 "agent": False, "source": "", "source_chars": 2_000,
                                 "outputs": [], "more_outputs": 1, "omitted": True}  # fmt: skip
    shown = render(view)
    assert "cells listed without their content: read them by id" in shown
    assert "[..." not in shown.split("\n")[-1]  # every cell is listed, none cut from the middle


def test_cells_by_id_with_unknown_ids_named_and_outputs_left_out_on_request() -> None:
    view = notebook_view(cells(), cell_ids=["fails", "nope"], outputs=False)
    assert [c["id"] for c in view["cells"]] == ["fails"] and view["missing"] == ["nope"]
    assert "outputs" not in view["cells"][0]
    again = select(notebook_view(cells()), ["later", "gone"], outputs=False)
    assert [c["id"] for c in again["cells"]] == ["later"] and again["missing"] == ["gone"]
    assert "outputs" not in again["cells"][0]
    assert "no cell with these ids: gone" in render(again)


def test_a_saved_notebooks_odd_cells_are_described_not_raised_on() -> None:
    odd = [{"cell_type": "code", "source": ["a = 1\n", "b = 2"], "outputs": [None, {"x": 1}]},
           {"cell_type": "raw", "source": 5, "metadata": "bad"}]  # fmt: skip
    view = notebook_view(odd)
    assert view["cells"][0]["source"] == "a = 1\nb = 2"
    assert view["cells"][1]["source"] == "" and not view["cells"][1]["agent"]
    assert "#2 id= raw" in render(view)


# -- through a real kernel, the page's side played by the test --------------------------------------


OPERATIONS = ["hello", "set_metadata", "set_notebook_metadata", "read_notebook", "propose"]


def answer_hello(lab: Any, parent: str, path: str, operations: list[str] | None = None) -> str:
    """Answer the kernel's ``hello`` as the extension does, listing its operations."""

    def opened() -> dict[str, Any] | None:
        for message in lab.messages(parent, "comm_open"):
            content = message["content"]
            if content["target_name"] == "qloop" and str(
                content.get("data", {}).get("request_id")
            ).startswith("g"):
                return content  # type: ignore[no-any-return]
        return None

    content = lab.wait_for(opened, 30, "the kernel's hello")
    operations = OPERATIONS[:-1] if operations is None else operations  # no proposals
    ack = {"op": "ack", "request_id": content["data"]["request_id"], "ok": True,
           "frontend": "jupyterlab", "version": "test", "notebook_path": path,
           "notebook_grants": None, "operations": operations}  # fmt: skip
    lab.comm_msg(content["comm_id"], ack)
    return str(content["comm_id"])


def _tools(request: Any) -> list[str]:
    return [t["name"] for t in request.body["tools"]]


@pytest.mark.kernel
def test_a_page_with_the_extension_answers_read_notebook_and_the_model_reads_it(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([tool_use("read_notebook", {"cells": ["load", "nope"]})]),
                    Reply([text("read")])])  # fmt: skip
    cell = lab.execute("%%agent\nWhat does the notebook do?", cell_id="agent")
    comm_id = answer_hello(lab, cell, path="work/revenue.ipynb")
    request = lab.wait_for(
        lambda: next((m["content"]["data"] for m in lab.messages(cell, "comm_msg")
                      if m["content"]["data"].get("op") == "read_notebook"), None),  # fmt: skip
        30,
        "read_notebook",
    )
    assert request["cell_ids"] == ["load", "nope"] and request["outputs"] is True
    assert request["cell_id"] == "agent"  # only the view holding the running cell answers
    view = notebook_view(cells(), cell_ids=request["cell_ids"], path="work/revenue.ipynb")
    lab.comm_msg(comm_id, {"op": "ack", "request_id": request["request_id"], "ok": True, **view})
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "read_notebook" in _tools(api.requests[0])
    result = result_text(tool_results(api.requests[1])[0])
    assert "#1 id=load code, In [3]" in result and "no cell with these ids: nope" in result
    egress = saved_record(lab, cell)["egress"]
    assert {"kind": "cell", "name": "read_notebook", "chars": len(result)} in egress


@pytest.mark.kernel
def test_without_a_page_that_can_read_the_notebook_the_tool_is_not_offered(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text("no notebook here")])])
    cell = lab.execute("%%agent\nWhat does the notebook do?", cell_id="agent")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"  # no page answered the hello
    assert "read_notebook" not in _tools(api.requests[0])
    assert "notebook_history" in _tools(api.requests[0])


# -- qloop run: the runner sends the notebook it executes -------------------------------------------


@pytest.mark.kernel
def test_qloop_run_answers_read_notebook_with_the_notebook_as_it_runs() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Revenue", id="title"),
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nprint('ready')", id="setup"),
        nbformat.v4.new_code_cell("%%agent\nWhat is in this notebook?", id="agent"),
        nbformat.v4.new_code_cell("plot(df)", id="later"),
    ]
    script = [Reply([tool_use("read_notebook", {})]), Reply([text("a title and a setup cell")])]
    with StandInAPI(script) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": "auto"}
        client = AgentNotebookClient(nb, progress=io.StringIO(), timeout=120, allow_errors=True)
        client.notebook_path = "work/revenue.ipynb"
        client.execute(env=env)
        result = result_text(tool_results(api.requests[1])[0])
    assert result.startswith("work/revenue.ipynb: 4 cells")
    assert "#1 id=title markdown\n# Revenue" in result
    assert "#2 id=setup code, In [1]" in result and "-> stdout: ready" in result
    assert "#3 id=agent code, not run (this agent cell, running now)" in result
    assert "#4 id=later code, not run" in result
    record = load_record(nb.cells[2].metadata["qloop"])
    assert any(e.kind == "cell" and e.name == "read_notebook" for e in record.egress)


# -- one view on both sides: the extension's notebookview.ts is checked against these vectors ------

VECTORS_JSON = Path(__file__).parents[1] / "labextension" / "test" / "notebook-view-vectors.json"


def vector_inputs() -> list[dict[str, Any]]:
    """Notebooks and requests whose views both builders must give alike."""
    plain = json.loads(json.dumps(cells()))
    v4 = nbformat.v4
    long = v4.new_code_cell(["x" * 2_000, "y" * 2_000], id="long", execution_count=1)
    long.outputs = [v4.new_output("stream", name="stdout", text="o" * 900) for _ in range(7)]
    many = [v4.new_code_cell("s" * 1_000, id=f"c{i}", metadata={}) for i in range(32)]
    odd = [{"cell_type": "code", "source": ["a = 1\n", 5, "b"], "metadata": "x",
            "outputs": [None, {"text": "no type"}, {"output_type": "stream", "text": "t"}]},
           {"id": 7, "cell_type": "raw", "source": None}]  # fmt: skip
    return [
        {"path": "work/revenue.ipynb", "cells": plain, "cell_ids": None, "outputs": True},
        {"path": "", "cells": plain, "cell_ids": ["fails", "nope", "fails"], "outputs": False},
        {"path": "", "cells": json.loads(json.dumps([long])), "cell_ids": None, "outputs": True},
        {"path": "", "cells": json.loads(json.dumps(many)), "cell_ids": None, "outputs": True},
        {"path": "", "cells": odd, "cell_ids": None, "outputs": True},
    ]


def test_the_extension_builds_the_same_view_from_the_same_notebook() -> None:
    """labextension/test/notebookview.spec.ts checks notebookView against the same vectors."""
    expected = [
        {**case, "view": notebook_view(case["cells"], case["cell_ids"], case["outputs"],
                                       case["path"])}  # fmt: skip
        for case in vector_inputs()
    ]
    assert json.loads(VECTORS_JSON.read_text(encoding="utf-8")) == expected, (
        "regenerate labextension/test/notebook-view-vectors.json from vector_inputs()"
    )
