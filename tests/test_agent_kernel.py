"""%%agent through a real kernel driven like JupyterLab, against the loopback Messages API."""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.records import MIME_TYPE
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import (
    result_text,
    saved_record,
    shown_answers,
    tool_results,
    wait_for_answer_text,
)
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel


def html_text(states: list[dict[str, Any]]) -> str:
    """The text the HTML widgets of a card show, without tags."""
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(str(s.get("value", "")) for s in states)))


def double_x_script() -> list[Reply]:
    return [
        Reply([text("Looking first."), tool_use("list_variables", {})]),
        Reply([tool_use("run_code", {"code": "y = x * 2\nprint('y =', y)"})]),
        Reply([text("Done: **y** is 20.")]),
    ]


def test_approve_runs_the_code_and_run_all_waits(lab: LabKernel, api: StandInAPI) -> None:
    lab.run("x = 10")
    api.set_script(double_x_script())
    agent = lab.execute("%%agent\nDouble x into y.", cell_id="agent-1")
    after = lab.execute("z = y + 1", cell_id="next")  # queued like "Run All"
    approve = lab.wait_for_button("Approve", parent=agent, timeout=30)
    lab.round_trip(approve)  # the card waits, and the queued cell's request has arrived
    assert not lab.replied(after), "the next cell ran while the card was waiting"
    assert len(api.requests) == 2, "a model call was made before the approval"
    [asked] = [
        b for b in api.requests[1].body["messages"][-2]["content"] if b["type"] == "tool_use"
    ]
    assert asked["name"] == "list_variables"
    assert tool_results(api.requests[1])[0]["tool_use_id"] == asked["id"]
    lab.click(approve)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.complete(after, 30)["content"]["status"] == "ok"
    assert lab.run("print(x, y, z)").strip() == "10 20 21"
    assert lab.widget_state(approve)["disabled"] is True
    run_result = tool_results(api.requests[2])[0]
    assert "y = 20" in result_text(run_result) and not run_result.get("is_error")
    listing = result_text(tool_results(api.requests[1])[0])
    assert "x" in listing and "int" in listing
    record = saved_record(lab, agent)
    assert record["status"] == "completed" and record["cell_id"] == "agent-1"
    assert record["tool_calls"][1]["decision"]["kind"] == "approved"
    assert record["answer"] == "Done: **y** is 20."
    mirror = [m for m in lab.messages(agent, "display_data") if MIME_TYPE in m["content"]["data"]]
    live = mirror[0]["content"]["metadata"][MIME_TYPE]["live_client"]
    assert live == mirror[0]["parent_header"]["session"]  # folded next to the live output


def test_deny_with_a_reason_runs_nothing_and_tells_the_model(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(
        [Reply([tool_use("run_code", {"code": "danger = 1"})]), Reply([text("OK, I will not.")])]
    )
    agent = lab.execute("%%agent\nSet danger.", cell_id="agent-2")
    deny = lab.wait_for_button("Deny", parent=agent, timeout=30)
    reason = lab.wait_for_widget(model_name="TextModel", parent=agent, timeout=5)
    lab.set_value(reason, "value", "not on the shared data")
    lab.click(deny)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.run("print('danger' in dir())").strip() == "False"
    sent = tool_results(api.requests[1])[0]
    assert sent["is_error"] is True and "not on the shared data" in result_text(sent)


def test_edited_code_is_what_runs_and_what_is_recorded(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "v = 1"})]), Reply([text("done")])])
    agent = lab.execute("%%agent\nSet v.", cell_id="agent-3")
    approve = lab.wait_for_button("Approve", parent=agent, timeout=30)
    editor = lab.wait_for_widget(model_name="TextareaModel", parent=agent, timeout=5)
    lab.set_value(editor, "value", "v = 2")
    lab.click(approve)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.run("print(v)").strip() == "2"
    assert "v = 2" in result_text(tool_results(api.requests[1])[0])
    assert saved_record(lab, agent)["tool_calls"][0]["input"] == {"code": "v = 2"}
    assert saved_record(lab, agent)["tool_calls"][0]["decision"]["kind"] == "edited"


def test_click_through_a_subshell(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "s = 'sub'"})]), Reply([text("ok")])])
    subshell = lab.create_subshell()
    agent = lab.execute("%%agent\nSet s.", cell_id="agent-4")
    lab.click(lab.wait_for_button("Approve", timeout=30), subshell_id=subshell)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.run("print(s)").strip() == "sub"


def test_interrupt_while_waiting_for_approval(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "w = 1"})]), Reply([text("never")])])
    agent = lab.execute("%%agent\nSet w.", cell_id="agent-5")
    queued = lab.execute("q = 1", cell_id="queued")
    approve = lab.wait_for_button("Approve", parent=agent, timeout=30)
    card = lab.wait_for_widget(model_name="VBoxModel", parent=agent)
    lab.wait_for_shown(agent, card)  # displayed: the cell goes straight on to wait for a click
    started = time.monotonic()
    lab.interrupt()
    reply = lab.complete(agent, 30)
    assert time.monotonic() - started < 5
    assert (
        reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    )
    assert lab.complete(queued, 30)["content"]["status"] == "aborted"  # "Run All" stops
    # The widget update travels on IOPub, the reply on the shell channel: either may come first.
    lab.wait_for(lambda: lab.widget_state(approve).get("disabled") is True, 10, "Approve disabled")
    assert lab.run("print('w' in dir(), 'q' in dir())").strip() == "False False"
    record = saved_record(lab, agent)
    assert record["status"] == "interrupted"
    assert len(api.requests) == 1


def test_interrupt_while_tool_code_runs(lab: LabKernel, api: StandInAPI, tmp_path: Path) -> None:
    started = tmp_path / "started"  # the step's output is captured until it ends: a file marks it
    code = f"import pathlib, time\nbefore = 1\npathlib.Path({str(started)!r}).touch()\ntime.sleep(30)\nafter = 1"
    api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("never")])])
    agent = lab.execute("%%agent --approve auto\nSleep.", cell_id="agent-6")
    lab.wait_for(started.exists, 30, "the step to start sleeping")
    lab.interrupt()
    reply = lab.complete(agent, 30)
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert lab.run("print('before' in dir(), 'after' in dir())").strip() == "True False"
    assert saved_record(lab, agent)["status"] == "interrupted"


def test_interrupt_while_the_model_streams(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([text("word " * 200)], event_delay=0.05)])
    agent = lab.execute("%%agent\nTalk slowly.", cell_id="agent-7")
    wait_for_answer_text(lab, agent, "word")  # the cell shows the stream as it comes
    started = time.monotonic()
    lab.interrupt()
    reply = lab.complete(agent, 30)
    assert time.monotonic() - started < 3
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert saved_record(lab, agent)["status"] == "interrupted"
    assert lab.run("print('alive')").strip() == "alive"


def test_stop_button_ends_the_turn_and_next_cells_still_run(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script([Reply([text("word " * 200)], event_delay=0.05)])
    agent = lab.execute("%%agent\nTalk slowly.", cell_id="agent-8")
    after = lab.execute("after_stop = 1", cell_id="after")
    stop = lab.wait_for_button("Stop", parent=agent, timeout=30)
    wait_for_answer_text(lab, agent, "word")
    lab.click(stop)
    assert lab.complete(agent, 30)["content"]["status"] == "ok"
    assert lab.complete(after, 30)["content"]["status"] == "ok"
    assert saved_record(lab, agent)["status"] == "interrupted"
    [shown] = shown_answers(lab, agent).values()
    assert 0 < len(shown) < len("word " * 200), "the stream was not cut short"


def test_headless_never_blocks_and_denies_risky_calls(api: StandInAPI) -> None:
    api.reset([Reply([tool_use("run_code", {"code": "h = 1"})]), Reply([text("could not")])])
    # nbclient sends no cell metadata: the agent asks the model only when the user opted in.
    opted_in = {**api.environment(), "QLOOP_ASK_WITHOUT_RECORD": "1"}
    with LabKernel(opted_in, headless=True) as lab:
        lab.run("%load_ext qloop_kernel")
        agent = lab.execute("%%agent --fresh\nSet h.")  # a new run: no saved record is sought
        assert lab.complete(agent, 60)["content"]["status"] == "ok"
        assert lab.run("print('h' in dir())").strip() == "False"
        sent = tool_results(api.requests[1])[0]
        assert sent["is_error"] and "--approve auto" in result_text(sent)
        assert "QLOOP_APPROVAL" in lab.text(agent)
        api.reset([Reply([tool_use("run_code", {"code": "h = 2"})]), Reply([text("set")])])
        lab.run("%%agent --fresh --approve auto\nSet h.")
        assert lab.run("print(h)").strip() == "2"


def test_follow_up_cells_share_the_conversation(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([text("first answer")]), Reply([text("second answer")])])
    lab.run("%%agent --new\nFirst question.", cell_id="c1")
    lab.run("%%agent\nNow the follow-up.", cell_id="c2")
    sent = [
        "".join(b["text"] for b in m["content"] if b["type"] == "text")
        for m in api.requests[1].body["messages"]
    ]
    assert sent == ["First question.", "first answer", "Now the follow-up."]


def test_code_errors_go_back_to_the_model_and_the_turn_goes_on(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "1 / 0"})]), Reply([text("fixed")])])
    agent = lab.execute("%%agent --approve auto\nDivide.", cell_id="agent-9")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    sent = tool_results(api.requests[1])[0]
    assert sent["is_error"] and "ZeroDivisionError: division by zero" in result_text(sent)
    assert "\x1b[" not in result_text(sent)


def test_figures_reach_the_model_as_images(lab: LabKernel, api: StandInAPI) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"
    api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("plotted")])])
    agent = lab.execute("%%agent --approve auto\nPlot.", cell_id="agent-10")
    assert lab.complete(agent, 90)["content"]["status"] == "ok"
    content = tool_results(api.requests[1])[0]["content"]
    assert any(c["type"] == "image" for c in content)
    assert any("image/png" in m["content"]["data"] for m in lab.messages(agent, "display_data"))
    record = saved_record(lab, agent)
    assert record["tool_calls"][0]["images"][0]["bytes"] > 1000
    assert "iVBOR" not in json.dumps(record)  # no PNG bytes in the record


def test_user_tools_from_the_decorator(lab: LabKernel, api: StandInAPI) -> None:
    lab.run(
        "import qloop_kernel\n"
        "@qloop_kernel.tool(read_only=True)\n"
        "def revenue(region: str) -> str:\n"
        "    '''Revenue of a region.'''\n"
        "    return f'{region}: 42'\n"
    )
    api.set_script([Reply([tool_use("revenue", {"region": "EU"})]), Reply([text("EU is 42")])])
    lab.run("%%agent\nRevenue of EU?", cell_id="agent-11")
    assert result_text(tool_results(api.requests[1])[0]) == "EU: 42"
    assert "revenue" in [t["name"] for t in api.requests[0].body["tools"]]


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%agent --max-turns x\nhi", "invalid int value"),
        ("%%agent --approve maybe\nhi", "invalid choice"),
        ("%%agent\n   ", "the task is empty"),
        ("%%agent --max-cost -1\nhi", "--max-cost"),
    ],
)
def test_usage_errors_are_one_line(lab: LabKernel, cell: str, message: str) -> None:
    msg_id = lab.execute(cell, cell_id="bad")
    reply = lab.complete(msg_id, 30)["content"]
    assert reply["status"] == "error" and reply["ename"] == "UsageError"
    assert message in lab.stderr(msg_id) and "Traceback" not in lab.stderr(msg_id)


def test_missing_api_key_says_how_to_fix_it(api: StandInAPI) -> None:
    env = api.environment()
    env.pop("ANTHROPIC_API_KEY")
    with LabKernel({**env, "ANTHROPIC_API_KEY": ""}) as lab:
        lab.run("%load_ext qloop_kernel")
        msg_id = lab.execute("%%agent\nhi", cell_id="k")
        assert lab.complete(msg_id, 30)["content"]["status"] == "error"
        assert "ANTHROPIC_API_KEY is not set" in lab.stderr(msg_id)
        assert api.requests == []


def test_status_reports_tokens_and_cost(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([text("hello")])])
    lab.run("%%agent --new\nhi", cell_id="s1")
    status = lab.run("%agent status")
    assert "1 turn, 1 model call" in status and "cost $" in status


def test_code_timeout_interrupts_only_the_tool(lab: LabKernel, api: StandInAPI) -> None:
    code = "import time\nstarted_sleep = 1\ntime.sleep(20)\nfinished_sleep = 1"
    api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("too slow")])])
    agent = lab.execute("%%agent --approve auto --code-timeout 1\nSleep.", cell_id="agent-12")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    sent = tool_results(api.requests[1])[0]
    assert sent["is_error"] and "longer than the 1 s limit" in result_text(sent)
    assert saved_record(lab, agent)["status"] == "completed"
    assert (
        lab.run("print('started_sleep' in dir(), 'finished_sleep' in dir())").strip()
        == "True False"
    )


def test_one_line_prompt_and_kernel_spec(lab: LabKernel, api: StandInAPI, tmp_path) -> None:
    api.set_script([Reply([text("short answer")]), Reply([text("done")])])
    msg_id = lab.execute("%agent --new What's 2 + 2?", cell_id="line")
    assert lab.complete(msg_id, 60)["content"]["status"] == "ok"
    assert api.requests[0].body["messages"][0]["content"][0]["text"] == "What's 2 + 2?"
    lab.run("%agent reset the index of df", cell_id="line2")  # a task, not the reset command
    assert api.requests[1].body["messages"][-1]["content"][0]["text"] == "reset the index of df"
    assert "fresh conversation" in lab.run("%agent reset")
    from jupyter_client.kernelspec import KernelSpecManager

    from qloop_kernel.headless.kernelspec import install

    install(prefix=str(tmp_path))
    manager = KernelSpecManager(kernel_dirs=[str(tmp_path / "share" / "jupyter" / "kernels")])
    spec = manager.get_kernel_spec("qloop")
    assert spec.display_name == "Python 3 (qloop)" and "--ext=qloop_kernel" in spec.argv


def test_saved_cell_replays_after_one_approval_without_the_model(
    lab: LabKernel, api: StandInAPI
) -> None:
    lab.run("x = 10")
    api.set_script(double_x_script())
    first = lab.execute("%%agent --new\nDouble x into y.", cell_id="saved")
    lab.click(lab.wait_for_button("Approve", parent=first, timeout=30))
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    record = saved_record(lab, first)
    lab.run("del y")
    api.reset()
    again = lab.execute("%%agent\nDouble x into y.", cell_id="saved", metadata={"qloop": record})
    approve = lab.wait_for_button("Approve", parent=again, timeout=30)
    lab.round_trip(approve)  # the whole card is built and waits
    card_text = html_text(lab.widget_states(parent=again, model_name="HTMLModel"))
    assert "step 1" in card_text and "y = x * 2" in card_text  # the card lists the step
    lab.click(approve)
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert lab.run("print(y)").strip() == "20"
    assert api.requests == []  # no model call
    assert "Done: **y** is 20." in json.dumps(lab.outputs(again), default=str)


def test_a_tampered_saved_cell_runs_nothing(lab: LabKernel, api: StandInAPI) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "t = 1"})]), Reply([text("ok")])])
    first = lab.execute("%%agent --approve auto\nSet t.", cell_id="tamper")
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    record = saved_record(lab, first)
    record["tool_calls"][0]["input"]["code"] = "t = 'changed'"
    lab.run("del t")
    api.reset()
    again = lab.execute("%%agent\nSet t.", cell_id="tamper", metadata={"qloop": record})
    assert lab.complete(again, 30)["content"]["status"] == "error"
    assert "changed after it was written" in lab.stderr(again)
    assert lab.run("print('t' in dir())").strip() == "False"
    assert api.requests == []


def test_text_of_a_failed_attempt_is_blanked_before_the_retry(
    lab: LabKernel, api: StandInAPI
) -> None:
    from qloop_kernel.testing import DropConnection

    api.set_script(
        [
            Reply([text("partial words " * 30)], stream_fault=DropConnection(after_events=6)),
            Reply([text("the whole answer")]),
        ]
    )
    agent = lab.execute("%%agent\nAnswer.", cell_id="retry")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    shown = [text for text in shown_answers(lab, agent).values() if text]
    assert shown == ["the whole answer"]
    assert "retrying" in lab.text(agent)


def test_the_task_line_is_taken_as_typed_never_expanded_from_the_namespace(
    lab: LabKernel, api: StandInAPI
) -> None:
    """IPython expands `$name` and `{expr}` in a magic's line: for %agent that would put a value of
    the namespace (here a key) into the prompt the model receives, unasked."""
    lab.run("token = 'tok-7f3a9c21e8'")
    api.set_script([Reply([text("ok")]), Reply([text("ok")])])
    one_line = lab.execute("%agent compare {token} with $token", cell_id="agent-literal-1")
    assert lab.complete(one_line, 60)["content"]["status"] == "ok"
    cell = lab.execute("%%agent say {token}\nand $token", cell_id="agent-literal-2")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    sent = json.dumps([r.body["messages"] for r in api.requests])
    assert "tok-7f3a9c21e8" not in sent
    assert "compare {token} with $token" in sent and "say {token}" in sent
