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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.manager import KernelManager
from traitlets.config import Config

import tests.kernel_client
from qloop_kernel.conversation import ConversationManager
from qloop_kernel.headless import cli
from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.records import CellRecord, Timings, load_record
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
from qloop_kernel.settings import Settings
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
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


# -- credentials in URLs and connection strings ---------------------------------------------------


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("postgres://user:pass@host/db", f"postgres://user:{REDACTED}@host/db"),
        ("engine = create_engine('mysql+pymysql://u:p@h')", f"engine = create_engine('mysql+pymysql://u:{REDACTED}@h')"),
        ("redis://:pass@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        ("clone https://user:token@git.example.com/repo.git", f"clone https://user:{REDACTED}@git.example.com/repo.git"),
        ("postgres://u:p@ss@host:5432/db", f"postgres://u:{REDACTED}@host:5432/db"),  # raw @ in it
        ('{"dsn": "postgresql://u:pw@h1,h2/db"}', f'{{"dsn": "postgresql://u:{REDACTED}@h1,h2/db"}}'),
        (f"already postgres://u:{REDACTED}@h", f"already postgres://u:{REDACTED}@h"),
    ],
)  # fmt: skip
def test_the_password_of_a_url_is_redacted_and_the_rest_stays_readable(
    said: str, shown: str
) -> None:
    assert redact_text(said, {}) == shown


@pytest.mark.parametrize(
    "plain",
    [
        "https://example.com/path?q=a@b.com",
        "http://localhost:8888/lab",
        "ssh://git@github.com:22/org/repo.git",
        "http://[::1]:8080/x",
        "user:pass@host without a scheme",
        "see https://docs.example.com/a:b@c for the syntax",  # a colon and @ after the path
    ],
)
def test_urls_without_credentials_are_kept(plain: str) -> None:
    assert redact_text(plain, {}) == plain


def test_url_scanning_stays_linear_on_long_text() -> None:
    text = "a" * 500_000 + "://" + "b" * 500_000 + ":" + "c" * 500_000
    started = time.perf_counter()
    assert redact_text(text, {}) == text
    assert time.perf_counter() - started < 5  # quadratic backtracking would take minutes


def test_passwords_inside_connection_variables_are_secrets() -> None:
    env = {
        "DATABASE_URL": DATABASE_URL,
        "REPORTS_DSN": "host=db user=rep password='Rep0rts-Secret-1' dbname=r",
        "WAREHOUSE_URI": "snowflake://svc:Wh%40use-Pass-22@acct/db",
        "ODBC_CONNECTION_STRING": "Driver={x};Server=s;UID=u;PWD=Odbc-Pass-333;",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8123",  # no credentials: not a secret
        "CACHE_URL": "redis://:short@cache",  # shorter than the minimum: only redacted in URLs
    }
    said = redact_text(
        f"pw={DB_PASSWORD} rep=Rep0rts-Secret-1 wh=Wh@use-Pass-22 odbc=Odbc-Pass-333 "
        "base=http://127.0.0.1:8123 short", env
    )  # fmt: skip
    assert said == (
        f"pw={REDACTED} rep={REDACTED} wh={REDACTED} odbc={REDACTED} "
        "base=http://127.0.0.1:8123 short"
    )
    assert (
        redact_text(env["DATABASE_URL"], env)
        == f"postgres://analyst:{REDACTED}@db.internal:5432/sales"
    )
    assert redact_text(env["WAREHOUSE_URI"], env) == f"snowflake://svc:{REDACTED}@acct/db"
    assert connection_passwords("mysql://u:a%2Fb@h") == {"a%2Fb", "a/b"}


# -- the file-descriptor relay ----------------------------------------------------------------------


def fd_target(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def test_what_subprocesses_write_to_the_file_descriptors_is_redacted(
    capfdbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)
    monkeypatch.setenv("DATABASE_URL", DATABASE_URL)
    before = (fd_target(1), fd_target(2))
    with redacted_fds((1, 2)):
        os.system('echo "out $QLOOP_CANARY_TOKEN"; echo "err $DATABASE_URL" >&2')
        subprocess.run(["printf", "%s", f"no newline {TOKEN}"], check=True)
        os.write(1, b"\nbytes \xff\xfe kept\n")
    assert (fd_target(1), fd_target(2)) == before
    out, err = capfdbinary.readouterr()
    assert out == f"out {REDACTED}\nno newline {REDACTED}\nbytes ".encode() + b"\xff\xfe kept\n"
    assert err == f"err postgres://analyst:{REDACTED}@db.internal:5432/sales\n".encode()


@pytest.mark.parametrize("stop", [ValueError("failed"), KeyboardInterrupt()])
def test_the_file_descriptors_are_restored_when_the_block_fails(
    stop: BaseException, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)
    before = (fd_target(1), fd_target(2))
    with pytest.raises(type(stop)), redacted_fds((1, 2)):
        os.system("echo $QLOOP_CANARY_TOKEN")
        raise stop
    assert (fd_target(1), fd_target(2)) == before
    assert capfd.readouterr().out == f"{REDACTED}\n"


def test_a_background_process_is_still_redacted_after_the_block(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)
    with redacted_fds((1,)):
        child = subprocess.Popen("sleep 0.8; echo late $QLOOP_CANARY_TOKEN", shell=True)
    child.wait(10)
    deadline = time.monotonic() + 5
    out = ""
    while "late" not in out and time.monotonic() < deadline:
        time.sleep(0.05)
        out += capfd.readouterr().out
    assert out == f"late {REDACTED}\n"


# -- private variables -----------------------------------------------------------------------------


def test_private_values_are_their_cheap_text_forms() -> None:
    private = PrivateVariables({"pw", "n", "blob", "creds", "missing"})
    namespace = {"pw": "Hunter2-private", "n": 98765432, "blob": b"raw\nbytes", "other": "x" * 20,
                 "creds": {"user": "me", "password": "Dict-Held-Pass"}, "flag": True}  # fmt: skip
    assert set(private.values(namespace)) == {
        "Hunter2-private", "98765432", "raw\nbytes", "raw\\nbytes", "Dict-Held-Pass",
    }  # fmt: skip  # "me" is shorter than the minimum
    assert private.covers("pw") and private.covers(" pw.upper ") and not private.covers("other")
    said = private.redactor(namespace).text("Hunter2-private 98765432 Dict-Held-Pass xxxx")
    assert said == f"{REDACTED} {REDACTED} {REDACTED} xxxx"


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


def test_tools_refuse_private_variables_and_redact_their_values(shell: InteractiveShell) -> None:
    shell.user_ns.update(held_pw="Hunter2-private-77", alias="Hunter2-private-77", n=98765432)
    private = PrivateVariables({"held_pw", "n"})
    runtime = ToolRuntime.of(builtin_tools(shell, private=private), AutoApprover())
    calls = [("list_variables", {}), ("inspect_variable", {"name": "held_pw"}),
             ("inspect_variable", {"name": "held_pw.upper"}), ("inspect_variable", {"name": "alias"}),
             ("run_code", {"code": "print(held_pw, n)\nheld_pw"}), ("notebook_history", {})]  # fmt: skip
    listed, refused, attribute, alias, ran, history = [
        runtime.run(ToolCall(f"t{i}", name, args)) for i, (name, args) in enumerate(calls)
    ]
    assert "private (the user keeps these from the agent): held_pw, n" in listed.text
    assert "alias" in listed.text and not listed.is_error
    for outcome in (refused, attribute):
        assert outcome.is_error and "'held_pw' is private" in outcome.text
        assert "%agent private" in outcome.text
    assert not alias.is_error and REDACTED in alias.text
    assert f"{REDACTED} {REDACTED}" in ran.text and not ran.is_error
    for outcome in (listed, refused, attribute, alias, ran, history):
        assert "Hunter2-private-77" not in outcome.text and "98765432" not in outcome.text
        assert leaked("Hunter2-private-77", outcome.text) == []


def test_the_prompt_is_redacted_before_it_is_sent_and_saved(secrets_env: None) -> None:
    model = ScriptedModel([respond(text("ok"))])
    saved: list[CellRecord] = []
    manager = ConversationManager()
    store = type("Store", (), {"save": lambda _, r: saved.append(r)})()
    prompt = f"Use the token {TOKEN} and the key {KEY} to fetch the data."
    runtime = ToolRuntime.of([], AutoApprover())
    manager.run_turn(
        prompt,
        model=model,
        runtime=runtime,
        settings=Settings(model="m"),
        cell_id="c",
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


# -- subprocesses, fds and the kernel's own stdout/stderr -----------------------------------------


class KernelLogs:
    """The kernel process's own stdout and stderr (a server's terminal, a CI log), as files."""

    def __init__(self, directory: Path) -> None:
        self.out = directory / "kernel.stdout"
        self.err = directory / "kernel.stderr"

    def text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in (self.out, self.err) if p.exists())

    def wait_for(self, piece: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while piece not in self.text() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.text()


@pytest.fixture
def kernel_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelLogs:
    """Kernels started by LabKernel in this test write their own stdout/stderr to files."""
    logs = KernelLogs(tmp_path)

    class LoggedKernelManager(KernelManager):
        def start_kernel(self, **kw: Any) -> None:
            with logs.out.open("ab") as out, logs.err.open("ab") as err:
                super().start_kernel(stdout=out, stderr=err, **kw)

    monkeypatch.setattr(tests.kernel_client, "KernelManager", LoggedKernelManager)
    return logs


FD_CODES = [
    "import subprocess\nsubprocess.run('echo sub: $QLOOP_CANARY_TOKEN $DATABASE_URL', shell=True)",
    "!echo bang: $QLOOP_CANARY_TOKEN",
    "import os\nos.system('echo sys: $QLOOP_CANARY_TOKEN >&2')",
    "import os, sys\nsys.__stdout__.write('raw: ' + os.environ['QLOOP_CANARY_TOKEN'] + '\\n')\n"
    "sys.__stdout__.flush()",
]
FD_TARGETS = "import os\nprint([os.readlink(f'/proc/self/fd/{fd}') for fd in (1, 2)])"


def everything_published(lab: LabKernel) -> str:
    return json.dumps([m["content"] for channel, m in lab.history() if channel == "iopub"])


def assert_nothing_secret(where: str, text: str) -> None:
    assert_no_canary(where, text)
    assert DB_PASSWORD not in text, f"the database password leaked into {where}"


@pytest.mark.kernel
@pytest.mark.parametrize("watched", [True, False], ids=["fd-watched", "fd-unwatched"])
def test_subprocess_output_of_agent_code_is_redacted_in_every_stream(
    watched: bool, kernel_logs: KernelLogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    if watched:  # ipykernel copies fd output into the cell (and echoes it) only outside pytest
        monkeypatch.delenv("PYTEST_CURRENT_TEST")
    script = [Reply([tool_use("run_code", {"code": c})]) for c in FD_CODES]
    env = {"QLOOP_CANARY_TOKEN": TOKEN, "DATABASE_URL": DATABASE_URL}
    with (
        StandInAPI([*script, Reply([text("Echoed.")])], api_key=KEY) as api,
        LabKernel({**api.environment(api_key=KEY), **env}) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        before = lab.run(FD_TARGETS)
        cell = lab.execute("%%agent --approve auto\nEcho the token.", cell_id="echo")
        assert lab.complete(cell, 90)["content"]["status"] == "ok"
        if watched:
            lab.wait_for(lambda: "sys: " in lab.stderr(cell), 10, "fd output in the cell")
        assert lab.run(FD_TARGETS) == before  # the relay is gone after the cell
        record, published = saved_record(lab, cell), everything_published(lab)
        bodies = json.dumps([r.body for r in api.requests])
    own = kernel_logs.wait_for("raw: ")
    shown = f"sub: {REDACTED} postgres://analyst:{REDACTED}@db.internal:5432/sales"
    assert shown in (published if watched else own)
    assert f"bang: {REDACTED}" in published and f"raw: {REDACTED}" in own
    assert f"sys: {REDACTED}" in (published if watched else own)
    if watched:  # ipykernel also echoes fd output to the kernel's own terminal
        assert shown in own and f"sys: {REDACTED}" in own
    for where, value in [("IOPub", published), ("the record", json.dumps(record)),
                         ("the requests", bodies), ("the kernel's stdout/stderr", own)]:  # fmt: skip
        assert_nothing_secret(where, value)


PRIVATE_SCRIPT = [
    Reply([tool_use("list_variables", {})]),
    Reply(
        [
            tool_use("inspect_variable", {"name": "held_pw"}),
            tool_use("inspect_variable", {"name": "creds.keys"}),
            tool_use("inspect_variable", {"name": "alias"}),
        ]
    ),  # fmt: skip
    Reply([tool_use("run_code", {"code": "print(held_pw, creds['password'])\nheld_pw"})]),
    Reply([text("I left the private values alone.")]),
]


@pytest.mark.kernel
def test_private_variables_are_refused_and_redacted_through_a_kernel(
    kernel_logs: KernelLogs,
) -> None:
    pw, nested = "Hunter2-private-77", "Nested-Pass-4242"
    with (
        StandInAPI(PRIVATE_SCRIPT, api_key=KEY) as api,
        LabKernel(api.environment(api_key=KEY)) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        lab.run(
            f"held_pw = {pw!r}\nalias = held_pw\ncreds = {{'user': 'me', 'password': {nested!r}}}"
        )
        listed = lab.run("%agent private held_pw creds")
        assert listed == "private variables (tools do not inspect or print them): creds, held_pw\n"
        cell = lab.execute("%%agent --approve auto\nLook at my variables.", cell_id="p")
        assert lab.complete(cell, 90)["content"]["status"] == "ok"
        record, requests = saved_record(lab, cell), api.requests
        published = json.dumps([m["content"] for m in lab.messages(cell)])  # the agent cell's IOPub
        assert lab.run("%agent private --clear held_pw").endswith(": creds\n")
        assert lab.run("%agent private --clear").endswith(": none\n")
    [listing] = tool_results(requests[1])
    assert "private (the user keeps these from the agent): creds, held_pw" in result_text(listing)
    refused_pw, refused_creds, alias = tool_results(requests[2])
    assert refused_pw["is_error"] and "'held_pw' is private" in result_text(refused_pw)
    assert refused_creds["is_error"] and "'creds' is private" in result_text(refused_creds)
    assert not alias.get("is_error") and REDACTED in result_text(alias)  # same value, other name
    [ran] = tool_results(requests[3])
    assert f"{REDACTED} {REDACTED}" in result_text(ran)
    sent = json.dumps([r.body for r in requests])
    for where, value in [("the requests", sent), ("IOPub", published),
                         ("the record", json.dumps(record)), ("the kernel's output", kernel_logs.text())]:  # fmt: skip
        assert pw not in value and nested not in value, where


@pytest.mark.kernel
def test_qloop_run_prints_and_saves_nothing_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # the kernel watches its fds, as outside pytest
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel"),
        nbformat.v4.new_code_cell(f"%%agent\nConnect with {DATABASE_URL} and token {TOKEN}."),
    ]
    source = tmp_path / "in.ipynb"
    nbformat.write(nb, source)
    code = "import os\nos.system('echo $QLOOP_CANARY_TOKEN $DATABASE_URL; echo $ANTHROPIC_API_KEY >&2')"
    script = [Reply([tool_use("run_code", {"code": code})]), Reply([text("Connected.")])]
    with StandInAPI(script, api_key=KEY) as api:
        for name, value in {**api.environment(api_key=KEY), "QLOOP_CANARY_TOKEN": TOKEN,
                            "DATABASE_URL": DATABASE_URL, "QLOOP_APPROVAL": "auto"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        status = cli.main(
            ["run", str(source), "-o", str(tmp_path / "out.ipynb"), "--approve", "auto"]
        )
        bodies = json.dumps([r.body for r in api.requests])
    printed = capfd.readouterr()  # qloop's own lines and the kernel's stdout/stderr (inherited)
    assert status == 0 and len(api.requests) == 2
    assert (
        f"[2/2] ok      %%agent Connect with postgres://analyst:{REDACTED}@db.intern  → agent"
        in printed.err
    )
    saved = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert f"{REDACTED} postgres://analyst:{REDACTED}@" in json.dumps(saved.cells[1].outputs)
    for where, value in [("qloop's output", printed.out + printed.err), ("the requests", bodies),
                         ("the saved notebook", saved_text(saved))]:  # fmt: skip
        assert_nothing_secret(where, value)


def test_qloop_show_prints_nothing_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QLOOP_CANARY_TOKEN", TOKEN)
    # A record written where the token was no secret: its prompt carries the value and a password.
    record = CellRecord(
        session_id="s", prompt=f"use {TOKEN} with postgres://u:{DB_PASSWORD}@h/db", model="m",
        status="completed", timings=Timings(started_at="2025-01-01T00:00:00Z"),
    ).sealed()  # fmt: skip
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%%agent\nanything")
    cell.metadata["qloop"] = record.model_dump(mode="json")
    nb.cells = [cell]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["show", str(path)]) == 0
    printed = capsys.readouterr().out
    assert f"use {REDACTED} with postgres://u:{REDACTED}@h" in printed
    assert_nothing_secret("qloop show", printed)
