"""Saved agent cells under the clients people use, run as the commands a user types.

papermill (``--engine qloop``) and ``jupyter nbconvert --execute`` with the replay preprocessor replay
with zero model requests under ``qloop run``'s trust rules; plain ``jupyter execute``, papermill and
nbconvert (no cell metadata) fail the agent cell with one line naming those commands and ask no
model unless the user opted in; a run that could not see the saved record says so, and the saved
record is never replaced by it. Records keep their earlier versions.
"""

from __future__ import annotations

import copy
import html
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient, keep_record, mirrored_record
from qloop_kernel.records import load_record
from qloop_kernel.records.history import AnnotatedStore, merged, restored
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

pytestmark = pytest.mark.kernel
BIN = Path(sys.executable).parent
REPLAYING = "papermill --engine qloop IN OUT"
PREPROCESSOR = "--Exporter.default_preprocessors=qloop_kernel.headless.ReplayPreprocessor"


def notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nx = 10"),
        nbformat.v4.new_code_cell("%%agent\nDouble x into y."),
        nbformat.v4.new_code_cell("print(y + 1)"),
    ]
    return nb


def script() -> list[Reply]:
    return [
        Reply([tool_use("run_code", {"code": "y = x * 2\nprint('y is', y)"})]),
        Reply([text("y is now **20**.")]),
    ]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A notebook run once by ``qloop run``'s client against the stand-in, saved with its record."""
    nb = notebook()
    with StandInAPI(script()) as api:
        env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": "auto"}
        old = os.environ.copy()
        os.environ.update(env)
        try:
            AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        finally:
            os.environ.clear()
            os.environ.update(old)
        assert len(api.requests) == 2
    path = tmp_path_factory.mktemp("clients") / "saved.ipynb"
    nbformat.write(nb, path)
    return path


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )


def client_env(api: StandInAPI, **extra: str) -> dict[str, str]:
    env = api.environment()
    env.update(QLOOP_APPROVAL="auto", **extra)
    for name in ("QLOOP_REPLAY_RECEIVED", "QLOOP_ASK_WITHOUT_RECORD"):
        if name not in extra:
            env.pop(name, None)
    return env


def replaying_commands(saved: Path, out: Path) -> dict[str, list[str]]:
    return {
        "papermill": [str(BIN / "papermill"), "--engine", "qloop", str(saved), str(out)],
        "nbconvert": [
            str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute", PREPROCESSOR,
            str(saved), "--output", str(out),
        ],
    }  # fmt: skip


@pytest.mark.parametrize("client", ["papermill", "nbconvert"])
def test_papermill_and_nbconvert_replay_with_zero_requests(
    saved: Path, tmp_path: Path, client: str
) -> None:
    out = tmp_path / "out.ipynb"
    with StandInAPI() as api:  # an empty script: any request would fail the turn
        done = run(replaying_commands(saved, out)[client], client_env(api), tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert api.requests == []
    before = nbformat.read(saved, as_version=4)
    after = nbformat.read(out, as_version=4)
    assert after.cells[2].outputs[0]["text"] == "21\n"  # the replayed step set y
    assert "replay complete" in str(after.cells[1].outputs)
    assert after.cells[1].metadata["qloop"] == before.cells[1].metadata["qloop"]


@pytest.mark.parametrize("client", ["jupyter execute", "papermill", "nbconvert"])
def test_clients_without_metadata_fail_in_one_line_and_ask_no_model(
    saved: Path, tmp_path: Path, client: str
) -> None:
    out = tmp_path / "out.ipynb"
    commands = {
        "jupyter execute": [str(BIN / "jupyter"), "execute", str(saved), f"--output={out}"],
        "papermill": [str(BIN / "papermill"), str(saved), str(out)],
        "nbconvert": [str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
                      str(saved), "--output", str(out)],
    }  # fmt: skip
    with StandInAPI(script()) as api:  # a key and a model that would answer
        done = run(commands[client], client_env(api), tmp_path)
        assert api.requests == []
    assert done.returncode != 0
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("AgentError")]
    assert REPLAYING in line and PREPROCESSOR in line and "qloop run" in line
    assert "QLOOP_ASK_WITHOUT_RECORD=1" in line
    if client == "papermill":  # papermill's message carries the line, not a blank traceback
        assert 'Exception encountered at "In [2]":\nAgentError: this client' in done.stderr


def test_nbclient_cell_execution_error_carries_the_message(saved: Path) -> None:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(saved, as_version=4)
    with pytest.raises(CellExecutionError) as failed:
        NotebookClient(nb, timeout=120).execute()
    assert REPLAYING in str(failed.value) and failed.value.ename == "AgentError"


def test_received_records_replay_only_with_the_opt_in(saved: Path, tmp_path: Path) -> None:
    other_user = {"QLOOP_SIGNING_KEY_FILE": str(tmp_path / "someone-else")}
    out = tmp_path / "out.ipynb"
    with StandInAPI() as api:
        commands = replaying_commands(saved, out)
        refused = run(commands["papermill"], client_env(api, **other_user), tmp_path)
        assert refused.returncode != 0 and "replay not run" in refused.stderr
        assert "received from elsewhere" in refused.stderr
        opted = client_env(api, QLOOP_REPLAY_RECEIVED="1", **other_user)
        assert run(commands["papermill"], opted, tmp_path).returncode == 0
        nbconvert = [*commands["nbconvert"], "--ReplayPreprocessor.replay_received=True"]
        done = run(nbconvert, client_env(api, **other_user), tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert api.requests == []
    assert nbformat.read(out, as_version=4).cells[2].outputs[0]["text"] == "21\n"


def test_an_opted_in_run_without_metadata_never_replaces_the_saved_record(
    saved: Path, tmp_path: Path
) -> None:
    source = tmp_path / "in.ipynb"  # jupyter execute writes its output next to its input
    source.write_bytes(saved.read_bytes())
    out = tmp_path / "out.ipynb"
    denied = [
        Reply([tool_use("run_code", {"code": "y = -1"})]),
        Reply([text("I could not run code.")]),
    ]
    command = [str(BIN / "jupyter"), "execute", "--allow-errors", str(source), "--output=out"]
    with StandInAPI(denied) as api:
        env = client_env(api, QLOOP_ASK_WITHOUT_RECORD="1")
        env.pop("QLOOP_APPROVAL")  # headless default: readonly, the code step is denied
        done = run(command, env, tmp_path)
        assert len(api.requests) == 2, done.stderr[-2000:]
    result = nbformat.read(out, as_version=4)
    mirror = mirrored_record(result.cells[1])
    assert mirror is not None and mirror["metadata_unseen"] is True
    newer = load_record(mirror)
    assert newer.status == "completed" and not newer.replayable  # its only code step was denied
    approved = nbformat.read(saved, as_version=4).cells[1].metadata["qloop"]
    assert result.cells[1].metadata["qloop"] == approved  # jupyter execute keeps metadata as is
    kept = merged(approved, mirror)
    assert kept is not None and kept["digest"] == approved["digest"]
    assert kept["history"][0]["digest"] == mirror["digest"]  # nothing lost: the newer one is kept
    keep_record(result.cells[1])  # what qloop run, papermill and nbconvert do after each cell
    assert result.cells[1].metadata["qloop"]["digest"] == approved["digest"]
    restored_one = restored(kept, 0)
    assert restored_one["digest"] == mirror["digest"]
    assert restored_one["history"][0]["digest"] == approved["digest"]
    assert load_record(restored_one).digest == mirror["digest"]  # history is not digested


class ListStore:
    def __init__(self) -> None:
        self.saved: list[object] = []

    def save(self, record: object) -> None:
        self.saved.append(record)

    def keep(self, record: object) -> None:
        self.saved.append(record)


def test_a_new_turn_keeps_the_cells_earlier_record_first_in_its_history(saved: Path) -> None:
    approved = nbformat.read(saved, as_version=4).cells[1].metadata["qloop"]
    store = ListStore()
    older = copy.deepcopy(approved)
    annotated = AnnotatedStore(store, previous={**older, "history": [{"digest": "sha256:old"}]})
    annotated.save(load_record(approved).model_copy(update={"prompt": "Triple x."}))
    [newer] = store.saved
    history = newer.history  # type: ignore[attr-defined]
    assert [e["digest"] for e in history] == [approved["digest"], "sha256:old"]
    assert "history" not in history[0]  # entries stay flat


def test_a_turn_whose_code_steps_were_all_denied_is_not_replayable(saved: Path) -> None:
    record = load_record(nbformat.read(saved, as_version=4).cells[1].metadata["qloop"])
    assert record.replayable
    call = record.tool_calls[0]
    denied = call.model_copy(
        update={"decision": call.decision.model_copy(update={"kind": "denied"})}
    )
    assert not record.model_copy(update={"tool_calls": [denied]}).replayable
    assert record.model_copy(update={"tool_calls": []}).replayable  # an answer with no code


@pytest.mark.parametrize(
    "options", ["", " --provider anthropic --with x"], ids=["plain", "valued-options"]
)
def test_run_all_after_a_restart_asks_once_for_every_saved_agent_cell(options: str) -> None:
    # Every valued option is read with its value (options.py), so the queued cell's prompt matches
    from tests.agent_outputs import saved_record
    from tests.kernel_client import LabKernel

    script = [
        Reply([tool_use("run_code", {"code": "y = x * 2"})]),
        Reply([text("y is 20")]),
        Reply([tool_use("run_code", {"code": "z = y + 1"})]),
        Reply([text("z is 21")]),
    ]
    cells = [("c1", "%%agent\nDouble x into y."), ("c2", f"%%agent{options}\nAdd one to y into z.")]
    with StandInAPI(script) as api:
        with LabKernel({**api.environment(), "QLOOP_APPROVAL": "auto"}) as lab:
            lab.run("%load_ext qloop_kernel\nx = 10")
            records = {}
            for cell_id, code in cells:
                ran = lab.execute(code, cell_id=cell_id)
                assert lab.complete(ran, 60)["content"]["status"] == "ok"
                records[cell_id] = saved_record(lab, ran)
        api.reset()
        env = {k: v for k, v in api.environment().items() if k != "QLOOP_APPROVAL"}
        with LabKernel(env) as lab:  # a new kernel, policy "ask": Run All of the notebook
            setup = lab.execute("%load_ext qloop_kernel\nx = 10", cell_id="setup")
            sent = [
                lab.execute(code, cell_id=c, metadata={"qloop": records[c]}) for c, code in cells
            ]
            after = lab.execute("print(z)", cell_id="after")
            approve = lab.wait_for_button("Approve", parent=sent[0], timeout=30)
            lab.round_trip(approve)
            card = " ".join(
                str(s) for s in lab.widget_states(parent=sent[0], model_name="HTMLModel")
            )
            card = html.unescape(re.sub(r"<[^>]+>", "", card))
            assert "of 2 agent cells" in card and "y = x * 2" in card and "z = y + 1" in card
            lab.click(approve)
            for msg_id in [setup, *sent, after]:
                assert lab.complete(msg_id, 60)["content"]["status"] == "ok"
            assert lab.stdout(after) == "21\n"
            buttons = [w for w in lab.widget_states(model_name="ButtonModel")
                       if w.get("description") == "Approve"]  # fmt: skip
            assert len(buttons) == 1  # one card for the whole Run All
            assert api.requests == []
