"""Undo of an accepted cell: ``%agent undo`` (and the Undo shown with the step) takes back the
cell the user accepted (an added cell is deleted, an edited cell gets its source from before),
with what the cell's run did to the variables; a cell the user changed since is left as it is,
and the undo says so. The page is played by the test, answering the kernel's comm as the
extension does."""

from __future__ import annotations

from typing import Any

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.test_cell_runs import RUNS, answer, refuse
from tests.test_proposals import next_request
from tests.test_read_notebook import answer_hello
from tests.test_undo import shown_text

pytestmark = pytest.mark.kernel

UNDOES = [*RUNS, "revert_cell"]


def undo_refused(lab: Any) -> str:
    """What ``%agent undo`` says when it refuses."""
    undo = lab.execute("%agent undo")
    lab.complete(undo, 60)
    return f"{lab.error_text(undo)}{lab.stderr(undo)}"


def turn(
    lab: Any, api: StandInAPI, call: dict[str, Any], name: str = "add_cell"
) -> tuple[str, str]:
    api.set_script([Reply([tool_use(name, call)]), Reply([text("done")])])
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None, 3]})")
    cell = lab.execute("%%agent\nWork on df.", cell_id="agent")
    return cell, answer_hello(lab, cell, "work/a.ipynb", UNDOES)


def test_undo_deletes_the_accepted_cell_and_puts_back_what_its_run_changed(
    lab: Any, api: StandInAPI
) -> None:
    source = "df = df.dropna()\nz = 42"
    cell, comm_id = turn(lab, api, {"source": source, "run": True})
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    answer(lab, comm_id, propose, decision="accepted", cell_id="new1", source=source, reason="")
    answer(lab, comm_id, next_request(lab, cell, "set_outputs", seen))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print(len(df), z)").strip() == "2 42"

    undo = lab.execute("%agent undo")
    revert = next_request(lab, undo, "revert_cell", seen)
    assert revert["cell_id"] == "agent" and revert["target"] == "new1"
    assert revert["kind"] == "add" and revert["source"] == source
    answer(lab, comm_id, revert)
    assert lab.complete(undo, 60)["content"]["status"] == "ok"
    said = lab.stdout(undo)
    assert "removed cell new1 (added by the step)" in said
    assert "removed z (created by the step)" in said and "restored df" in said
    assert lab.run("print(len(df), 'z' in dir())").strip() == "3 False"
    # Once undone, there is nothing left to undo.
    assert "nothing to undo" in undo_refused(lab)


def test_undo_puts_an_edited_cell_back_as_it_was(lab: Any, api: StandInAPI) -> None:
    cell, comm_id = turn(lab, api, {"cell_id": "plot", "source": "df.plot()"}, "edit_cell")
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    earlier = {"agent_cell": "older", "step": "s1"}
    answer(lab, comm_id, propose, decision="accepted", cell_id="plot", source="df.plot()",
           reason="", previous="df.head()", previous_provenance=earlier)  # fmt: skip
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "edited cell plot" in shown_text(lab, cell)  # shown with the step's Undo
    undo = lab.click(lab.wait_for_button("Undo", parent=cell))
    revert = next_request(lab, undo, "revert_cell", seen)
    assert revert["kind"] == "edit" and revert["target"] == "plot"
    assert revert["source"] == "df.plot()" and revert["previous"] == "df.head()"
    assert revert["previous_provenance"] == earlier
    answer(lab, comm_id, revert)
    lab.wait_for(lambda: "↶ undone" in shown_text(lab, cell), 30, "the undo status")
    assert "cell plot has its source from before the step again" in shown_text(lab, cell)


def test_a_cell_changed_since_is_left_as_it_is_and_the_undo_says_so(
    lab: Any, api: StandInAPI
) -> None:
    cell, comm_id = turn(lab, api, {"source": "y = 1", "run": True})
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    answer(lab, comm_id, propose, decision="accepted", cell_id="new1", source="y = 1", reason="")
    answer(lab, comm_id, next_request(lab, cell, "set_outputs", seen))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    undo = lab.execute("%agent undo")
    refuse(lab, comm_id, next_request(lab, undo, "revert_cell", seen),
           "cell new1 was changed since it was accepted: left as it is")  # fmt: skip
    assert lab.complete(undo, 60)["content"]["status"] == "ok"
    said = lab.stdout(undo)
    assert "cell new1 left as it is" in said and "removed y (created by the step)" in said
    # The model reads what was undone, and what was not, in its next turn.
    api.set_script([Reply([text("noted")])])
    lab.run("%%agent\nGo on.")
    told = str(api.requests[-1].body["messages"])
    assert "The user undid this step" in told and "cell new1 left as it is" in told


def test_a_page_that_cannot_take_cells_back_leaves_undo_as_before(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([tool_use("add_cell", {"source": "w = 1"})]), Reply([text("done")])])
    cell = lab.execute("%%agent\nAdd a cell.", cell_id="agent")
    comm_id = answer_hello(lab, cell, "work/a.ipynb", RUNS)  # no revert_cell
    seen: set[str] = set()
    propose = next_request(lab, cell, "propose", seen)
    answer(lab, comm_id, propose, decision="accepted", cell_id="new1", source="w = 1", reason="")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert "nothing to undo" in undo_refused(lab)
