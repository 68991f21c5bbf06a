"""Cell proposals: add_cell and edit_cell through the one permission pipeline. Under `qloop run` the
policy decides and the runner writes the accepted ones into the output notebook once every cell has
run; in a page whose extension shows proposals, the page decides (played here by the test, answering
the kernel's comm as the extension does)."""

from __future__ import annotations

import io
import os
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook_view import CELL_RUN_MIME, PROVENANCE_KEY, proposed_cell_id
from qloop_kernel.records import load_record
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.test_read_notebook import OPERATIONS, answer_hello

pytestmark = pytest.mark.kernel

CLEAN = "df = df.dropna()"


def notebook() -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nimport pandas as pd\n"
                                  "df = pd.DataFrame({'a': [1, None, 3]})", id="setup"),  # fmt: skip
        nbformat.v4.new_code_cell("%%agent\nClean df and explain it.", id="agent"),
        nbformat.v4.new_code_cell("df.plot()", id="plot"),
    ]
    return nb


def proposing() -> list[Reply]:
    return [
        Reply([tool_use("add_cell", {"source": "## Cleaning", "cell_type": "markdown"})]),
        Reply([tool_use("add_cell", {"source": CLEAN})]),
        Reply([tool_use("edit_cell", {"cell_id": "plot", "source": "df.plot(title='a')"})]),
        Reply([text("Proposed a cleaning step.")]),
    ]


def run_headless(policy: str) -> tuple[Any, list[Any], str]:
    nb = notebook()
    progress = io.StringIO()
    with StandInAPI(proposing()) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": policy}
        client = AgentNotebookClient(nb, progress=progress, timeout=120)
        client.execute(env=env)
        client.apply_proposals()
        requests = list(api.requests)
    return nb, requests, progress.getvalue()


def test_qloop_run_under_auto_writes_accepted_proposals_into_the_notebook_without_running_them():
    nb, requests, progress = run_headless("auto")
    first = proposed_cell_id("agent", 1, "## Cleaning")
    second = proposed_cell_id("agent", 2, CLEAN)
    assert [c.get("id") for c in nb.cells] == ["setup", "agent", first, second, "plot"]
    assert nb.cells[2].cell_type == "markdown" and nb.cells[3].source == CLEAN
    assert nb.cells[3].execution_count is None and nb.cells[3].outputs == []  # not run
    assert nb.cells[4].source == "df.plot(title='a')"
    for cell in nb.cells[2:]:
        mark = cell.metadata[PROVENANCE_KEY]
        assert mark["agent_cell"] == "agent" and mark["signature"]
    assert f"accepted: added cell {first} after agent" in result_text(tool_results(requests[1])[0])
    assert f"added cell {second} after {first}" in result_text(tool_results(requests[2])[0])
    assert f"qloop run: added cell {first} after agent" in progress
    assert "qloop run: changed cell plot" in progress
    record = load_record(nb.cells[1].metadata["qloop"])
    assert [c.decision.kind for c in record.tool_calls] == ["auto", "auto", "auto"]
    from qloop_kernel.headless.show import step_entry
    from qloop_kernel.records.html import to_html
    from qloop_kernel.records.text import to_markdown

    assert f"```python\n{CLEAN}\n```" in to_markdown(record)  # the proposal's source as code
    assert step_entry(record.tool_calls[1], False)["code"] == CLEAN
    assert "dropna" in to_html(record) and '"source"' not in to_html(record)
    assert nbformat.validate(nb) is None


def test_qloop_run_under_readonly_rejects_every_proposal_and_leaves_the_cells_as_they_were():
    nb, requests, progress = run_headless("readonly")
    assert [c.get("id") for c in nb.cells] == ["setup", "agent", "plot"]
    assert nb.cells[2].source == "df.plot()" and PROVENANCE_KEY not in nb.cells[2].metadata
    assert "qloop run: add_cell not applied: " in progress
    assert "qloop run: edit_cell not applied: " in progress
    denied = result_text(tool_results(requests[1])[0])
    assert "readonly" in denied


RUN_CLEAN = "df = df.dropna()\nprint(f'{len(df)} rows left')"
FAILING = "raise ValueError('no such column')"


def run_adding(policy: str) -> tuple[Any, list[Any], str]:
    """qloop run of a turn that adds cells with run: one that cleans df, one that raises."""
    nb = notebook()
    nb.cells[2] = nbformat.v4.new_code_cell("print('after:', len(df))", id="after")
    script = [
        Reply([tool_use("add_cell", {"source": RUN_CLEAN, "run": True})]),
        Reply([tool_use("add_cell", {"source": FAILING, "run": True})]),
        Reply([text("Cleaned.")]),
    ]
    progress = io.StringIO()
    with StandInAPI(script) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": policy}
        client = AgentNotebookClient(nb, progress=progress, timeout=120)
        client.execute(env=env)
        client.apply_proposals()
        requests = list(api.requests)
    return nb, requests, progress.getvalue()


def test_qloop_run_offers_add_cell_with_run_and_the_added_cell_runs_under_the_policy():
    nb, requests, progress = run_adding("auto")
    tool = next(t for t in requests[0].body["tools"] if t["name"] == "add_cell")
    assert "run" in tool["input_schema"]["properties"]
    first = proposed_cell_id("agent", 1, RUN_CLEAN)
    second = proposed_cell_id("agent", 2, FAILING)
    said = result_text(tool_results(requests[1])[0])
    assert said.startswith(f"accepted: added cell {first} after agent") and "it ran." in said
    assert "2 rows left" in said
    assert "no such column" in result_text(tool_results(requests[2])[0])
    assert [c.get("id") for c in nb.cells] == ["setup", "agent", first, second, "after"]
    added = nb.cells[2]
    assert [o.get("text") for o in added.outputs] == ["2 rows left\n"]  # its run's outputs
    assert added.metadata[PROVENANCE_KEY]["agent_cell"] == "agent"
    assert [o["ename"] for o in nb.cells[3].outputs] == ["ValueError"]  # added, with its error
    assert not any(CELL_RUN_MIME in o.get("data", {}) for o in nb.cells[1].outputs)
    assert nb.cells[4].outputs[0]["text"] == "after: 2\n"  # it ran in the kernel, in the turn
    assert f"qloop run: ran cell {first}" in progress and "no code cell" not in progress
    record = load_record(nb.cells[1].metadata["qloop"])
    assert [c.decision.kind for c in record.tool_calls] == ["auto", "auto"]
    assert nbformat.validate(nb) is None


def test_qloop_run_under_readonly_denies_an_added_cell_that_would_run_a_write():
    nb, requests, progress = run_adding("readonly")
    denied = result_text(tool_results(requests[1])[0])
    assert "readonly" in denied and "write" in denied
    assert [c.get("id") for c in nb.cells] == ["setup", "agent", "after"]
    assert nb.cells[2].outputs[0]["text"] == "after: 3\n"  # nothing ran
    assert "qloop run: add_cell not applied: " in progress


# -- a page whose extension shows proposals, played by the test -------------------------------------

def next_request(lab: Any, parent: str, op: str, seen: set[str]) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        for message in lab.messages(parent, "comm_msg"):
            data = message["content"]["data"]
            if data.get("op") == op and data.get("request_id") not in seen:
                return data  # type: ignore[no-any-return]
        return None

    request = lab.wait_for(found, 30, op)
    seen.add(request["request_id"])
    return request


def test_the_page_decides_proposals_and_the_model_reads_what_the_user_did(lab: Any, api: StandInAPI):
    api.set_script([
        Reply([tool_use("add_cell", {"source": CLEAN})]),
        Reply([tool_use("add_cell", {"source": "del df", "after": "agent"})]),
        Reply([text("done")]),
    ])  # fmt: skip
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None]})")
    cell = lab.execute("%%agent\nClean df.", cell_id="agent")
    comm_id = answer_hello(lab, cell, "work/a.ipynb", OPERATIONS)
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    proposal = propose["proposal"]
    assert propose["cell_id"] == "agent" and proposal["kind"] == "add"
    assert proposal["after"] == "agent" and proposal["source"] == CLEAN and not proposal["accepted"]
    assert proposal["risk"] == "write" and proposal["provenance"]["agent_cell"] == "agent"
    edited = CLEAN + "\ndf = df.reset_index(drop=True)"
    lab.comm_msg(comm_id, {"op": "ack", "request_id": propose["request_id"], "ok": True,
                           "decision": "accepted", "cell_id": "new1", "source": edited,
                           "reason": ""})  # fmt: skip
    # the second proposal names a cell: the kernel checks it exists before showing it
    read = next_request(lab, cell, "read_notebook", seen)
    cells = [{"id": i, "cell_type": "code", "execution_count": None, "agent": i == "agent",
              "source": "", "source_chars": 0} for i in ("agent", "new1")]  # fmt: skip
    lab.comm_msg(comm_id, {"op": "ack", "request_id": read["request_id"], "ok": True,
                           "notebook_path": "work/a.ipynb", "total_cells": 2, "cells": cells,
                           "missing": []})  # fmt: skip
    second = next_request(lab, cell, "propose", seen)
    assert "line 1: deletes df" in " ".join(second["proposal"]["reasons"])
    lab.comm_msg(comm_id, {"op": "ack", "request_id": second["request_id"], "ok": True,
                           "decision": "rejected", "cell_id": "", "source": "",
                           "reason": "keep df"})  # fmt: skip
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    first = result_text(tool_results(api.requests[1])[0])
    assert "added cell new1 after agent by the user" in first
    assert "the user edited the input before approving" in first and "reset_index" in first
    assert "keep df" in result_text(tool_results(api.requests[2])[0])
    calls = saved_record(lab, cell)["tool_calls"]
    assert [c["decision"]["kind"] for c in calls] == ["edited", "denied"]
    assert calls[0]["input"]["source"] == edited
    assert lab.run("print(len(df))").strip() == "2"  # nothing ran in the kernel


def test_without_a_page_that_shows_proposals_the_tools_are_not_offered(lab: Any, api: StandInAPI):
    api.set_script([Reply([text("nothing to propose")])])
    cell = lab.execute("%%agent\nClean df.", cell_id="agent")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    names = [t["name"] for t in api.requests[0].body["tools"]]
    assert "add_cell" not in names and "edit_cell" not in names


def test_a_replay_does_not_propose_again_and_says_where_each_cell_is_now():
    nb, _, _ = run_headless("auto")
    first = proposed_cell_id("agent", 1, "## Cleaning")
    second = proposed_cell_id("agent", 2, CLEAN)
    nb.cells = [c for c in nb.cells if c.get("id") != first]  # the user deleted one
    next(c for c in nb.cells if c.get("id") == second).source = CLEAN + "  # mine"  # edited one
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    progress = io.StringIO()
    with StandInAPI([]) as api:  # a replay asks no model
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": "auto"}
        client = AgentNotebookClient(nb, progress=progress, timeout=120)
        client.execute(env=env)
        client.apply_proposals()
        assert api.requests == []
    assert [c.get("id") for c in nb.cells] == ["setup", "agent", second, "plot"]  # nothing added
    shown = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                      for o in nb.cells[1].outputs)  # fmt: skip
    assert f"cell {first}, added by this turn, was deleted since" in shown
    assert f"cell {second}, added by this turn, was edited since" in shown
    assert "cell plot, changed by this turn, is in the notebook as accepted" in shown


def test_a_page_that_takes_the_comm_over_is_sent_the_waiting_proposal_again(
    lab: Any, api: StandInAPI
):
    api.set_script([Reply([tool_use("add_cell", {"source": CLEAN})]), Reply([text("done")])])
    cell = lab.execute("%%agent\nClean df.", cell_id="agent")
    comm_id = answer_hello(lab, cell, "work/a.ipynb", OPERATIONS)
    first = next_request(lab, cell, "propose", set())
    attached = lab.comm_msg(comm_id, {"op": "attached"})  # a reloaded page took the comm over
    again = lab.wait_for(
        lambda: next((m["content"]["data"] for m in lab.messages(attached, "comm_msg")
                      if m["content"]["data"].get("op") == "propose"), None),
        30, "the proposal sent again",
    )  # fmt: skip
    assert again == first
    lab.comm_msg(comm_id, {"op": "ack", "request_id": first["request_id"], "ok": True,
                           "decision": "accepted", "cell_id": "kept", "source": CLEAN,
                           "reason": ""})  # fmt: skip
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "added cell kept after agent" in result_text(tool_results(api.requests[1])[0])


def ack_proposal(lab: Any, comm_id: str, request: dict[str, Any], cell_id: str) -> None:
    lab.comm_msg(comm_id, {"op": "ack", "request_id": request["request_id"], "ok": True,
                           "decision": "accepted", "cell_id": cell_id,
                           "source": request["proposal"]["source"], "reason": ""})  # fmt: skip


def two_proposals(lab: Any, api: StandInAPI, operations: list[str]) -> tuple[str, str]:
    api.set_script([
        Reply([tool_use("add_cell", {"source": "## Cleaning", "cell_type": "markdown"}),
               tool_use("add_cell", {"source": CLEAN})]),
        Reply([text("done")]),
    ])  # fmt: skip
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None]})")
    cell = lab.execute("%%agent\nClean df.", cell_id="agent")
    return cell, answer_hello(lab, cell, "work/a.ipynb", operations)


def test_the_proposals_of_one_response_wait_together_and_are_decided_in_any_order(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = two_proposals(lab, api, [*OPERATIONS, "withdraw"])
    seen: set[str] = set()
    first = next_request(lab, cell, "propose", seen)
    second = next_request(lab, cell, "propose", seen)  # shown before the first is decided
    assert second["proposal"]["after_proposal"] == first["proposal"]["id"]
    assert second["proposal"]["after"] == "agent" and second["proposal"]["risk"] == "write"
    ack_proposal(lab, comm_id, second, "new2")  # Accept all answers them in any order
    ack_proposal(lab, comm_id, first, "new1")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    results = [result_text(b) for b in tool_results(api.requests[1])]
    assert "accepted: added cell new1 after agent by the user" in results[0]
    assert "accepted: added cell new2 after new1 by the user" in results[1]
    calls = saved_record(lab, cell)["tool_calls"]
    assert [c["decision"]["kind"] for c in calls] == ["approved", "approved"]


def test_a_page_that_cannot_withdraw_is_shown_one_proposal_at_a_time(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = two_proposals(lab, api, OPERATIONS)
    seen: set[str] = set()
    first = next_request(lab, cell, "propose", seen)
    ack_proposal(lab, comm_id, first, "new1")
    second = next_request(lab, cell, "propose", seen)
    # sent once the first was decided: it goes after the cell the first one added
    assert "after_proposal" not in second["proposal"] and second["proposal"]["after"] == "new1"
    ack_proposal(lab, comm_id, second, "new2")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"


def test_a_turn_that_stops_withdraws_the_proposals_shown_ahead(lab: Any, api: StandInAPI) -> None:
    cell, comm_id = two_proposals(lab, api, [*OPERATIONS, "withdraw"])
    seen: set[str] = set()
    next_request(lab, cell, "propose", seen)
    second = next_request(lab, cell, "propose", seen)
    lab.interrupt()  # Stop while the first waits
    withdraw = next_request(lab, cell, "withdraw", seen)
    assert withdraw["proposal"] == second["proposal"]["id"] and withdraw["cell_id"] == "agent"
    lab.comm_msg(comm_id, {"op": "ack", "request_id": withdraw["request_id"], "ok": True})
    assert lab.complete(cell, 60)["content"]["status"] == "error"
    assert len(api.requests) == 1  # the model is not called again


class _PageStoppedWhileSending:
    """The page side of the comm, as the kernel reaches it: the second proposal shown ahead is
    sent, then the user's Stop (a KeyboardInterrupt) lands before the kernel notes it."""

    operations = frozenset({"propose", "withdraw", "read_notebook"})

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.withdrawn: list[str] = []

    def send(self, op: str, **fields: Any) -> str:
        self.sent.append(fields["proposal"])
        if len(self.sent) == 2:
            raise KeyboardInterrupt
        return f"g{len(self.sent)}"

    def forget(self, request_id: str) -> None:
        pass

    def request(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        assert op == "withdraw"
        self.withdrawn.append(fields["proposal"])
        return {"ok": True}


def test_a_stop_while_a_proposal_is_sent_ahead_still_withdraws_it() -> None:
    from qloop_kernel.messages import ToolCall
    from qloop_kernel.notebook.proposals import CellProposals
    from qloop_kernel.policy.permissions import ApprovalRequest
    from qloop_kernel.policy.risk import Assessment

    page = _PageStoppedWhileSending()
    first = ToolCall("c1", "add_cell", {"source": "a = 1"})
    second = ToolCall("c2", "add_cell", {"source": "b = 2"})
    proposals = CellProposals(
        "agent", page, lambda: ["agent"], lambda _: Assessment("write", (), frozenset()),  # type: ignore[arg-type]
        upcoming=lambda: [second],
        would_ask=lambda call: ApprovalRequest(call, call.name),
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        proposals.decide(ApprovalRequest(first, "add_cell"))
    proposals.finish()  # the turn ends
    assert [p["id"] for p in page.sent] == ["c1", "c2"]
    assert page.withdrawn == ["c2"]
