"""A proposal's data effect before it is accepted: the proposed code cell runs ahead where the
pipeline would run it without asking (class read or write), its changes go with the proposal, and
the namespace is exactly as before; otherwise the proposal says why not. Through a real kernel and
the scripted stand-in, the page played by the test; the pipeline's answer also without a kernel."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jupyter_core.paths
import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.ahead import RunAhead
from qloop_kernel.notebook.code import CodeRunner
from qloop_kernel.notebook.deadline import StepStopped
from qloop_kernel.notebook_view import notebook_view
from qloop_kernel.policy.admin import ADMIN_ENV
from qloop_kernel.policy.grants import Grant, Grants
from qloop_kernel.policy.permissions import ApprovalPolicy, PolicyDenier
from qloop_kernel.policy.risk import classify
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.tools.runtime import Tool, ToolRuntime
from tests.agent_outputs import saved_record
from tests.test_fix import code, fail
from tests.test_read_notebook import OPERATIONS, answer_hello

SETUP = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3, 4, 5]})\nraw = df\nframes = [df]"
FAILING = "total = df['b'].sum()"
FIXED = "print('printed', 'ahead')\ndf['b'] = df['a'] * 2\ntotal = int(df['b'].sum())"
# What the kernel's namespace looks like, printed from a subshell while the proposal waits.
LOOK = (
    "print(df.shape, df is raw, frames[0] is df, 'total' in dir(), "
    "__import__('os').path.exists('ahead.csv'))"
)


def serve(
    lab: Any,
    cell: str,
    cells: list[dict[str, Any]],
    decide: Callable[[dict[str, Any]], dict[str, Any]],
    look: str,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Play the page until the cell ends: the hello, every read_notebook, and each proposal,
    answered with ``decide(proposal)`` after running ``look`` on a subshell while it waits (the
    main shell is busy with the turn). The proposals shown, and what ``look`` printed for each."""
    comm_id = answer_hello(lab, cell, "work/ahead.ipynb", OPERATIONS)
    subshell = lab.create_subshell()
    seen: set[str] = set()
    shown: list[dict[str, Any]] = []
    looked: list[str] = []

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
            looked.append(lab.run(look, subshell_id=subshell).strip())
            answer.update(decide(request["proposal"]))
        lab.comm_msg(comm_id, answer)
    return shown, looked


def accepted(source: str) -> dict[str, Any]:
    return {"decision": "accepted", "cell_id": "lookup", "source": source, "reason": ""}


def fix_with(
    lab: Any, api: StandInAPI, source: str, allow: str | None, look: str = LOOK
) -> tuple[dict[str, Any], list[str], str]:
    """Fail the lookup cell, let the agent propose ``source`` for it (the policy: ask; run_code
    steps of class ``allow`` granted for the session), accept it: the proposal shown, what
    ``look`` printed while it waited, the fix cell's id."""
    api.set_script([
        Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": source})]),
        Reply([text("Fixed.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    if allow is not None:
        lab.run(f"%agent allow run_code {allow}")
    fail(lab, FAILING, "lookup")
    cell = lab.execute("%agent fix lookup", cell_id="fixer")
    cells = [code("setup", SETUP), code("lookup", FAILING), code("fixer", "%agent fix lookup")]
    shown, looked = serve(lab, cell, cells, lambda proposal: accepted(source), look)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert len(shown) == 1
    return shown[0], looked, cell


@pytest.mark.kernel
def test_a_key_error_fix_shows_what_it_would_change_and_leaves_df_as_it_was(
    lab: Any, api: StandInAPI
) -> None:
    lab.run("from qloop_kernel.values.fingerprint import fingerprint as _fp")
    lab.run(SETUP, cell_id="setup")
    lab.run("_before = {n: _fp(v) for n, v in dict(df=df, raw=raw, frames=frames).items()}")
    proposal, looked, cell = fix_with(lab, api, FIXED, "write")
    assert proposal["effect"] == {
        "changes": ["total: created (int 30)", "df: DataFrame 5×1 → 5×2, added column b"],
        "note": "",
    }
    assert looked == ["(5, 1) True True False False"]  # while it waited: nothing had changed
    after = "print({n: _fp(v) for n, v in dict(df=df, raw=raw, frames=frames).items()} == _before)"
    assert lab.run(after).strip() == "True"  # accepted, not run: df is untouched
    assert lab.run(LOOK).strip() == "(5, 1) True True False False"
    # Nothing of the run ahead went to the cell, the record or the model.
    said = lab.text(cell) + json.dumps(saved_record(lab, cell))
    said += json.dumps([r.body["messages"] for r in api.requests])
    assert "printed ahead" not in said and "added column" not in said
    undo = lab.execute("%agent undo")
    lab.complete(undo, 60)
    assert "nothing to undo" in lab.text(undo) + lab.error_text(undo)  # the run ahead is no step


@pytest.mark.kernel
def test_an_external_edit_says_why_not_and_did_not_run(lab: Any, api: StandInAPI) -> None:
    source = "df.to_csv('ahead.csv')\ntotal = 0"
    proposal, looked, _ = fix_with(lab, api, source, "all")
    assert proposal["effect"] == {"changes": [], "note": "not run ahead: its class is external"}
    assert looked == ["(5, 1) True True False False"]  # no ahead.csv
    assert lab.run(LOOK).strip() == "(5, 1) True True False False"


@pytest.mark.kernel
def test_a_policy_that_asks_before_write_steps_says_so(lab: Any, api: StandInAPI) -> None:
    proposal, looked, _ = fix_with(lab, api, FIXED, None)
    assert proposal["effect"] == {
        "changes": [],
        "note": "not run ahead: the policy 'ask' asks before write steps",
    }
    assert looked == ["(5, 1) True True False False"]


@pytest.mark.kernel
def test_a_raising_edit_says_it_raised_with_the_error_redacted(lab: Any, api: StandInAPI) -> None:
    secret = "sk-ant-api03-" + "Q" * 40
    source = f"df['b'] = 1\ntotal = int({secret!r})"
    proposal, looked, _ = fix_with(lab, api, source, "write")
    note = proposal["effect"]["note"]
    assert note.startswith("run ahead, it raised ValueError: invalid literal for int()")
    assert secret not in note and proposal["effect"]["changes"] == []
    assert looked == ["(5, 1) True True False False"]  # the column it added is gone again


@pytest.mark.kernel
def test_a_run_ahead_past_its_time_limit_is_interrupted_and_says_so(
    lab: Any, api: StandInAPI
) -> None:
    lab.run("%agent set code_timeout 2")
    source = "import time\ntime.sleep(30)\ntotal = 1"
    proposal, looked, _ = fix_with(lab, api, source, "write")
    assert proposal["effect"] == {
        "changes": [],
        "note": "not run ahead to its end: it took longer than 2 s and was interrupted",
    }
    assert looked == ["(5, 1) True True False False"]


@pytest.mark.kernel
def test_an_added_cell_shows_its_effect_and_an_edit_of_a_markdown_cell_none(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("add_cell", {"source": "df.describe()", "after": "setup"}),
               tool_use("edit_cell", {"cell_id": "notes", "source": "Summary"})]),
        Reply([text("Described.")]),
    ])  # fmt: skip
    lab.run(SETUP, cell_id="setup")
    lab.run("%agent set ask_read off")  # read steps run unasked: read code runs ahead
    cell = lab.execute("%%agent\nDescribe df.", cell_id="agent")
    notes = {"id": "notes", "cell_type": "markdown", "source": "# Notes", "metadata": {}}
    cells = [code("setup", SETUP), notes, code("agent", "%%agent\nDescribe df.")]

    def decide(proposal: dict[str, Any]) -> dict[str, Any]:
        target = proposal.get("target", "added")
        return {"decision": "accepted", "cell_id": target, "source": proposal["source"]}

    shown, looked = serve(lab, cell, cells, decide, LOOK)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    assert [(p["kind"], p.get("effect")) for p in shown] == [
        ("add", {"changes": [], "note": ""}),  # read code: it changes no variable
        ("edit", None),  # a markdown cell's text is not run
    ]
    assert looked == ["(5, 1) True True False False"] * 2


def test_qloop_run_runs_no_proposal_ahead() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nd = {'a': 1}", id="setup"),
        nbformat.v4.new_code_cell("value = d['b']", id="lookup"),
        nbformat.v4.new_code_cell("%agent fix", id="fixer"),
        nbformat.v4.new_code_cell("import sys\nprint('statistics' in sys.modules)", id="look"),
    ]
    # Importing statistics (class read) is what a run ahead would leave behind.
    fixed = "import statistics\nvalue = d.get('b', 0)"
    script = [Reply([tool_use("edit_cell", {"cell_id": "lookup", "source": fixed})]),
              Reply([text("use a default")])]  # fmt: skip
    with StandInAPI(script) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": "write"}
        client = AgentNotebookClient(nb, progress=io.StringIO(), timeout=120, allow_errors=True)
        client.execute(env=env)
        client.apply_proposals()
    assert nb.cells[1].source == fixed  # the policy accepted it; nothing ran it
    assert nb.cells[3].outputs[0]["text"] == "False\n"


# -- the pipeline's answer, without a kernel ---------------------------------------------------


def why_not(source: str, policy: ApprovalPolicy, grants: Grants | None = None) -> str | None:
    """What a run ahead of ``source`` would say under ``policy`` (None: it would run)."""

    def run_code(code: str) -> str:
        """Run code.

        Args:
            code: the code
        """
        return code

    tool = Tool.from_function(run_code, classify=lambda i: classify(i["code"]))
    runtime = ToolRuntime.of([tool], PolicyDenier(policy.name), policy=policy,
                             grants=grants or Grants())  # fmt: skip
    ahead = RunAhead(runtime, runner=None, undo=None)  # type: ignore[arg-type]
    request = runtime.request(tool, tool_call(source), {"code": source})
    return ahead.why_not(request)


def tool_call(source: str) -> ToolCall:
    return ToolCall("c1", "run_code", {"code": source})


WRITE, READ = "x = 1", "len([1, 2])"


def test_the_pipeline_decides_a_run_ahead_as_a_step_policy_grants_and_admin_floor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    readonly = ApprovalPolicy("readonly")
    assert why_not(WRITE, readonly) == "the policy 'readonly' does not run write steps"
    assert why_not(READ, readonly) is None
    assert why_not(WRITE, ApprovalPolicy("write")) is None
    assert why_not(WRITE, ApprovalPolicy("ask")) == "the policy 'ask' asks before write steps"
    assert why_not(READ, ApprovalPolicy("ask", ask_read=False)) is None
    granted = Grants()
    granted.add(Grant("run_code", "write", "session", None))
    assert why_not(WRITE, ApprovalPolicy("ask"), granted) is None  # a grant runs it unasked
    assert why_not("import os\nos.remove('x')", ApprovalPolicy("auto")) == (
        "its class is destructive"
    )
    monkeypatch.setattr(jupyter_core.paths, "SYSTEM_CONFIG_PATH", [str(tmp_path / "etc")])
    monkeypatch.setattr(jupyter_core.paths, "ENV_CONFIG_PATH", [str(tmp_path / "env")])
    floor = tmp_path / "admin.json"
    floor.write_text(json.dumps({"always_ask": ["write"]}), "utf-8")
    monkeypatch.setenv(ADMIN_ENV, str(floor))
    held = why_not(WRITE, ApprovalPolicy("auto"))
    assert held is not None and "every 'write' step needs a person's approval" in held
    assert why_not(WRITE, ApprovalPolicy("ask"), granted) == held  # nor does a grant run it


def test_the_note_says_what_stopped_a_run_ahead() -> None:
    ahead = RunAhead(None, CodeRunner(None, timeout_s=2), None)  # type: ignore[arg-type]
    breach = "the step changed how approval works (the policies); the turn was stopped"
    assert ahead._note(None, breach, 0.1) == (
        "run ahead, it changed how approval works; that was put back"
    )
    stopped = StepStopped("stopped by the Stop button")
    assert ahead._note(stopped, None, 0.5) == "not run ahead to its end: stopped by the Stop button"
    assert ahead._note(StepStopped("limit"), None, 2.0).endswith(
        "longer than 2 s and was interrupted"
    )
    assert ahead._note(None, None, 0.1) == ""
