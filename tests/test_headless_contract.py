"""The headless contract: the approval policy holds for every record, yours or received; a saved step
that did not run fails the run; the runner says what happens as it happens.

A notebook with one saved 'write' step (``y = x * 2``) runs through ``qloop run`` (in process, as the
command line calls it), papermill's ``qloop`` engine and nbconvert's ReplayPreprocessor under each
policy, as the user's own record and as a received one (another signing key, or the step edited by
hand and re-digested).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from qloop_kernel.headless import cli
from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook.replay import CONTINUE_ON_DENIED, RECEIVED_OPT_IN
from qloop_kernel.records import load_record
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

pytestmark = pytest.mark.kernel
BIN = Path(sys.executable).parent
PREPROCESSOR = "--Exporter.default_preprocessors=qloop_kernel.headless.ReplayPreprocessor"
POLICIES = ("auto", "write", "readonly", "ask", "deny")
RUNS = {"auto", "write"}  # the policies that run a 'write' step headless


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


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The notebook run once under ``auto``: its record is signed by this user's key."""
    nb = notebook()
    script = [
        Reply([tool_use("run_code", {"code": "y = x * 2\nprint('y is', y)"})]),
        Reply([text("y is now 20.")]),
    ]
    with StandInAPI(script) as api, pytest.MonkeyPatch.context() as patch:
        for name, value in {**api.environment(), "QLOOP_APPROVAL": "auto"}.items():
            patch.setenv(name, value)
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        assert len(api.requests) == 2
    path = tmp_path_factory.mktemp("contract") / "saved.ipynb"
    nbformat.write(nb, path)
    return path


def edited(saved: Path, folder: Path) -> Path:
    """The saved notebook with its step edited by hand and the digest recomputed (the digest is
    no secret; the signature is)."""
    nb = nbformat.read(saved, as_version=4)
    data = nb.cells[1].metadata["qloop"]
    data["tool_calls"][0]["input"]["code"] = "y = x * 3\nprint('y is', y)"
    data["digest"] = _redigest(data)
    path = folder / "edited.ipynb"
    nbformat.write(nb, path)
    return path


def _redigest(data: dict) -> str:
    from qloop_kernel.records import CellRecord

    record = CellRecord.model_validate(data)
    return record.computed_digest()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    """Set the environment the kernel inherits; every name is restored after the test (the
    command line sets some of them itself)."""

    def setup(api: StandInAPI, *, received: bool, folder: Path) -> None:
        for name in ("QLOOP_APPROVAL", RECEIVED_OPT_IN, CONTINUE_ON_DENIED):
            monkeypatch.delenv(name, raising=False)
        for name, value in api.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
        if received:  # another user's key: the saved record is not signed by "you"
            monkeypatch.setenv("QLOOP_SIGNING_KEY_FILE", str(folder / "someone-else"))

    return setup


def qloop_run(
    source: Path, out: Path, *args: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    status = cli.main(["run", str(source), "-o", str(out), *args])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("provenance", ["yours", "received"])
@pytest.mark.parametrize("policy", POLICIES)
def test_qloop_run_applies_the_policy_to_every_record(
    saved: Path, tmp_path: Path, env, capsys, policy: str, provenance: str
) -> None:
    out = tmp_path / "out.ipynb"
    received = provenance == "received"
    opt_in = ["--replay-received"] if received else []
    with StandInAPI() as api:
        env(api, received=received, folder=tmp_path)
        status, err = qloop_run(saved, out, "--approve", policy, *opt_in, capsys=capsys)
        assert api.requests == []  # a replay never asks the model
    if policy in RUNS:
        assert status == 0, err
        assert nbformat.read(out, as_version=4).cells[2].outputs[0]["text"] == "21\n"
        return
    assert status == 1, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("qloop run: cell 2 failed")]
    assert "AgentError: replay not run: saved step 1 of 1 (`y = x * 2 print('y is', y)`)" in line
    assert f"denied by the approval policy '{policy}'" in line and "'write'" in line
    assert "--continue-on-denied" in line
    assert "[3/3]" not in err  # the run stopped at the agent cell


def test_a_received_record_without_the_opt_in_is_refused_even_under_auto(
    saved: Path, tmp_path: Path, env, capsys
) -> None:
    with StandInAPI() as api:
        env(api, received=True, folder=tmp_path)
        status, err = qloop_run(saved, tmp_path / "out.ipynb", "--approve", "auto", capsys=capsys)
    assert status == 1
    assert "received from elsewhere" in err and "--replay-received" in err


@pytest.mark.parametrize(("policy", "replay_received"), [("auto", False), ("readonly", True)])
def test_a_step_edited_by_hand_and_redigested_is_received(
    saved: Path, tmp_path: Path, env, capsys, policy: str, replay_received: bool
) -> None:
    source = edited(saved, tmp_path)
    assert not load_record(nbformat.read(source, as_version=4).cells[1].metadata["qloop"]).is_own()
    with StandInAPI() as api:
        env(api, received=False, folder=tmp_path)  # your own key: the edit took its signature
        flags = ["--replay-received"] if replay_received else []
        status, err = qloop_run(
            source, tmp_path / "out.ipynb", "--approve", policy, *flags, capsys=capsys
        )
    assert status == 1
    if replay_received:  # the opt-in lifts only the "received" block: readonly still denies
        assert "denied by the approval policy 'readonly'" in err
    else:
        assert "received from elsewhere" in err


def test_continue_on_denied_goes_on_deliberately(saved: Path, tmp_path: Path, env, capsys) -> None:
    out = tmp_path / "out.ipynb"
    with StandInAPI() as api:
        env(api, received=False, folder=tmp_path)
        status, err = qloop_run(saved, out, "--continue-on-denied", capsys=capsys)
    assert status == 1  # the next cell fails: y was never made
    assert "cell 3 failed: NameError: name 'y' is not defined" in err
    assert "replay not run: denied by the approval policy 'readonly'" in str(
        nbformat.read(out, as_version=4).cells[1].outputs
    )


def test_a_failed_replay_step_names_the_error_not_a_source_line(
    saved: Path, tmp_path: Path, env, capsys
) -> None:
    nb = nbformat.read(saved, as_version=4)
    nb.cells[0].source = (
        "%load_ext qloop_kernel\nimport matplotlib.pyplot as plt\n"
        "class X:\n    def __mul__(self, other):\n"
        "        raise KeyError(f'Column not found: {other}')\nx = X()"
    )
    source = tmp_path / "fails.ipynb"
    nbformat.write(nb, source)
    with StandInAPI() as api:
        env(api, received=False, folder=tmp_path)
        status, err = qloop_run(source, tmp_path / "out.ipynb", "--approve", "auto", capsys=capsys)
    assert status == 1
    [line] = [ln for ln in err.splitlines() if ln.startswith("qloop run: cell 2 failed")]
    assert "replay stopped at step 1 of 1: KeyError: 'Column not found: 2'" in line, line
    assert "raise KeyError" not in line


def test_a_bad_agent_option_names_the_option(tmp_path: Path, env, capsys) -> None:
    nb = notebook()
    nb.cells[1].source = "%%agent --max-turns many\nDouble x into y."
    source = tmp_path / "bad.ipynb"
    nbformat.write(nb, source)
    with StandInAPI() as api:
        env(api, received=False, folder=tmp_path)
        status, err = qloop_run(source, tmp_path / "out.ipynb", capsys=capsys)
    assert status == 1
    [line] = [ln for ln in err.splitlines() if ln.startswith("qloop run: cell")]
    assert line.startswith("qloop run: cell 2 failed: ") and "many" in line, line
    assert "-----" not in line


def test_progress_says_each_step_as_it_happens_and_quiet_says_nothing(
    tmp_path: Path, env, capsys
) -> None:
    nb = notebook()
    source = tmp_path / "live.ipynb"
    nbformat.write(nb, source)
    script = [
        Reply([tool_use("run_code", {"code": "y = x * 2"})]),
        Reply([text("Done.")]),
    ]
    with StandInAPI(script) as api:
        env(api, received=False, folder=tmp_path)
        status, err = qloop_run(source, tmp_path / "out.ipynb", "--approve", "auto", capsys=capsys)
    assert status == 0, err
    lines = err.splitlines()
    steps = [ln for ln in lines if ln.startswith("[2/3]   ")]
    assert any("→ run_code(" in ln for ln in steps), err
    assert any("✔ run_code" in ln for ln in steps), err
    assert any("model call" in ln for ln in steps), err
    cell_line = next(i for i, ln in enumerate(lines) if ln.startswith("[2/3] ok"))
    assert lines.index(steps[0]) < cell_line  # before the cell's own line, as they happen
    with StandInAPI([Reply([text("Nothing.")])]) as api:
        env(api, received=False, folder=tmp_path)
        nb.cells[1].source = "%%agent\nSay nothing."
        nbformat.write(nb, source)
        status, err = qloop_run(source, tmp_path / "quiet.ipynb", "--quiet", capsys=capsys)
    assert status == 1 and err.splitlines() == [
        "qloop run: cell 3 failed: NameError: name 'y' is not defined"
    ]


def test_a_live_turn_with_denied_steps_says_so(tmp_path: Path, env, capsys) -> None:
    nb = notebook()
    source = tmp_path / "live.ipynb"
    nbformat.write(nb, source)
    script = [Reply([tool_use("run_code", {"code": "y = x * 2"})]), Reply([text("Could not.")])]
    with StandInAPI(script) as api:
        env(api, received=False, folder=tmp_path)
        status, err = qloop_run(source, tmp_path / "out.ipynb", capsys=capsys)
    assert status == 1  # the next cell needs y
    [line] = [ln for ln in err.splitlines() if ln.startswith("[2/3] ok")]
    assert "1 step denied (by the approval policy 'readonly')" in line
    assert "✘ run_code: not run, denied by the approval policy 'readonly'" in err


def run_client(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )


def client_env(api: StandInAPI, policy: str, folder: Path, *, received: bool) -> dict[str, str]:
    env = {**os.environ, **api.environment(), "QLOOP_APPROVAL": policy}
    for name in (RECEIVED_OPT_IN, CONTINUE_ON_DENIED, "QLOOP_ASK_WITHOUT_RECORD"):
        env.pop(name, None)
    if received:
        env["QLOOP_SIGNING_KEY_FILE"] = str(folder / "someone-else")
        env[RECEIVED_OPT_IN] = "1"
    return env


@pytest.mark.parametrize("client", ["papermill", "nbconvert"])
@pytest.mark.parametrize(
    ("policy", "received"), [("readonly", False), ("deny", True), ("write", True)]
)
def test_papermill_and_nbconvert_take_the_same_path(
    saved: Path, tmp_path: Path, client: str, policy: str, received: bool
) -> None:
    out = tmp_path / "out.ipynb"
    commands = {
        "papermill": [str(BIN / "papermill"), "--engine", "qloop", str(saved), str(out)],
        "nbconvert": [str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
                      PREPROCESSOR, str(saved), "--output", str(out)],
    }  # fmt: skip
    with StandInAPI() as api:
        done = run_client(
            commands[client], client_env(api, policy, tmp_path, received=received), tmp_path
        )
        assert api.requests == []
    if policy == "write":
        assert done.returncode == 0, done.stderr[-2000:]
        assert nbformat.read(out, as_version=4).cells[2].outputs[0]["text"] == "21\n"
        return
    assert done.returncode != 0
    assert "AgentError: replay not run: saved step 1 of 1" in done.stderr
    assert f"denied by the approval policy '{policy}'" in done.stderr


@pytest.mark.parametrize("policy", ["auto", "readonly"])
def test_interactively_a_received_record_gets_the_card_unless_the_policy_denies_its_class(
    saved: Path, tmp_path: Path, policy: str
) -> None:
    from tests.kernel_client import LabKernel

    record = nbformat.read(saved, as_version=4).cells[1].metadata["qloop"]
    with StandInAPI() as api:
        env = {**api.environment(), "QLOOP_APPROVAL": policy,
               "QLOOP_SIGNING_KEY_FILE": str(tmp_path / "someone-else")}  # fmt: skip
        with LabKernel(env) as lab:
            lab.run("%load_ext qloop_kernel\nx = 10")
            sent = lab.execute(
                "%%agent\nDouble x into y.", cell_id="c1", metadata={"qloop": record}
            )
            if policy == "auto":  # never run by the policy alone: the card, with its notice
                approve = lab.wait_for_button("Approve", parent=sent, timeout=60)
                lab.round_trip(approve)
                assert lab.stdout(sent) == ""  # nothing ran before the click
                lab.click(approve)
                assert lab.complete(sent, 60)["content"]["status"] == "ok"
                assert lab.run("print(y)") == "20\n"
                return
            # readonly denies the 'write' step's class: no card, and interactively no failure
            assert lab.complete(sent, 60)["content"]["status"] == "ok"
            shown = "\n".join(
                str(m["content"]["data"].get("text/plain", ""))
                for m in lab.messages(sent, "display_data")
            )
            assert "replay not run: denied by the approval policy 'readonly'" in shown
            assert not [w for w in lab.widget_states(model_name="ButtonModel")
                        if w.get("description") == "Approve"]  # fmt: skip
            assert lab.run("print('y' in dir())") == "False\n"
        assert api.requests == []


def test_qloop_run_leaves_the_callers_environment_as_it_was(
    saved: Path, tmp_path: Path, env, capsys
) -> None:
    """The command line's policy and opt-ins reach the kernel only: a program that runs ``main``
    in-process (a test suite, a scheduler) starts its next kernel with its own environment."""
    with StandInAPI() as api:
        env(api, received=True, folder=tmp_path)
        before = dict(os.environ)
        status, err = qloop_run(
            saved, tmp_path / "out.ipynb", "--approve", "auto", "--replay-received",
            "--continue-on-denied", capsys=capsys,
        )  # fmt: skip
    assert status == 0, err  # the opt-in reached the kernel: the received record replayed
    assert dict(os.environ) == before
