"""A page reloaded while a card waits finds the card again, through a real kernel.

The page that started the cell is gone with its outputs; the new page lists the kernel's comms
(answered while the cell waits), asks each ``qloop.waiting`` comm which cell waits at which widget,
and renders that widget: its buttons end the wait. The test plays the new page.
"""

from __future__ import annotations

from typing import Any

import pytest

from qloop_kernel.notebook.waiting import WAITING_TARGET
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel


def waiting_comms(lab: LabKernel) -> list[str]:
    listed = lab.reply(lab.request("comm_info_request", {"target_name": WAITING_TARGET}), 5)
    return sorted(listed["content"]["comms"])


def describe(lab: LabKernel, comm_id: str) -> dict[str, Any]:
    """Ask a waiting comm what waits, as the extension of a reloaded page does."""
    asked = lab.comm_msg(comm_id, {"op": "describe"})

    def answered() -> dict[str, Any] | None:
        for message in lab.messages(asked, "comm_msg"):
            if message["content"]["comm_id"] == comm_id:
                return message["content"]["data"]  # type: ignore[no-any-return]
        return None

    return lab.wait_for(answered, 10, "the waiting card's description")


def descendants(lab: LabKernel, model_id: str) -> set[str]:
    found: set[str] = set()
    pending = [model_id]
    while pending:
        children = lab.widget_state(pending.pop()).get("children", [])
        ids = [c.removeprefix("IPY_MODEL_") for c in children if isinstance(c, str)]
        found.update(ids)
        pending.extend(ids)
    return found


def test_a_reloaded_page_learns_which_cell_waits_at_which_card_and_its_click_runs_it(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "answer = 42"})]), Reply([text("ok")])])
    cell = lab.execute("%%agent\nSet the answer.", cell_id="cell-waits")
    approve = lab.wait_for_button("Approve", parent=cell)

    (comm_id,) = waiting_comms(lab)
    waiting = describe(lab, comm_id)
    assert waiting["op"] == "waiting" and waiting["cell_id"] == "cell-waits"
    card = waiting["model_id"]
    assert lab.widget_state(card)["_model_name"] == "VBoxModel"
    assert approve in descendants(lab, card)  # the widget to show holds the card's buttons

    lab.click(approve)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert lab.run("print(answer)").strip() == "42"
    assert saved_record(lab, cell)["tool_calls"][0]["decision"]["kind"] == "approved"
    closed = [m["content"]["comm_id"] for m in lab.messages(cell, "comm_close")]
    assert comm_id in closed
    assert waiting_comms(lab) == []  # nothing waits: a page opened now finds nothing to show


def test_each_waiting_card_is_announced_in_turn_and_none_after_a_deny(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(
        [
            Reply([tool_use("run_code", {"code": "first = 1"})]),
            Reply([tool_use("run_code", {"code": "second = 2"})]),
            Reply([text("done")]),
        ]
    )
    cell = lab.execute("%%agent\nTwo steps.", cell_id="two-cards")
    first = lab.wait_for_button("Approve", parent=cell)
    first_deny = lab.wait_for_button("Deny", parent=cell)
    (before,) = waiting_comms(lab)
    lab.click(first)
    deny = lab.wait_for_button("Deny", parent=cell, exclude={first_deny}, timeout=30)

    (after,) = lab.wait_for(lambda: waiting_comms(lab) or None, 10, "the second card's comm")
    assert after != before  # the first card's comm closed with its decision
    assert describe(lab, after)["cell_id"] == "two-cards"
    lab.click(deny)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert waiting_comms(lab) == []
