"""The approval card through a real kernel driven like JupyterLab: every button and every scope.

What ran is read from the namespace afterwards; what the model was told, from the stand-in's
requests; what the card showed, from the widgets' state. The notebook's side of the comm (the
JupyterLab extension) is played by the test: it answers the kernel's ``hello`` with the notebook's
path and saved grants, and records what the kernel asks it to save.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import CellFailed, LabKernel

pytestmark = pytest.mark.kernel


def steps(*codes: str, answer: str = "done") -> list[Reply]:
    return [*(Reply([tool_use("run_code", {"code": c})]) for c in codes), Reply([text(answer)])]


def shown(lab: LabKernel, parent: str, model: str = "HTMLModel") -> str:
    """The text the cell's widgets of ``model`` show now, without tags."""
    states = lab.widget_states(parent=parent, model_name=model)
    raw = "\n".join(str(s.get("value", "")) for s in states)
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def buttons(lab: LabKernel, parent: str, description: str) -> list[dict[str, Any]]:
    states = lab.widget_states(parent=parent, model_name="ButtonModel")
    return [s for s in states if s.get("description") == description]


def plain_outputs(lab: LabKernel, parent: str) -> str:
    return "\n".join(
        str(m["content"]["data"].get("text/plain", ""))
        for m in lab.messages(parent, "display_data", "update_display_data")
    )


def decisions(lab: LabKernel, parent: str) -> list[str]:
    return [c["decision"]["kind"] for c in saved_record(lab, parent)["tool_calls"]]


def usage_error(lab: LabKernel, code: str) -> str:
    with pytest.raises(CellFailed) as failed:
        lab.run(code)
    return str(failed.value)


# -- the notebook's side of the comm --------------------------------------------------------------


def answer_hello(
    lab: LabKernel, parent: str, path: str = "work/analysis.ipynb", grants: Any = None
) -> str:
    """Answer the kernel's grants ``hello`` as the extension does; return the comm id."""

    def opened() -> dict[str, Any] | None:
        for message in lab.messages(parent, "comm_open"):
            content = message["content"]
            request = content.get("data", {})
            if content["target_name"] == "qloop" and str(request.get("request_id")).startswith("g"):
                return content  # type: ignore[no-any-return]
        return None

    content = lab.wait_for(opened, 30, "the kernel's hello")
    ack = {
        "op": "ack",
        "request_id": content["data"]["request_id"],
        "ok": True,
        "frontend": "jupyterlab",
        "version": "test",
        "notebook_path": path,
        "notebook_grants": grants,
    }
    lab.comm_msg(content["comm_id"], ack)
    return str(content["comm_id"])


def saved_grants(lab: LabKernel, parent: str) -> dict[str, Any]:
    """The newest notebook grants the kernel asked the frontend to save."""

    def newest() -> dict[str, Any] | None:
        found = [
            m["content"]["data"]
            for m in lab.messages(parent, "comm_msg")
            if m["content"]["data"].get("op") == "set_notebook_metadata"
        ]
        return found[-1] if found else None

    request = lab.wait_for(newest, 30, "set_notebook_metadata")
    assert request["key"] == "qloop_grants"
    return request  # type: ignore[no-any-return]


# -- every button ---------------------------------------------------------------------------------


def test_approve_runs_the_code_the_card_shows_with_its_class_and_reasons(
    lab: LabKernel, api: StandInAPI
) -> None:
    code = '\n\ntitle = "MODEL"  \nnote = title.lower()\n'
    api.set_script(steps(code))
    cell = lab.execute("%%agent\nSet a title.", cell_id="approve")
    approve = lab.wait_for_button("Approve", parent=cell)
    lab.round_trip(approve)
    card = shown(lab, cell)
    assert "run_code wants to run — approve?" in card and "class:" in card
    assert "line 3: creates title" in card and "line 4: creates note" in card
    assert 'title = "MODEL"' in card
    lab.click(approve)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print(title, note)").strip() == "MODEL model"
    assert saved_record(lab, cell)["tool_calls"][0]["input"]["code"] == code  # byte for byte


def test_a_decided_card_folds_to_one_line_that_gains_the_steps_duration(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("import time\ntime.sleep(0.3)\nslept = True", "oops = 1 / 0"))
    cell = lab.execute("%%agent\nSleep, then divide.", cell_id="fold")
    first = lab.wait_for_button("Approve", parent=cell)
    lab.click(first)
    lab.click(lab.wait_for_button("Approve", parent=cell, exclude={first}))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    states = lab.widget_states(parent=cell, model_name="HTMLModel")
    folded = [str(s["value"]) for s in states if "qloop-card-folded" in str(s.get("value"))]
    lines = [html.unescape(re.sub(r"<[^>]+>", "", f.split("</summary>")[0])) for f in folded]
    assert len(lines) == 2, lines
    assert re.fullmatch(r"✔ approved · run_code · import time · 0\.[3-9] s|✔ approved · run_code · "
                        r"import time · [1-9]\.\d s", lines[0]), lines[0]  # fmt: skip
    assert re.fullmatch(r"✔ approved · run_code · oops = 1 / 0 · failed after \d+\.\d s", lines[1])


def test_edit_then_always_allow_runs_the_edit_and_later_write_steps_without_a_card(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps('title = "MODEL"', 'subtitle = title + "!"', "del title"))
    cell = lab.execute("%%agent\nSet a title.", cell_id="edit-always")
    always = lab.wait_for_button("Always allow", parent=cell)
    first_deny = lab.wait_for_button("Deny", parent=cell)
    lab.click(lab.wait_for_button("Edit", parent=cell))
    editor = lab.wait_for_widget(model_name="TextareaModel", parent=cell)
    lab.set_value(editor, "value", 'title = "EDITED"')
    lab.round_trip(editor)
    assert "editing: the text below is what runs" in shown(lab, cell)
    assert 'title = "MODEL"' not in shown(lab, cell)  # one version of the code on screen
    lab.click(always)
    # The second step is 'write' too: it runs under the grant. The third deletes: it asks.
    lab.click(lab.wait_for_button("Deny", parent=cell, exclude={first_deny}))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print(title, subtitle)").strip() == "EDITED EDITED!"
    told = result_text(tool_results(api.requests[1])[0])
    assert "the user edited the input" in told and 'title = \\"EDITED\\"' in told
    assert decisions(lab, cell) == ["edited", "always", "denied"]
    assert len(buttons(lab, cell, "Approve")) == 2  # no card for the step the grant covered
    card = shown(lab, cell)
    assert "your edit, which is what runs:" in card and 'title = "EDITED"' in card
    # The model's version shows only as the removed line of what the edit changed.
    assert "what you changed:" in card and '-title = "MODEL"' in card
    assert 'title = "MODEL"' not in card.replace('-title = "MODEL"', "")
    assert (
        "✔ approved with your edits (run_code 'read' and 'write' steps always allowed for "
        "this session)" in card
    )
    assert "→ run_code runs without asking (write): granted: run_code 'read' and 'write'" in (
        plain_outputs(lab, cell)
    )
    assert "allowed without asking: run_code 'read' and 'write' steps, this session" in card


def test_edit_then_deny_runs_nothing(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script(steps("gone = 1", answer="ok"))
    cell = lab.execute("%%agent\nSet gone.", cell_id="edit-deny")
    lab.click(lab.wait_for_button("Edit", parent=cell))
    editor = lab.wait_for_widget(model_name="TextareaModel", parent=cell)
    lab.set_value(editor, "value", "gone = 2")
    lab.click(lab.wait_for_button("Deny", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print('gone' in dir())").strip() == "False"
    assert decisions(lab, cell) == ["denied"]


def test_a_denial_reads_in_the_users_words_and_the_model_gets_its_instructions(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("gone = 1", answer="ok"))
    cell = lab.execute("%%agent\nSet gone.", cell_id="deny-words")
    reason = lab.wait_for_widget(model_name="TextModel", parent=cell)
    lab.set_value(reason, "value", "not on shared data")
    lab.round_trip(reason)
    lab.click(lab.wait_for_button("Deny", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    shown_text = plain_outputs(lab, cell) + shown(lab, cell)
    assert "✘ run_code: not run, denied by you: not on shared data" in shown_text
    assert "The user denied" not in shown_text
    assert "Take the reason into account" not in shown_text
    [result] = tool_results(api.requests[1])
    assert "The user denied this call: not on shared data" in result_text(result)


def test_an_edit_is_classified_as_it_is_typed(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script(steps("value = 1"))
    cell = lab.execute("%%agent\nSet value.", cell_id="reclassify")
    lab.click(lab.wait_for_button("Edit", parent=cell))
    editor = lab.wait_for_widget(model_name="TextareaModel", parent=cell)
    lab.set_value(editor, "value", "import shutil\nshutil.rmtree('data')")
    lab.round_trip(editor)
    card = shown(lab, cell)
    assert "class of your edit:" in card and "line 2: removes files" in card
    lab.set_value(editor, "value", "value = 1")  # back to the model's code
    lab.click(lab.wait_for_button("Approve", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert decisions(lab, cell) == ["approved"]


# -- scopes -----------------------------------------------------------------------------------------


def test_always_allow_for_this_cell_leaves_other_cells_asking(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("a = 1", "b = 2"))
    first = lab.execute("%%agent\nSet a and b.", cell_id="cell-a")
    scope = lab.wait_for_widget(model_name="DropdownModel", parent=first)
    assert lab.widget_state(scope)["_options_labels"] == ["for this cell", "for this session"]
    lab.set_value(scope, "index", 0)
    lab.click(lab.wait_for_button("Always allow", parent=first))
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    assert decisions(lab, first) == ["always", "always"]
    api.set_script(steps("c = 3"))
    second = lab.execute("%%agent\nSet c.", cell_id="cell-b")
    lab.click(lab.wait_for_button("Approve", parent=second))  # a card: the grant was cell-a's
    assert lab.complete(second, 60)["content"]["status"] == "ok"
    assert lab.run("print(a, b, c)").strip() == "1 2 3"


def test_session_grants_are_listed_revoked_and_cleared_by_reset(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("a = 1"))
    first = lab.execute("%%agent\nSet a.", cell_id="s1")
    lab.click(lab.wait_for_button("Always allow", parent=first))
    lab.complete(first, 60)
    api.set_script(steps("b = 2"))
    second = lab.execute("%%agent\nSet b.", cell_id="s2")
    assert lab.complete(second, 60)["content"]["status"] == "ok"
    assert buttons(lab, second, "Approve") == []
    assert lab.run("print(b)").strip() == "2"
    assert "granted: run_code 'read' and 'write' steps, this session\nb = 2" in (
        plain_outputs(lab, second)
    )
    listing = lab.run("%agent grants")
    assert "run_code 'read' and 'write' steps, this session" in listing
    assert "policy: ask ('read' steps ask)" in listing
    cleared = lab.run("%agent reset")
    assert "and 1 grant (run_code 'read' and 'write' steps, this session)" in cleared
    assert "kept: settings, private variables" in cleared
    assert "none" in lab.run("%agent grants")
    api.set_script(steps("c = 3"))
    third = lab.execute("%%agent\nSet c.", cell_id="s3")
    lab.click(lab.wait_for_button("Approve", parent=third))  # asks again after the reset
    assert lab.complete(third, 60)["content"]["status"] == "ok"


def test_allow_and_revoke_by_name_refuse_unknown_tools_with_a_suggestion(
    lab: LabKernel, api: StandInAPI
) -> None:
    error = usage_error(lab, "%agent allow run_cod")
    assert "no tool is named 'run_cod'; did you mean run_code?" in error
    assert "did you mean run_code?" in usage_error(lab, "%agent revoke run_cod")
    assert "'wirte' is not a risk class; did you mean write?" in usage_error(
        lab, "%agent allow run_code wirte"
    )
    granted = lab.run("%agent allow run_code")
    assert "run_code 'read' and 'write' steps now run without asking, for this session" in granted
    assert "grants: run_code 'read' and 'write' steps, this session" in lab.run("%agent status")
    api.set_script(steps("x = 1", "import os\nos.remove('nothing-here')"))
    cell = lab.execute("%%agent\nGo.", cell_id="allowed")
    deny = lab.wait_for_button("Deny", parent=cell)  # the external step asks; the write did not
    lab.click(deny)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert decisions(lab, cell) == ["always", "denied"]
    assert lab.run("print(x)").strip() == "1"
    assert "revoked: run_code 'read' and 'write' steps, this session" in lab.run(
        "%agent revoke run_code"
    )
    assert "no grants to revoke" in lab.run("%agent revoke all")


def test_a_notebook_grant_is_saved_signed_and_applies_when_the_notebook_is_opened_again(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("n = 1"))
    cell = lab.execute("%%agent\nSet n.", cell_id="nb-1")
    answer_hello(lab, cell)
    scope = lab.wait_for_widget(model_name="DropdownModel", parent=cell)
    labels = lab.widget_state(scope)["_options_labels"]
    assert labels == ["for this cell", "for this session", "for this notebook"]
    lab.set_value(scope, "index", 2)
    lab.click(lab.wait_for_button("Always allow", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    request = saved_grants(lab, cell)
    assert request["cell_id"] == "nb-1"
    value = request["value"]
    assert [(g["tool"], g["risk"]) for g in value["grants"]] == [("run_code", "write")]
    assert value["signature"].startswith("hmac-sha256:")

    lab.restart()
    lab.run("%load_ext qloop_kernel")
    api.set_script(steps("m = 2"))
    again = lab.execute("%%agent\nSet m.", cell_id="nb-2")
    answer_hello(lab, again, grants=value)
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert buttons(lab, again, "Approve") == []
    assert "this notebook's saved grants apply: run_code 'read' and 'write' steps" in (
        plain_outputs(lab, again)
    )
    assert lab.run("print(m)").strip() == "2"
    assert "run_code 'read' and 'write' steps, this notebook" in lab.run("%agent grants")
    revoked = lab.run("%agent revoke all")
    assert "this notebook" in revoked and "save the notebook" in revoked


def test_a_received_notebooks_grants_do_not_apply(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script(steps("n = 1"))
    cell = lab.execute("%%agent\nSet n.", cell_id="nb-own")
    answer_hello(lab, cell, path="mine.ipynb")
    lab.set_value(lab.wait_for_widget(model_name="DropdownModel", parent=cell), "index", 2)
    lab.click(lab.wait_for_button("Always allow", parent=cell))
    lab.complete(cell, 60)
    value = saved_grants(lab, cell)["value"]

    lab.restart()
    lab.run("%load_ext qloop_kernel")
    api.set_script(steps("k = 3"))
    copied = lab.execute("%%agent\nSet k.", cell_id="nb-copy")
    answer_hello(lab, copied, path="someone-elses.ipynb", grants=value)  # copied into another
    lab.click(lab.wait_for_button("Approve", parent=copied))  # the grant does not apply
    assert lab.complete(copied, 60)["content"]["status"] == "ok"
    notice = plain_outputs(lab, copied)
    assert "this notebook holds approval grants that do not apply" in notice
    assert "not saved by your kernel for this notebook" in notice
    listing = lab.run("%agent grants")
    assert "saved in this notebook but not applied" in listing


# -- policies with someone to click ------------------------------------------------------------------


def test_write_policy_runs_write_steps_shown_with_their_code_and_asks_for_the_rest(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("w = 1", "del w"))
    cell = lab.execute("%%agent --approve write\nSet and drop w.", cell_id="write-policy")
    lab.click(lab.wait_for_button("Deny", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print(w)").strip() == "1"
    assert decisions(lab, cell) == ["auto", "denied"]
    assert "→ run_code runs without asking (write): the approval policy 'write' runs it\nw = 1" in (
        plain_outputs(lab, cell)
    )
    assert len(buttons(lab, cell, "Approve")) == 1


def test_ask_can_run_read_steps_without_a_card(lab: LabKernel, api: StandInAPI) -> None:
    lab.run("frame = [3, 1, 2]")
    assert "ask_read = False" in lab.run("%agent set ask_read off")
    api.set_script(steps("sorted(frame)", "frame.sort()"))
    cell = lab.execute("%%agent\nSort it.", cell_id="ask-read")
    lab.click(lab.wait_for_button("Approve", parent=cell))  # only the sort asks
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert decisions(lab, cell) == ["auto", "approved"]
    assert "[1, 2, 3]" in result_text(tool_results(api.requests[1])[0])


def test_a_readonly_denial_is_the_policys_not_the_users(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script(steps("x = 1", answer="I could not."))
    cell = lab.execute("%%agent --approve readonly\nSet x.", cell_id="readonly")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert buttons(lab, cell, "Approve") == []
    assert lab.run("print('x' in dir())").strip() == "False"
    sent = result_text(tool_results(api.requests[1])[0])
    assert sent.startswith("Not run: denied by the approval policy 'readonly' (a 'write' step).")
    assert "line 1: creates x" in sent and "user denied" not in sent.lower()
    assert saved_record(lab, cell)["tool_calls"][0]["decision"]["reason"] == (
        "denied by the approval policy 'readonly' (a 'write' step)"
    )
    lines = plain_outputs(lab, cell)
    assert (
        "✘ run_code: not run, denied by the approval policy 'readonly' (a 'write' step)" in lines
    )


# -- replay ------------------------------------------------------------------------------------------


def test_the_replay_card_lists_each_steps_class_and_reasons(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("rows = [1]", "rows.append(2)", answer="rows has two items"))
    first = lab.execute("%%agent --approve auto\nMake rows.", cell_id="replayed")
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    saved = saved_record(lab, first)
    lab.run("del rows")
    again = lab.execute(
        "%%agent --approve auto\nMake rows.", cell_id="replayed", metadata={"qloop": saved}
    )
    approve = lab.wait_for_button("Approve", parent=again)
    lab.round_trip(approve)
    card = shown(lab, again)
    assert re.search(r"step 1\s*rows = \[1\].*class:\s*write.*line 1: creates rows", card, re.S)
    assert re.search(r"step 2\s*rows\.append\(2\).*line 1: changes rows", card, re.S)
    lab.click(approve)
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert lab.run("print(rows)").strip() == "[1, 2]"
    assert len(api.requests) == 3  # the replay asked no model


def test_a_session_grant_covers_the_steps_of_your_own_replay(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(steps("rows = [1]", answer="rows is set"))
    first = lab.execute("%%agent\nMake rows.", cell_id="granted-replay")
    lab.click(lab.wait_for_button("Always allow", parent=first))
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    saved = saved_record(lab, first)
    lab.run("del rows")
    again = lab.execute("%%agent\nMake rows.", cell_id="granted-replay", metadata={"qloop": saved})
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert buttons(lab, again, "Approve") == []
    assert "replaying without a card: every step is covered by a grant (run_code 'read' and " in (
        plain_outputs(lab, again)
    )
    assert lab.run("print(rows)").strip() == "[1]"
    lab.run("%agent revoke all\nrows.clear()")
    again = lab.execute("%%agent\nMake rows.", cell_id="granted-replay", metadata={"qloop": saved})
    lab.click(lab.wait_for_button("Approve", parent=again))  # revoked: the card is back
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert len(api.requests) == 2


def test_each_widget_message_while_the_card_waits_is_acknowledged_like_ipykernel_does(
    lab: LabKernel, api: StandInAPI
) -> None:
    # The widget frontend sends a text box's next state only after the idle of the previous one:
    # without it, the reason typed key by key would reach the kernel as its first letter.
    api.set_script(steps("z = 1"))
    cell = lab.execute("%%agent\nSet z.", cell_id="acks")
    reason = lab.wait_for_widget(model_name="TextModel", parent=cell)
    typed = [lab.set_value(reason, "value", "no"[: i + 1]) for i in range(2)]
    for msg_id in typed:
        lab.wait_idle(msg_id)
        assert [m["content"]["execution_state"] for m in lab.messages(msg_id, "status")] == [
            "busy",
            "idle",
        ]
    assert lab.status(cell) == "busy"  # the waiting cell is busy again
    lab.click(lab.wait_for_button("Deny", parent=cell))
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert saved_record(lab, cell)["tool_calls"][0]["decision"]["reason"] == "no"
