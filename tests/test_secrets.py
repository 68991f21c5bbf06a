"""Secrets never reach the model, the saved notebook or the logs.

Unit tests of the redaction rules (secret values, key shapes, credentials in URLs and connection
strings, private variables, the file-descriptor relay) and of each path to the model (prompt, tool
results, replayed messages), then canary tests through real kernels and `qloop run`: every output stream
(IOPub), the saved notebook, the stand-in's request log, the log file, and the kernel's own
stdout/stderr.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.conversation import ConversationManager
from qloop_kernel.settings import Settings
from qloop_kernel.messages import ToolCall
from qloop_kernel.permissions import AutoApprover
from qloop_kernel.records import CellRecord, Timings, load_record
from jupyter_client.manager import KernelManager

import tests.kernel_client
from qloop_kernel.headless import cli
from qloop_kernel.redact import (
    MIN_FRAGMENT,
    REDACTED,
    PrivateVariables,
    connection_passwords,
    redact,
    redact_text,
    redacted_fds,
    redacted_output,
)
from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.tools.runtime import ToolRuntime
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import LabKernel

KEY = "sk-ant-api03-Qc4nary7Key0Zx9Wv2Ut5Sr8Pq1On4Ml7Kj0Ih3Gf6Ed9Cb2Aa5Yy8Xx1Ww4Vv7Uu0Tt3-AbCdEfAA"
TOKEN = "qtok9F3kZ7mQ2xW8vB5nL1cR6tY4hJ0dG"  # not shaped like any known key
DB_PASSWORD = "pgPass7Kq2Zx9Wv4Lm"  # inside DATABASE_URL: a URL's password, the name is no secret
DATABASE_URL = f"postgres://analyst:{DB_PASSWORD}@db.internal:5432/sales"


def pieces(secret: str, size: int = MIN_FRAGMENT) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def leaked(secret: str, text: str) -> list[str]:
    """Pieces of ``secret`` (MIN_FRAGMENT characters) found in ``text``."""
    return [piece for piece in pieces(secret) if piece in text]


@pytest.fixture
def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)


# -- the rules ------------------------------------------------------------------------------------


def test_values_of_secret_looking_variables_and_key_shapes_are_redacted() -> None:
    env = {"SERVICE_PASSWORD": "hunter2-but-longer", "HOME": "/home/someone"}
    said = redact_text("pw hunter2-but-longer, key sk-ant-api03-abcdefghijk, /home/someone", env)
    assert said == f"pw {REDACTED}, key {REDACTED}, /home/someone"


@pytest.mark.parametrize(
    "shown",
    [
        "'" + TOKEN[:25] + "...",  # a preview cut at the end
        "[... 2 characters omitted ...]" + TOKEN[9:],  # the tail kept by a truncation
        f"Characters 3-{len(TOKEN) - 1} of {len(TOKEN)}:\n" + TOKEN[3:],  # a page of the string
        TOKEN[5 : 5 + MIN_FRAGMENT],  # any piece of the minimum length
    ],
)
def test_pieces_of_a_token_are_redacted(shown: str) -> None:
    said = redact_text(shown, {"SOME_TOKEN": TOKEN})
    assert leaked(TOKEN, said) == [] and REDACTED in said


def test_pieces_shorter_than_the_minimum_and_path_values_are_kept() -> None:
    env = {"SOME_TOKEN": TOKEN, "XAUTHORITY": "/home/someone/.Xauthority-c0ffee12"}
    short = TOKEN[: MIN_FRAGMENT - 1]
    said = redact_text(f"{short} /home/someone/.Xauthority-c0 /home/someone/data.csv", env)
    assert said == f"{short} /home/someone/.Xauthority-c0 /home/someone/data.csv"
    assert redact_text(f"x {TOKEN[::-1]} y", env) == f"x {TOKEN[::-1]} y"  # same letters, no piece


def test_redaction_is_idempotent_and_deep() -> None:
    env = {"SOME_TOKEN": TOKEN}
    value = {"a": [f"{TOKEN} and {TOKEN[4:20]}", {"b": ("x", TOKEN[-13:])}], "n": 3}
    once = redact(value, env)
    assert redact(once, env) == once
    assert once == {"a": [f"{REDACTED} and {REDACTED}", {"b": ["x", REDACTED]}], "n": 3}


class Publisher:
    """The part of ipykernel's display publisher that output redaction uses."""

    def __init__(self) -> None:
        self.hooks: list = []

    def register_hook(self, hook) -> None:
        self.hooks.append(hook)

    def unregister_hook(self, hook) -> None:
        self.hooks.remove(hook)


class Shell:
    """A shell with a display publisher and a traceback sink, like ZMQInteractiveShell."""

    def __init__(self) -> None:
        self.display_pub = Publisher()
        self.shown: list = []

    def _showtraceback(self, etype, evalue, stb) -> None:
        self.shown.append((etype, str(evalue), stb))


def test_what_a_cell_prints_displays_and_raises_is_redacted(
    secrets_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAKIAIOSFODNN7EXAMPLE"  # contains an AWS-key-shaped run
    msg = {"content": {"data": {"text/plain": f"t={TOKEN}", "image/png": png,
                                "application/json": {"k": KEY}, "kept+json": {"k": KEY}}}}  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    shell = Shell()
    with redacted_output(shell, keep=("kept+json",)):
        print(f"the token is {TOKEN}")
        [hook] = shell.display_pub.hooks
        data = hook(msg)["content"]["data"]
        shell._showtraceback(ValueError, ValueError(TOKEN), [f"line {KEY}", f"ValueError: {TOKEN}"])
    assert shell.display_pub.hooks == [] and sys.stdout is out and "write" not in vars(out)
    assert "_showtraceback" not in vars(shell)
    assert out.getvalue() == f"the token is {REDACTED}\n"
    assert data == {"text/plain": f"t={REDACTED}", "image/png": png,
                    "application/json": {"k": REDACTED}, "kept+json": {"k": KEY}}  # fmt: skip
    assert shell.shown == [(ValueError, REDACTED, [f"line {REDACTED}", f"ValueError: {REDACTED}"])]


# -- every path to the model ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ipython() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()


@pytest.fixture
def shell(ipython: InteractiveShell, secrets_env: None) -> InteractiveShell:
    ipython.reset(new_session=True)
    cell = "import os\nheld_token = os.environ['QLOOP_CANARY_TOKEN']\nheld_key = os.environ['ANTHROPIC_API_KEY']"
    assert ipython.run_cell(cell, store_history=True).success
    assert ipython.run_cell("held_token[:30]", store_history=True).success  # an Out[] value
    return ipython


def tool_texts(shell: InteractiveShell, *calls: tuple[str, dict]) -> list[str]:
    runtime = ToolRuntime.of(builtin_tools(shell), AutoApprover())
    outcomes = [runtime.run(ToolCall(f"t{i}", name, args)) for i, (name, args) in enumerate(calls)]
    return [o.text for o in outcomes]


def test_tool_results_never_carry_a_secret_or_a_piece_of_it(shell: InteractiveShell) -> None:
    texts = tool_texts(
        shell,
        ("list_variables", {}),
        ("inspect_variable", {"name": "held_token"}),
        ("inspect_variable", {"name": "held_token", "offset": 3}),
        ("inspect_variable", {"name": "held_key", "offset": 9}),
        ("notebook_history", {}),
        ("run_code", {"code": "print(held_token, held_key)\nheld_token"}),
        ("run_code", {"code": "raise ValueError(held_token)"}),
    )
    assert "held_token" in texts[0] and "ValueError" in texts[6]
    for shown in texts:
        assert REDACTED in shown, shown
        assert leaked(TOKEN, shown) == [] and leaked(KEY, shown) == [], shown


def test_the_prompt_is_redacted_before_it_is_sent_and_saved(secrets_env: None) -> None:
    model = ScriptedModel([respond(text("ok"))])
    saved: list[CellRecord] = []
    manager = ConversationManager()
    store = type("Store", (), {"save": lambda _, r: saved.append(r)})()
    prompt = f"Use the token {TOKEN} and the key {KEY} to fetch the data."
    runtime = ToolRuntime.of([], AutoApprover())
    manager.run_turn(
        prompt, model=model, runtime=runtime, settings=Settings(model="m"), cell_id="c",
        store=store,
    )
    sent = json.dumps(model.requests[0].messages)
    assert f"Use the token {REDACTED} and the key {REDACTED}" in sent
    assert leaked(TOKEN, sent) == [] and leaked(KEY, sent) == []
    assert saved[-1].prompt == f"Use the token {REDACTED} and the key {REDACTED} to fetch the data."
    assert leaked(TOKEN, json.dumps(manager.messages)) == []


def test_replayed_messages_are_redacted_before_they_join_the_conversation(
    secrets_env: None,
) -> None:
    # A record written where the token was not a secret yet: its messages carry the value.
    record = CellRecord(
        session_id="s", prompt="p", model="m", status="completed",
        messages=[{"role": "user", "content": [{"type": "text", "text": f"token {TOKEN}"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "noted"}]}],
        timings=Timings(started_at="2025-01-01T00:00:00Z"),
    ).sealed()  # fmt: skip
    manager = ConversationManager()
    manager.adopt(load_record(record.model_dump(mode="json")))
    assert manager.messages[0]["content"][0]["text"] == f"token {REDACTED}"


# -- canary over a whole notebook run --------------------------------------------------------------


def canary_notebook(log_path: Path) -> nbformat.NotebookNode:
    logging_cell = (
        "import logging\n"
        f"handler = logging.FileHandler({str(log_path)!r})\n"
        "handler.setFormatter(logging.Formatter('%(name)s %(levelname)s %(message)s'))\n"
        "for name in ('qloop', 'qloop_kernel', 'anthropic', 'httpx'):\n"
        "    logging.getLogger(name).addHandler(handler)\n"
        "    logging.getLogger(name).setLevel(logging.DEBUG)\n"
        "%load_ext qloop_kernel"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(logging_cell),
        nbformat.v4.new_code_cell(
            "import os\nheld_token = os.environ['QLOOP_CANARY_TOKEN']\n"
            "held_key = os.environ['ANTHROPIC_API_KEY']"
        ),
        nbformat.v4.new_code_cell(f"%%agent\nCheck that the token {TOKEN} and the key {KEY} work."),
    ]
    return nb


PRINTING_CODE = (
    "import os\nfrom IPython.display import Markdown, display\n"
    "print(os.environ['QLOOP_CANARY_TOKEN'], os.environ['ANTHROPIC_API_KEY'])\n"
    "display(Markdown('token: ' + os.environ['QLOOP_CANARY_TOKEN']))\n"
    "os.environ['QLOOP_CANARY_TOKEN']"
)


def canary_script() -> list[Reply]:
    return [
        Reply([text("Looking."), tool_use("list_variables", {})]),
        Reply(
            [
                tool_use("inspect_variable", {"name": "held_token"}),
                tool_use("inspect_variable", {"name": "held_token", "offset": 3}),
                tool_use("inspect_variable", {"name": "held_key", "offset": 9}),
                tool_use("notebook_history", {}),
            ]
        ),  # fmt: skip
        Reply([tool_use("run_code", {"code": PRINTING_CODE})]),
        Reply([tool_use("run_code", {"code": "raise ValueError(held_token)"})]),
        Reply([text("Both are set; I did not show them.")]),
    ]


def execute(nb: nbformat.NotebookNode, monkeypatch: pytest.MonkeyPatch, api: StandInAPI) -> None:
    for name, value in api.environment(api_key=KEY).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)
    monkeypatch.setenv("QLOOP_APPROVAL", "auto")
    AgentNotebookClient(nb, progress=None, timeout=120, kernel_name="python3").execute()


def saved_text(nb: nbformat.NotebookNode) -> str:
    """Everything the .ipynb saves except the sources the user typed."""
    parts = [json.dumps(nb.metadata)]
    parts += [json.dumps(c.get("outputs", [])) + json.dumps(c.metadata) for c in nb.cells]
    return "\n".join(parts)


def assert_no_canary(where: str, text: str) -> None:
    assert leaked(TOKEN, text) == [], f"the token leaked into {where}"
    assert leaked(KEY, text) == [], f"the key leaked into {where}"


@pytest.mark.kernel
def test_canary_appears_nowhere_in_a_notebook_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_path = tmp_path / "kernel.log"
    nb = canary_notebook(log_path)
    with StandInAPI(canary_script(), api_key=KEY) as api:
        execute(nb, monkeypatch, api)
        bodies = [json.dumps(r.body) for r in api.requests]
        assert len(bodies) == 5 and api.remaining == 0
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    record = load_record(saved.cells[2].metadata["qloop"])
    assert record.status == "completed" and len(record.replay_steps()) == 1
    sent = "\n".join(bodies)
    assert sent.count(REDACTED) >= 8  # prompt, list, inspect x3, history, print, error
    assert "held_token" in sent and "Characters 3-" in sent
    shown = saved_text(saved)
    assert "token: [REDACTED]" in shown  # the display of the code ran, redacted
    log = log_path.read_text()
    assert "tool=run_code" in log and "tool=inspect_variable" in log
    for where, value in [("the saved notebook", shown), ("the requests", sent), ("the log", log)]:
        assert_no_canary(where, value)

    # Re-running replays the saved turn: its redacted prompt still matches the typed one.
    with StandInAPI(api_key=KEY) as api:
        execute(saved, monkeypatch, api)
        assert api.requests == []
    assert "replay complete" in json.dumps(saved.cells[2].outputs)
    assert_no_canary("the replayed notebook", saved_text(saved))
    assert_no_canary("the log after replay", log_path.read_text())
    assert os.environ.get("QLOOP_CANARY_TOKEN") == TOKEN  # the run used the canary


@pytest.mark.kernel
def test_what_agent_code_writes_to_the_file_descriptor_is_redacted_in_the_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # ipykernel forwards fd output only outside pytest
    code = "import os\nos.system('echo from a subprocess: $QLOOP_CANARY_TOKEN')"
    script = [Reply([tool_use("run_code", {"code": code})]), Reply([text("Echoed.")])]
    with (
        StandInAPI(script) as api,
        LabKernel({**api.environment(), "QLOOP_CANARY_TOKEN": TOKEN}) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        cell = lab.execute("%%agent --approve auto\nEcho the token.", cell_id="echo")
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
        lab.wait_for_output(cell, "from a subprocess: ", 10)  # flushed a little later
        assert "from a subprocess: [REDACTED]" in lab.stdout(cell)
        assert_no_canary(
            "the cell's outputs", json.dumps([m["content"] for m in lab.outputs(cell)])
        )
