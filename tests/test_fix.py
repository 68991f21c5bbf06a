"""The agent from any cell: ``%agent fix`` on a failed cell, ``%agent edit`` with an instruction, and
``%%agent --plan`` / ``--run-plan``, through a real kernel and the scripted stand-in. The page (the
extension) is played by the test: it answers the kernel's hello, read_notebook and proposals."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook.plan import PLAN_TOOLS
from qloop_kernel.notebook_view import notebook_view
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.test_cell_runs import answer
from tests.test_proposals import next_request
from tests.test_read_notebook import OPERATIONS, answer_hello

pytestmark = pytest.mark.kernel

SETUP = "import pandas as pd\nd = {'a': 1}"


def prompt_of(request: Any) -> str:
    """The text of the request's newest user message with text (the turn's task)."""
    for message in reversed(request.body["messages"]):
        content = message["content"]
        found = (
            content
            if isinstance(content, str)
            else "".join(b.get("text", "") for b in content if b.get("type") == "text")
        )
        if message["role"] == "user" and found:
            return found
    return ""


def tools_of(request: Any) -> set[str]:
    return {t["name"] for t in request.body["tools"]}


def serve_page(
    lab: Any, cell: str, cells: list[dict[str, Any]], decisions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Play the page until the cell ends: answer the hello, every read_notebook with ``cells``,
    and each proposal with the next of ``decisions``; return the proposals shown."""
    return serve(lab, cell, cells, decisions, answer_hello(lab, cell, "work/fix.ipynb", OPERATIONS))


def serve(
    lab: Any, cell: str, cells: list[dict[str, Any]], decisions: list[dict[str, Any]], comm_id: str
) -> list[dict[str, Any]]:
    """``serve_page`` on the kernel's comm ``comm_id``, already open."""
    seen: set[str] = set()
    shown: list[dict[str, Any]] = []

    def next_request() -> dict[str, Any] | None:
        for message in lab.messages(cell, "comm_msg"):
            data = message["content"]["data"]
            if data.get("op") in ("read_notebook", "propose") and data["request_id"] not in seen:
                return data  # type: ignore[no-any-return]
        return {} if lab.replied(cell) else None

    while (request := lab.wait_for(next_request, 60, "a page request")) != {}:
        seen.add(request["request_id"])
        answer: dict[str, Any] = {"op": "ack", "request_id": request["request_id"], "ok": True}
        if request["op"] == "read_notebook":
            answer.update(notebook_view(cells, cell_ids=request["cell_ids"], outputs=False))
        else:
            shown.append(request["proposal"])
            answer.update(decisions.pop(0))
        lab.comm_msg(comm_id, answer)
    return shown


def code(cell_id: str, source: str) -> dict[str, Any]:
    return {"id": cell_id, "cell_type": "code", "source": source, "metadata": {}, "outputs": []}


def accepted(cell_id: str, source: str) -> dict[str, Any]:
    return {"decision": "accepted", "cell_id": cell_id, "source": source, "reason": ""}


def assist(action: str) -> dict[str, Any]:
    """The metadata of the page's Fix, Explain or Edit request, sent with the cell's id."""
    return {"qloopAssist": action}


# The edit lines the page sends (assist.ts's quoting; labextension/test/assist.spec.ts checks them)
VECTORS = json.loads(
    (Path(__file__).parents[1] / "labextension/test/assist-vectors.json").read_text("utf-8")
)


def fail(lab: Any, source: str, cell_id: str) -> None:
    status = lab.complete(lab.execute(source, cell_id=cell_id), 60)["content"]["status"]
    assert status == "error"


def test_a_key_error_is_fixed_by_an_edit_of_the_failed_cell(lab: Any, api: StandInAPI) -> None:
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": "d.get('b', 0)"})]),
        Reply([text("d has no key 'b': the cell now reads it with a default.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    fail(lab, "value = d['b']", "lookup")
    cell = lab.execute("%agent fix", cell_id="fixer")
    cells = [code("setup", SETUP), code("lookup", "value = d['b']"), code("fixer", "%agent fix")]
    shown = serve_page(lab, cell, cells, [accepted("lookup", "d.get('b', 0)")])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[0])
    assert task.startswith("Fix the error of notebook cell lookup.")
    assert "value = d['b']" in task and "The error: KeyError: 'b'" in task
    assert "this cell, line 1, in <module>" in task
    assert "d  dict" in task or "\nd " in task  # the summary of the variable the line names
    assert "edit_cell on cell lookup" in task and "after cell setup" in task
    assert {"edit_cell", "add_cell", "run_code"} <= tools_of(api.requests[0])
    assert [(p["kind"], p["target"], p["source"]) for p in shown] == [
        ("edit", "lookup", "d.get('b', 0)")
    ]
    assert "now has the proposed source" in result_text(tool_results(api.requests[1])[0])
    record = saved_record(lab, cell)
    assert record["cell_id"] == "fixer" and record["prompt"].startswith("Fix the error")
    assert [c["name"] for c in record["tool_calls"]] == ["edit_cell"]


def test_a_name_error_is_fixed_by_an_import_cell_added_before_it(lab: Any, api: StandInAPI) -> None:
    api.set_script([
        Reply([tool_use("add_cell", {"source": "import numpy as np", "after": "setup"})]),
        Reply([text("np was never imported.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    fail(lab, "x = np.arange(3)", "arange")
    cell = lab.execute("%agent fix arange", cell_id="fixer")
    cells = [code("setup", SETUP), code("arange", "x = np.arange(3)"), code("fixer", "")]
    shown = serve_page(lab, cell, cells, [accepted("imports", "import numpy as np")])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "NameError: name 'np' is not defined" in prompt_of(api.requests[0])
    assert [(p["kind"], p["after"]) for p in shown] == [("add", "setup")]
    said = result_text(tool_results(api.requests[1])[0])
    assert said.startswith("accepted: added cell imports after setup")


def test_a_pandas_value_error_and_a_rejection_whose_reason_reaches_the_agent(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "parse",
                                      "source": "n = pd.to_numeric(s, errors='coerce')"})]),
        Reply([text("Understood.")]),
    ])  # fmt: skip
    lab.run(SETUP + "\ns = pd.Series(['1', 'x'])", cell_id="setup")
    fail(lab, "n = pd.to_numeric(s)", "parse")
    cell = lab.execute("%agent fix", cell_id="fixer")
    cells = [code("setup", SETUP), code("parse", "n = pd.to_numeric(s)"), code("fixer", "")]
    rejected = {"decision": "rejected", "cell_id": "", "source": "", "reason": "keep the x rows"}
    serve_page(lab, cell, cells, [rejected])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[0])
    assert "ValueError: Unable to parse string" in task
    assert "pandas" in task.split("Traceback")[1]  # the innermost library frames
    assert task.count("pandas/") <= 3
    assert "\ns " in task or "s  Series" in task  # the series the failing line names
    assert "keep the x rows" in result_text(tool_results(api.requests[1])[0])


def test_a_cell_edited_since_it_failed_is_fixed_from_its_current_source(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text("Nothing to change now.")])])
    fail(lab, "1 / 0", "divide")
    cell = lab.execute("%agent fix divide", cell_id="fixer")
    serve_page(lab, cell, [code("divide", "1 / 1"), code("fixer", "")], [])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[0])
    assert "edited after it failed" in task and "```python\n1 / 1\n```" in task
    assert "```python\n1 / 0\n```" in task and "ZeroDivisionError" in task
    assert "edited after it failed" in lab.stdout(cell) + str(lab.outputs(cell))


def test_a_secret_in_the_traceback_and_a_deep_recursion_are_sent_redacted_and_bounded(
    lab: Any, api: StandInAPI
) -> None:
    secret = "sk-ant-api03-" + "Q" * 40
    api.set_script([Reply([text("The function never stops.")])])
    source = f"def f(n):\n    return f(n + 1) if n < 5000 else {{}}['{secret}']\nf(0)"
    fail(lab, source, "deep")
    cell = lab.execute("%agent fix", cell_id="fixer")
    serve_page(lab, cell, [code("deep", source), code("fixer", "")], [])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[0])
    assert secret not in str(api.requests[0].body) and "[REDACTED]" in task
    assert "RecursionError" in task
    assert task.count("this cell, line") <= 8 and "frames left out" in task
    assert len(task) < 8_000


def test_bad_input_says_why_there_is_nothing_to_fix(lab: Any, api: StandInAPI) -> None:
    def error_of(source: str) -> str:
        msg_id = lab.execute(source, cell_id="fixer")
        assert lab.complete(msg_id, 60)["content"]["status"] == "error"
        return str(lab.stderr(msg_id))

    assert "nothing failed since the kernel started" in error_of("%agent fix")
    lab.run("ok = 1", cell_id="fine")
    assert "cell 'fine' has not failed since the kernel started" in error_of("%agent fix fine")
    fail(lab, "%%agent --no-such-option\nDo it.", "task")
    assert "is an agent cell" in error_of("%agent fix task")
    assert "nothing failed" in error_of("%agent fix")  # an agent cell's error is not a fix's
    fail(lab, "missing_name", "later")
    lab.run("missing_name = 2", cell_id="later")  # it ran without error since
    assert "has not failed" in error_of("%agent fix later")
    fail(lab, "missing", "gone")
    lab.restart()
    lab.run("%load_ext qloop_kernel")
    assert "nothing failed since the kernel started" in error_of("%agent fix")
    assert "cell 'gone' has not failed" in error_of("%agent fix gone")
    assert api.requests == []  # no model call for any of these


def test_without_a_page_that_shows_proposals_a_fix_says_what_it_needs(
    lab: Any, api: StandInAPI
) -> None:
    fail(lab, "1 / 0", "divide")
    msg_id = lab.execute("%agent fix", cell_id="fixer")  # no page answers the hello
    assert lab.complete(msg_id, 60)["content"]["status"] == "error"
    assert "needs a page that shows proposals" in lab.stderr(msg_id)
    assert api.requests == []


def test_edit_with_an_instruction_proposes_an_edit_of_that_cell(lab: Any, api: StandInAPI) -> None:
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "plot", "source": "df.plot(title='a')"})]),
        Reply([text("Added a title.")]),
    ])  # fmt: skip
    cell = lab.execute('%agent edit plot "give the plot a title"', cell_id="editor")
    cells = [code("plot", "df.plot()"), code("editor", "")]
    shown = serve_page(lab, cell, cells, [accepted("plot", "df.plot(title='a')")])
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[0])
    assert task.startswith("Change notebook cell plot as the user asks: give the plot a title")
    assert "```python\ndf.plot()\n```" in task
    assert [(p["kind"], p["target"]) for p in shown] == [("edit", "plot")]


def test_a_plan_runs_nothing_and_the_edited_plan_is_what_the_next_turn_receives(
    lab: Any, api: StandInAPI
) -> None:
    plan = "1. Drop the rows with nulls.\n2. Plot a by index."
    api.set_script([
        Reply([tool_use("run_code", {"code": "df = None"})]),  # not offered: refused
        Reply([text(plan)]),
        Reply([text("done")]),
    ])  # fmt: skip
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None]})")
    planned = lab.execute("%%agent --plan --approve auto\nClean df and plot it.", cell_id="plan")
    assert lab.complete(planned, 60)["content"]["status"] == "ok"
    assert tools_of(api.requests[0]) <= PLAN_TOOLS and "run_code" not in tools_of(api.requests[0])
    assert "Clean df and plot it." in prompt_of(api.requests[0])
    assert "unknown tool" in result_text(tool_results(api.requests[1])[0]).lower()
    assert lab.run("print(df is None)").strip() == "False"  # nothing ran
    record = saved_record(lab, planned)
    assert record["answer"] == plan and "Clean df and plot it." in record["prompt"]
    edited = "1. Drop the rows with nulls only."
    ran = lab.execute(f"%%agent --run-plan --approve auto\n{edited}", cell_id="run")
    assert lab.complete(ran, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[2])
    assert task.startswith("Carry out this plan for the task: Clean df and plot it.")
    assert edited in task and "Plot a by index" not in task
    assert "run_code" in tools_of(api.requests[2])


def test_run_plan_without_a_plan_says_so(lab: Any, api: StandInAPI) -> None:
    msg_id = lab.execute("%agent --run-plan", cell_id="run")
    assert lab.complete(msg_id, 60)["content"]["status"] == "error"
    assert "no plan in this session" in lab.stderr(msg_id)
    both = lab.execute("%%agent --plan --run-plan\nDo it.", cell_id="both")
    assert lab.complete(both, 60)["content"]["status"] == "error"
    assert "give one of them" in lab.stderr(both)


def test_qloop_run_fixes_under_the_policy_and_refuses_a_proposal_readonly_would_ask() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nd = {'a': 1}", id="setup"),
        nbformat.v4.new_code_cell("value = d['b']", id="lookup"),
        nbformat.v4.new_code_cell("%agent fix", id="fixer"),
        nbformat.v4.new_code_cell("%agent explain lookup", id="explainer"),
    ]
    script = [Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": "d.get('b')"})]),
              Reply([text("use a default")]), Reply([text("It reads a missing key.")])]  # fmt: skip
    progress = io.StringIO()
    with StandInAPI(script) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": "readonly"}
        client = AgentNotebookClient(nb, progress=progress, timeout=120, allow_errors=True)
        client.execute(env=env)
        client.apply_proposals()
        requests = list(api.requests)
    assert "The error: KeyError: 'b'" in prompt_of(requests[0])
    assert "readonly" in result_text(tool_results(requests[1])[0])
    assert nb.cells[1].source == "value = d['b']"  # left as it was
    assert "qloop run: edit_cell not applied: " in progress.getvalue()
    explained = prompt_of(requests[2])
    assert "read_notebook" in tools_of(requests[2])  # an agent cell too: it has the runner's view
    assert explained.startswith("Explain notebook cell lookup to the user: what it does and why")
    assert "```python\nvalue = d['b']\n```" in explained and "KeyError: 'b'" in explained


def test_the_pages_fix_runs_beside_the_cell_goes_on_after_a_failed_fix_and_is_undone(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": "value = d['c']"})]),
        Reply([text("Read key c.")]),
        Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": "value = d.get('b', 0)"})]),
        Reply([text("Now with a default.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    fail(lab, "value = d['b']", "lookup")
    first = lab.execute("%agent fix lookup", cell_id="lookup", metadata=assist("fix"))
    comm_id = answer_hello(lab, first, "work/fix.ipynb", [*OPERATIONS, "revert_cell"])
    cells = [code("setup", SETUP), code("lookup", "value = d['b']")]
    shown = serve(lab, first, cells, [{**accepted("lookup", "value = d['c']"),
                                       "previous": "value = d['b']"}], comm_id)  # fmt: skip
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    assert [(p["kind"], p["target"]) for p in shown] == [("edit", "lookup")]  # its own source
    ops = [m["content"]["data"].get("op") for m in lab.messages(first, "comm_msg")]
    assert "set_metadata" not in ops  # the cell's own record is left alone: the page saves it
    record = saved_record(lab, first)  # the mirror, shown in the page's area beside the cell
    assert record["cell_id"] == "lookup" and record["prompt"].startswith("Fix the error")
    fail(lab, "value = d['c']", "lookup")  # Accept and run: the page runs it, it fails again
    second = lab.execute("%agent fix", cell_id="lookup", metadata=assist("fix"))
    cells = [code("setup", SETUP), code("lookup", "value = d['c']")]
    serve(lab, second, cells, [{**accepted("lookup", "value = d.get('b', 0)"),
                                "previous": "value = d['c']"}], comm_id)  # fmt: skip
    assert lab.complete(second, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[2])
    assert task.startswith("Fix the error of notebook cell lookup.")  # still the failed cell
    assert "goes on from your earlier fix of this cell in this conversation (1 so far)" in task
    assert "KeyError: 'c'" in task and "```python\nvalue = d['c']\n```" in task
    assert "Read key c." in str(api.requests[2].body["messages"])  # the same conversation
    undo = lab.execute("%agent undo")
    revert = next_request(lab, undo, "revert_cell", set())
    assert (revert["target"], revert["kind"]) == ("lookup", "edit")
    assert (revert["source"], revert["previous"]) == ("value = d.get('b', 0)", "value = d['c']")
    answer(lab, comm_id, revert)
    assert lab.complete(undo, 60)["content"]["status"] == "ok"
    assert "cell lookup has its source from before the step again" in lab.stdout(undo)


def test_explain_reads_the_cell_and_its_error_and_runs_or_proposes_nothing(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("run_code", {"code": "d['b'] = 1"})]),  # not offered: refused
        Reply([text("It reads key b of d, which d lacks.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    fail(lab, "value = d['b']", "lookup")
    cell = lab.execute("%agent explain lookup", cell_id="lookup", metadata=assist("explain"))
    shown = serve_page(lab, cell, [code("setup", SETUP), code("lookup", "value = d['b']")], [])
    assert lab.complete(cell, 60)["content"]["status"] == "ok" and shown == []
    task = prompt_of(api.requests[0])
    assert task.startswith(
        "Explain notebook cell lookup to the user: what it does and why it fails."
    )
    assert "```python\nvalue = d['b']\n```" in task and "KeyError: 'b'" in task
    assert "d  dict" in task or "\nd " in task
    assert tools_of(api.requests[0]) <= PLAN_TOOLS
    assert "unknown tool" in result_text(tool_results(api.requests[1])[0]).lower()
    assert lab.run("print(d)").strip() == "{'a': 1}"  # nothing ran
    assert saved_record(lab, cell)["answer"] == "It reads key b of d, which d lacks."
    again = lab.execute("%agent fix lookup", cell_id="fixer")  # still the failed cell to fix
    assert "has not failed" not in str(lab.complete(again, 60)["content"])


def test_explain_without_a_page_uses_the_source_the_cell_ran_with(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text("It makes a dict.")]), Reply([text("Still a dict.")])])
    lab.run(SETUP, cell_id="setup")
    for _ in range(2):  # the first is not a run of the cell: the second sees its source too
        cell = lab.execute("%agent explain setup", cell_id="setup", metadata=assist("explain"))
        assert lab.complete(cell, 60)["content"]["status"] == "ok"  # no page answers
    for request in api.requests:
        task = prompt_of(request)
        assert task.startswith("Explain notebook cell setup to the user: what it does.")
        assert f"```python\n{SETUP}\n```" in task and "fails" not in task.splitlines()[0]
    missing = lab.execute("%agent explain nowhere", cell_id="asker")
    assert lab.complete(missing, 60)["content"]["status"] == "error"
    assert "no code cell with id 'nowhere'" in lab.stderr(missing)
    assert len(api.requests) == 2


def test_edit_with_agent_gets_the_instruction_intact_quotes_newlines_and_all(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "plot", "source": "total = 1"})]),
        Reply([text("Renamed.")]),
        *[Reply([text("Noted.")]) for _ in VECTORS],
    ])  # fmt: skip
    lab.run("x = 'EXPANDED'\ny = 'EXPANDED'")
    first = lab.execute(VECTORS[0]["line"], cell_id="plot", metadata=assist("edit"))
    comm_id = answer_hello(lab, first, "work/fix.ipynb", OPERATIONS)
    shown = serve(lab, first, [code("plot", "t = 1")], [accepted("plot", "total = 1")], comm_id)
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    assert [(p["kind"], p["target"]) for p in shown] == [("edit", "plot")]  # its own source
    typed = '%agent edit plot "say \\"hi\\" twice"'  # typed by hand: JSON quotes work too
    for vector in [*VECTORS[1:], {"instruction": 'say "hi" twice', "line": typed}]:
        cell = lab.execute(vector["line"], cell_id="plot", metadata=assist("edit"))
        serve(lab, cell, [code("plot", "total = 1")], [], comm_id)
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
    asked = list(dict.fromkeys(prompt_of(r) for r in api.requests))  # each turn's task
    for vector, task in zip(VECTORS + [{"instruction": 'say "hi" twice'}], asked, strict=True):
        head = f"Change notebook cell plot as the user asks: {vector['instruction'].strip()}\n"
        assert task.startswith(head), (vector, task[:200])
    assert "EXPANDED" not in str([r.body for r in api.requests])
