"""The kernel session hosts outside agents' steps: the ``qloop.host`` comm in a real kernel, and
the Jupyter server's one connection per kernel driven by the official MCP client (the outside
policy ``auto`` decides, so no page is needed)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jupyter_client import BlockingKernelClient
from mcp import types
from pydantic import TypeAdapter

from qloop_kernel.records.protocol_schema import STOPPED_BEFORE, HostAnswer
from tests.jupyter_server import JupyterServer, jupyter_server
from tests.kernel_client import LabKernel
from tests.test_mcp_server import call, run, session, text

pytestmark = pytest.mark.timeout(240)

HOST = "__import__('qloop_kernel.notebook.host', fromlist=['host'])"
FRAME = "import pandas as pd\ndf = pd.DataFrame({'a': range(5)})"
RESHAPE = "df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})"
REBIND = (
    "import qloop_kernel.policy.permissions as permissions\n"
    "permissions.policy_verdict = lambda *args, **kwargs: 'run'"
)
IS_ORIGINAL = (
    "import qloop_kernel.policy.permissions as permissions\n"
    "print(permissions.policy_verdict.__module__, permissions.policy_verdict.__name__)"
)
# A kernel where `import qloop_kernel` fails, as in an environment without qloop-kernel.
NO_QLOOP = 'import sys\n\nsys.modules["qloop_kernel"] = None\n'


# -- the host in a real kernel -------------------------------------------------------------------


def step(kernel: LabKernel, comm_id: str, code: str, client: str = "claude-code") -> HostAnswer:
    """Send one step to the kernel's host as the Jupyter server does; its answer, checked against
    the protocol's type."""
    request = {
        "op": "run_step", "request_id": uuid.uuid4().hex, "call_id": f"outside-{uuid.uuid4().hex}",
        "client": client, "code": code, "timeout_s": 60.0,
    }  # fmt: skip
    msg_id = kernel.comm_msg(comm_id, request)
    [started, answer] = kernel.wait_for(
        lambda: found if len(found := kernel.messages(msg_id, "comm_msg")) > 1 else None, 60
    )
    assert started["content"]["data"] == {"op": "started", "request_id": request["request_id"]}
    data = answer["content"]["data"]
    assert data["request_id"] == request["request_id"]
    return TypeAdapter(HostAnswer).validate_python(data)


@pytest.fixture(scope="module")
def hosted() -> Iterator[tuple[LabKernel, str]]:
    """A kernel without ``%load_ext qloop_kernel``, its host registered as the server does."""
    with LabKernel(env={"ANTHROPIC_API_KEY": None}) as kernel:
        kernel.run(f"{HOST}.register(get_ipython())")
        yield kernel, kernel.comm_open("qloop.host")


def test_an_outside_step_reports_its_changes_and_agent_undo_takes_it_back(
    hosted: tuple[LabKernel, str],
) -> None:
    kernel, comm_id = hosted
    kernel.run(FRAME)
    answer = step(kernel, comm_id, RESHAPE)
    assert answer["status"] == "ok"
    assert "df: DataFrame 5×1 → 3×2, added column b" in answer["text"]
    assert answer.get("changes") == ["df: DataFrame 5×1 → 3×2, added column b"]
    undone = kernel.run("%agent undo")  # the first step loaded the extension
    assert undone.strip() == "undone (a step of claude-code): restored df"
    assert kernel.run("print(df.shape, list(df.columns))").strip() == "(5, 1) ['a']"


def test_an_outside_step_that_rebinds_the_policy_is_put_back_and_refused(
    hosted: tuple[LabKernel, str],
) -> None:
    kernel, comm_id = hosted
    answer = step(kernel, comm_id, REBIND)
    assert answer["status"] == "refused"
    assert "the step changed how approval works (the policies)" in answer["text"]
    shown = kernel.run(IS_ORIGINAL).strip()
    assert shown == "qloop_kernel.policy.permissions policy_verdict"


def test_an_outside_step_that_raises_or_prints_answers_as_the_agents_run_code(
    hosted: tuple[LabKernel, str],
) -> None:
    kernel, comm_id = hosted
    printed = step(kernel, comm_id, "print('hello from outside')\n6 * 7")
    failed = step(kernel, comm_id, "1 / 0")
    assert printed["status"] == "ok"
    assert "stdout:\nhello from outside" in printed["text"] and "result:\n42" in printed["text"]
    assert failed["status"] == "error" and "ZeroDivisionError" in failed["text"]


def answered(kernel: LabKernel, request_id: str) -> dict[str, Any] | None:
    """The host's answer to ``request_id`` (sent after the cell: under whichever parent)."""
    for channel, message in kernel.history():
        data = message["content"].get("data") if channel == "iopub" else None
        found = data or {}
        ours = message["msg_type"] == "comm_msg" and found.get("request_id") == request_id
        if ours and found.get("op") == "ack":
            return dict(found)
    return None


def began(kernel: LabKernel, request_id: str) -> bool:
    """Whether the host said it began to run ``request_id``."""
    return any(
        message["msg_type"] == "comm_msg"
        and message["content"].get("data") == {"op": "started", "request_id": request_id}
        for channel, message in kernel.history()
        if channel == "iopub"
    )


WAITING_CELL = """
import ipywidgets as widgets
from qloop_kernel.notebook.pump import wait_until
clicked = []
button = widgets.Button(description="release")
button.on_click(lambda _: clicked.append(1))
display(button)
wait_until(lambda: bool(clicked))
order = ["cell"]
"""


def test_a_step_sent_while_a_cell_waits_for_a_click_runs_after_that_cell(
    hosted: tuple[LabKernel, str],
) -> None:
    kernel, comm_id = hosted
    cell = kernel.execute(WAITING_CELL)
    button = kernel.wait_for_button("release", parent=cell)
    request = {
        "op": "run_step", "request_id": "while-waiting", "call_id": "outside-while-waiting",
        "client": "claude-code", "code": "order.append('step')\nprint('from the step')",
        "timeout_s": 60.0,
    }  # fmt: skip
    kernel.comm_msg(comm_id, request)
    kernel.round_trip(button)  # the pump has dispatched the step's message by now
    assert answered(kernel, "while-waiting") is None and not kernel.replied(cell)
    kernel.click(button)
    kernel.complete(cell)
    answer = kernel.wait_for(lambda: answered(kernel, "while-waiting"), 60)
    assert answer["status"] == "ok" and "from the step" in answer["text"]
    assert kernel.run("print(order)").strip() == "['cell', 'step']"
    assert "from the step" not in kernel.stdout(cell)  # never in the waiting cell's outputs


def test_a_step_cancelled_while_it_waits_behind_a_cell_never_runs(
    hosted: tuple[LabKernel, str],
) -> None:
    kernel, comm_id = hosted
    cell = kernel.execute(WAITING_CELL)
    button = kernel.wait_for_button("release", parent=cell)
    request = {
        "op": "run_step", "request_id": "cancelled", "call_id": "outside-cancelled",
        "client": "claude-code", "code": "cancelled_ran = 1", "timeout_s": 60.0,
    }  # fmt: skip
    kernel.comm_msg(comm_id, request)
    kernel.comm_msg(comm_id, {"op": "cancel", "request_id": "cancelled"})
    kernel.round_trip(button)  # both dispatched: the step waits behind the cell
    kernel.click(button)
    kernel.complete(cell)
    answer = kernel.wait_for(lambda: answered(kernel, "cancelled"), 60)
    assert answer["status"] == "refused" and answer["text"] == STOPPED_BEFORE
    assert not began(kernel, "cancelled")
    assert kernel.run("print('cancelled_ran' in dir())").strip() == "False"


# -- through the Jupyter server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("host")
    shim = base / "no-qloop"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_QLOOP)
    spec = base / "kernels" / "kernels" / "noqloop"
    spec.mkdir(parents=True)
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(shim)]))
    spec.joinpath("kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "no qloop",
                "language": "python",
                "env": {"PYTHONPATH": path},
            }
        )  # fmt: skip
    )
    env = {"JUPYTER_PATH": str(base / "kernels"), "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    with jupyter_server(base / "root", "--QloopMCP.policy=auto", env=env) as running:
        yield running


def notebook(server: JupyterServer, *sources: str, kernel: str = "python3") -> str:
    return server.open_notebook(f"nb-{uuid.uuid4().hex[:8]}.ipynb", sources, kernel=kernel)


def kernel_client(server: JupyterServer, path: str) -> BlockingKernelClient:
    """A client of the notebook's kernel, as the page is one (its connection file)."""
    import httpx

    sessions = httpx.get(server.url + "api/sessions", headers=server.headers, timeout=30).json()
    [kernel_id] = [s["kernel"]["id"] for s in sessions if s["path"] == path]
    runtime = server.root.parent / "runtime"  # JUPYTER_RUNTIME_DIR of the server fixture
    client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def in_kernel(client: BlockingKernelClient, code: str) -> str:
    printed: list[str] = []

    def output(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    client.execute_interactive(code, timeout=60, output_hook=output)
    return "".join(printed)


def test_twenty_concurrent_reads_from_one_client_all_answer(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> list[types.CallToolResult]:
        async with session(server) as client:
            made = await call(client, "run_code", path=path, code="frame = {'rows': 3}")
            assert not made.is_error, text(made)
            reads = [call(client, "inspect_variable", path=path, name="frame") for _ in range(20)]
            return list(await asyncio.wait_for(asyncio.gather(*reads), 60))

    answers = run(scenario())
    assert [a.is_error for a in answers] == [False] * 20
    assert all("rows" in text(a) for a in answers)


def test_an_outside_run_code_reports_its_changes_and_the_notebook_undoes_it(
    server: JupyterServer,
) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with session(server, name="claude-code") as client:
            made = await call(client, "run_code", path=path, code=FRAME)
            return made, await call(client, "run_code", path=path, code=RESHAPE)

    made, reshaped = run(scenario())
    assert not made.is_error and not reshaped.is_error, text(reshaped)
    assert "df: DataFrame 5×1 → 3×2, added column b" in text(reshaped)
    client = kernel_client(server, path)
    try:
        undone = in_kernel(client, "%agent undo")
        shape = in_kernel(client, "print(df.shape)")
    finally:
        client.stop_channels()
    assert undone.strip() == "undone (a step of claude-code): restored df"
    assert shape.strip() == "(5, 1)"


def test_an_outside_run_code_that_rebinds_policy_verdict_is_refused(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with session(server) as client:
            rebound = await call(client, "run_code", path=path, code=REBIND)
            return rebound, await call(client, "run_code", path=path, code=IS_ORIGINAL)

    rebound, checked = run(scenario())
    assert rebound.is_error
    assert "the step changed how approval works (the policies)" in text(rebound)
    assert "qloop_kernel.policy.permissions policy_verdict" in text(checked)


def test_a_kernel_without_qloop_gets_the_install_message(server: JupyterServer) -> None:
    path = notebook(server, kernel="noqloop")

    async def scenario() -> list[types.CallToolResult]:
        async with session(server) as client:
            return [
                await call(client, "list_variables", path=path),
                await call(client, "run_code", path=path, code="x = 1"),
            ]

    for answer in run(scenario()):
        assert answer.is_error
        assert "qloop-kernel is not installed in this kernel's environment" in text(answer)


def test_after_a_restart_the_server_connects_again_and_the_new_kernel_hosts_steps(
    server: JupyterServer,
) -> None:
    import httpx

    path = notebook(server)

    async def step(code: str) -> types.CallToolResult:
        async with session(server) as client:
            return await call(client, "run_code", path=path, code=code)

    before = run(step("x = 1"))
    sessions = httpx.get(server.url + "api/sessions", headers=server.headers, timeout=30).json()
    [kernel_id] = [s["kernel"]["id"] for s in sessions if s["path"] == path]
    restart = httpx.post(
        server.url + f"api/kernels/{kernel_id}/restart", headers=server.headers, timeout=60
    )
    assert restart.is_success
    after = run(step("y = 2"))
    assert not before.is_error and "x: created" in text(before)
    assert not after.is_error and "y: created" in text(after), text(after)


def test_stop_before_a_step_begins_leaves_the_cell_it_waits_behind_alone(tmp_path: Any) -> None:
    """Stop on the card of a step queued behind the user's running cell interrupts the step once
    it begins, never the user's cell."""
    from tests.jupyter_server import Page

    env = {"JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    with jupyter_server(tmp_path / "root", env=env) as server:
        path = notebook(server)
        user = kernel_client(server, path)
        cell: list[str] = []

        def approve(card: dict[str, Any]) -> dict[str, Any]:
            # the user runs a cell just before approving: the step is queued behind it
            cell.append(user.execute("import time\ntime.sleep(4)\nuser_done = 1"))
            return {"decision": "approve", "reason": ""}

        async def scenario() -> types.CallToolResult:
            async with session(server) as client:
                page = Page(server, path, approve)
                async with page.open():
                    code = "import time\ntime.sleep(60)\nslept = 1"
                    task = asyncio.create_task(call(client, "run_code", path=path, code=code))
                    while not page.running:
                        await asyncio.sleep(0.05)
                    async with httpx.AsyncClient(headers=server.headers) as http:
                        stop = await http.post(
                            server.url + "qloop/outside/stop", json={"id": page.running[0]["id"]}
                        )
                    assert stop.status_code == 200
                    return await asyncio.wait_for(task, 40)

        try:
            result = run(scenario())
            reply = user.get_shell_msg(timeout=30)
            while reply["parent_header"].get("msg_id") != cell[0]:
                reply = user.get_shell_msg(timeout=30)
            after = in_kernel(user, "print('user_done' in dir(), 'slept' in dir())")
        finally:
            user.stop_channels()
    assert reply["content"]["status"] == "ok"  # the user's cell was not interrupted
    # Stopped as it began (interrupted), or before it was sent (never run): never the user's cell.
    said = text(result)
    assert result.is_error and ("KeyboardInterrupt" in said or STOPPED_BEFORE in said), said
    assert after.strip() == "True False"
