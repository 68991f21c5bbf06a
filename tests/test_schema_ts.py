"""The JSON Schemas the extension's TypeScript types are generated from (qloop_kernel/schema):
committed as the Python types generate them, and true of what the kernel writes and sends. A real
kernel's comm traffic is checked here, the page played by the test as the extension answers;
labextension/test/schema.spec.ts checks the TypeScript side against the same files."""

from __future__ import annotations

import contextlib
import json
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import nbformat
import pytest
from jsonschema.exceptions import best_match

from qloop_kernel.notebook_view import notebook_view
from qloop_kernel.records import MIME_TYPE, unsigned_json
from qloop_kernel.records.protocol_schema import Answers, KernelRequest
from qloop_kernel.records.schema_export import SCHEMA_DIR, render, schemas, stale
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.kernel_client import LabKernel
from tests.test_perf_records import run_long_turn

ROOT = Path(__file__).resolve().parents[1]
QLOOP, WAITING = "qloop", "qloop.waiting"
CLEAN = "df = df.dropna()"


def committed(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text("utf-8"))  # type: ignore[no-any-return]


def validator(name: str, *definitions: str) -> jsonschema.Draft202012Validator:
    """A validator of the committed schema ``name``, or of any of some of its definitions."""
    schema = committed(name)
    refs = [{"$ref": f"#/$defs/{d}"} for d in definitions]
    if len(refs) == 1:
        schema = {"$defs": schema["$defs"], **refs[0]}
    elif refs:
        schema = {"$defs": schema["$defs"], "anyOf": refs}
    return jsonschema.Draft202012Validator(schema)


def problems(check: jsonschema.Draft202012Validator, value: Any) -> list[str]:
    """Why ``value`` does not match (the most telling error), or nothing."""
    error = best_match(check.iter_errors(value))
    return [] if error is None else [f"/{'/'.join(map(str, error.absolute_path))}: {error.message}"]


def requests_by_op() -> dict[str, list[str]]:
    """The definitions of the requests the protocol's schema names, by ``op``."""
    defs = committed("protocol.schema.json")["$defs"]
    found: dict[str, list[str]] = {}
    for ref in defs["KernelRequest"]["anyOf"]:
        name = ref["$ref"].split("/")[-1]
        found.setdefault(defs[name]["properties"]["op"]["const"], []).append(name)
    return found


def request_ops() -> set[str]:
    return set(requests_by_op())


# -- the files ------------------------------------------------------------------------------------


def test_the_committed_schemas_are_what_the_python_types_generate() -> None:
    assert stale() == [], (
        "the schema files differ from the types: run `jlpm schema` in labextension/ "
        "(python -m qloop_kernel.records.schema_export, then the TypeScript types)"
    )
    for name, schema in schemas().items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert render(schema) == (SCHEMA_DIR / name).read_text("utf-8")


def test_a_changed_type_makes_the_committed_schema_stale(tmp_path: Path) -> None:
    for name, schema in schemas().items():
        schema["$defs"]["ToolCallRecord"]["properties"].pop("duration_s")
        (tmp_path / name).write_text(render(schema), "utf-8")
    assert sorted(stale(tmp_path)) == ["protocol.schema.json", "record.schema.json"]


def test_every_request_has_its_answer_in_the_schema() -> None:
    ops = {typing.get_args(typing.get_type_hints(t)["op"])[0]
           for t in typing.get_args(KernelRequest.model_fields["root"].annotation)}  # fmt: skip
    assert set(Answers.__annotations__) == ops == request_ops()


# -- records --------------------------------------------------------------------------------------


def test_records_of_a_turn_running_and_finished_match_the_record_schema() -> None:
    store, record = run_long_turn(step=1.0)
    check = validator("record.schema.json")
    assert problems(check, record.to_json()) == []
    running = store.running()
    assert running and all(problems(check, unsigned_json(r)) == [] for r in running)


def test_the_records_saved_in_the_demo_notebook_match_the_record_schema() -> None:
    notebook = nbformat.read(ROOT / "notebooks" / "demo.ipynb", as_version=4)
    saved = [c.metadata["qloop"] for c in notebook.cells if "qloop" in c.metadata]
    saved += [o["data"][MIME_TYPE] for c in notebook.cells for o in c.get("outputs", [])
              if MIME_TYPE in o.get("data", {})]  # fmt: skip
    assert saved
    check = validator("record.schema.json")
    assert [problems(check, r) for r in saved] == [[]] * len(saved)


def test_the_record_schema_refuses_what_loading_refuses() -> None:
    _, record = run_long_turn(step=1.0)
    check = validator("record.schema.json")
    for change in ({"status": "exploded"}, {"schema_version": 3}, {"extra": 1},
                   {"tool_calls": [{"id": "t1"}]}):  # fmt: skip
        assert problems(check, {**record.to_json(), **change}), change


# -- the comms of a real kernel, the page played by the test --------------------------------------


class Page:
    """The extension's side of the ``qloop`` and ``qloop.waiting`` comms: every request of the
    kernel is answered as the extension answers it (but for the operations in ``hold``), and
    every message either way is kept."""

    def __init__(self, lab: LabKernel) -> None:
        self.lab = lab
        self.hold: set[str] = set()
        self.answers: list[tuple[str, dict[str, Any]]] = []  # (the request's op, the ack)
        self.sent: list[tuple[str, dict[str, Any]]] = []  # its other messages: (target, data)
        self._answered: set[tuple[str, str]] = set()
        self._added = 0

    def received(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every message of the kernel on the two comms: (target, comm id, data)."""
        targets: dict[str, str] = {}
        found = []
        for channel, msg in self.lab.history():
            content = msg["content"]
            if channel != "iopub" or msg["msg_type"] not in ("comm_open", "comm_msg"):
                continue
            if msg["msg_type"] == "comm_open":
                targets[content["comm_id"]] = content["target_name"]
            target = targets.get(content["comm_id"])
            if target in (QLOOP, WAITING) and content.get("data"):
                found.append((target, content["comm_id"], content["data"]))
        return found

    def requests(self, op: str) -> list[dict[str, Any]]:
        return [d for t, _, d in self.received() if t == QLOOP and d.get("op") == op]

    def _unanswered(self) -> list[tuple[str, dict[str, Any]]]:
        return [(comm_id, data) for target, comm_id, data in self.received()
                if target == QLOOP and data.get("op") not in self.hold
                and (comm_id, data.get("request_id")) not in self._answered]  # fmt: skip

    def answer_all(self) -> None:
        for comm_id, request in self._unanswered():
            self._answered.add((comm_id, request["request_id"]))
            ack = {"op": "ack", "request_id": request["request_id"], "ok": True,
                   **self._answer(request)}  # fmt: skip
            self.answers.append((request["op"], ack))
            self.lab.comm_msg(comm_id, ack)

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "hello":
            return {"frontend": "jupyterlab", "version": "test", "operations": sorted(request_ops()),
                    "notebook_path": "work/a.ipynb", "notebook_grants": None}  # fmt: skip
        if op == "read_notebook":
            cells = [nbformat.v4.new_code_cell(s, id=i) for i, s in
                     (("agent", "%%agent\nWork on df."), ("clean", CLEAN), ("plot", "df.plot()"))]  # fmt: skip
            return notebook_view(cells, request["cell_ids"], request["outputs"], "work/a.ipynb")
        if op == "cell_source":
            return {"cell_type": "code", "source": CLEAN}
        if op == "propose":
            proposal = request["proposal"]
            if proposal["kind"] == "edit":
                return {"decision": "accepted", "cell_id": proposal["target"], "reason": "",
                        "source": proposal["source"], "previous": "df.plot()",
                        "previous_provenance": None}  # fmt: skip
            self._added += 1
            return {"decision": "accepted", "cell_id": f"new{self._added}", "reason": "",
                    "source": proposal["source"]}  # fmt: skip
        return {}

    def waiting(self) -> list[tuple[str, dict[str, Any]]]:
        """The messages of the kernel on ``qloop.waiting`` comms: (comm id, data)."""
        return [(c, d) for t, c, d in self.received() if t == WAITING]

    def describe(self) -> None:
        """Ask a waiting comm which cell waits, as a page opened later does, and wait for the
        answer."""
        comm_id, _ = self.waiting()[0]
        message = {"op": "describe"}
        self.sent.append((WAITING, message))
        self.lab.comm_msg(comm_id, message)
        self.serve_until(lambda: len(self.waiting()) > 1, "the waiting card's description")

    def attach(self, op: str) -> None:
        """Take over the comm that sent the latest ``op`` request, as a reloaded page does: the
        kernel sends again what waits for an answer."""
        comm_id = [c for t, c, d in self.received() if t == QLOOP and d.get("op") == op][-1]
        message = {"op": "attached"}
        self.sent.append((QLOOP, message))
        self.lab.comm_msg(comm_id, message)

    def serve_until(self, probe: Callable[[], Any], what: str, timeout: float = 90) -> Any:
        """Answer the kernel's requests until ``probe`` gives something."""
        deadline = time.monotonic() + timeout
        while True:
            self.answer_all()
            found = probe()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            with contextlib.suppress(TimeoutError):
                self.lab.wait_for(lambda: bool(self._unanswered()) or probe(), 2, what)


def widget(lab: LabKernel, parent: str, model_name: str) -> str | None:
    """The comm id of the cell's open widget of ``model_name``, if it shows one now."""
    with contextlib.suppress(TimeoutError):
        return lab.wait_for_widget(model_name=model_name, parent=parent, timeout=0)
    return None


def one_turn_of_every_operation(lab: LabKernel, api: StandInAPI, page: Page) -> None:
    """Read the notebook, add two cells (the second runs), run a cell with a notebook grant, edit
    a cell; then undo the edit."""
    api.set_script([
        Reply([tool_use("read_notebook", {})]),
        Reply([tool_use("add_cell", {"source": "## Cleaning", "cell_type": "markdown"}),
               tool_use("add_cell", {"source": CLEAN, "run": True})]),
        Reply([tool_use("run_cell", {"cell_id": "clean"})]),
        Reply([tool_use("edit_cell", {"cell_id": "plot", "source": "df.plot(title='a')"})]),
        Reply([text("done")]),
    ])  # fmt: skip
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None, 3]})")
    cell = lab.execute("%%agent\nClean df, run it and title the plot.", cell_id="agent")
    scope = page.serve_until(lambda: widget(lab, cell, "DropdownModel"), "the run_cell card")
    page.serve_until(page.waiting, "the waiting card's comm")
    page.describe()
    lab.set_value(scope, "index", 2)  # for this notebook
    lab.click(lab.wait_for_button("Always allow", parent=cell))
    page.serve_until(lambda: lab.replied(cell), "the end of the turn")
    assert lab.complete(cell, 60)["content"]["status"] == "ok"
    undo = lab.execute("%agent undo")
    page.serve_until(lambda: lab.replied(undo), "the undo")
    assert "cell plot has its source from before the step again" in lab.stdout(undo)


def a_turn_stopped_while_proposals_wait(lab: LabKernel, api: StandInAPI, page: Page) -> None:
    """Two proposals wait together, are sent again to a page that takes the comm over, and are
    withdrawn when the turn is stopped."""
    api.set_script([
        Reply([tool_use("add_cell", {"source": "## Later", "cell_type": "markdown"}),
               tool_use("add_cell", {"source": "x = 1"})]),
        Reply([text("done")]),
    ])  # fmt: skip
    page.hold = {"propose"}
    before = len(page.requests("propose"))
    cell = lab.execute("%%agent\nAdd two cells.", cell_id="agent2")
    page.serve_until(lambda: len(page.requests("propose")) >= before + 2, "two proposals")
    # Sent again to a page that took the comm over: the kernel waits for the user now.
    page.attach("propose")
    page.serve_until(lambda: len(page.requests("propose")) >= before + 4, "the proposals again")
    lab.interrupt()
    page.serve_until(lambda: page.requests("withdraw"), "the withdrawal")
    page.serve_until(lambda: lab.replied(cell), "the end of the stopped turn")


@pytest.mark.kernel
def test_every_message_a_real_kernel_sends_and_is_answered_matches_the_protocol_schema(
    lab: LabKernel, api: StandInAPI
) -> None:
    page = Page(lab)
    one_turn_of_every_operation(lab, api, page)
    a_turn_stopped_while_proposals_wait(lab, api, page)

    received = page.received()
    requests = [d for t, _, d in received if t == QLOOP]
    assert {r["op"] for r in requests} == request_ops()  # every operation, none unknown
    checks = {op: validator("protocol.schema.json", *d) for op, d in requests_by_op().items()}
    assert [(r, problems(checks[r["op"]], r)) for r in requests
            if problems(checks[r["op"]], r)] == []  # fmt: skip
    check = validator("protocol.schema.json", "KernelRequest")
    assert [r for r in requests if problems(check, r)] == []
    checks = {QLOOP: validator("protocol.schema.json", "PageMessage"),
              WAITING: validator("protocol.schema.json", "WaitingMessage")}  # fmt: skip
    others = [(WAITING, d) for _, d in page.waiting()] + page.sent
    assert {m["op"] for _, m in others} == {"waiting", "describe", "attached"}
    assert [problems(checks[t], m) for t, m in others] == [[]] * len(others)
    answers = committed("protocol.schema.json")["$defs"]["Answers"]["properties"]
    for op, ack in page.answers:
        check = validator("protocol.schema.json", answers[op]["$ref"].split("/")[-1])
        assert problems(check, ack) == [], op

    # The records the kernel saved: sent to the page and shown in the output mirror.
    saved = [r["value"] for r in requests if r["op"] == "set_metadata"]
    shown = [m["content"]["data"][MIME_TYPE] for _, m in lab.history()
             if m["msg_type"] in ("display_data", "update_display_data")
             and MIME_TYPE in m["content"]["data"]]  # fmt: skip
    assert {r["status"] for r in saved} >= {"running", "completed", "interrupted"} and shown
    check = validator("record.schema.json")
    assert [problems(check, r) for r in saved + shown] == [[]] * len(saved + shown)
