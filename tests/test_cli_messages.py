"""What a new user reads from the installed ``qloop`` command: a misspelt option, command or choice
is one line with "did you mean", exit code 2 and nothing written; the demo's first run names every
flag its replay needs; a failed run says it failed even where it had no earlier output to keep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

BIN = Path(sys.executable).parent
DEMO = Path(__file__).resolve().parents[1] / "notebooks" / "demo.ipynb"


# What would change the run's decisions: a new user has none of it set.
UNSET = ("QLOOP_APPROVAL", "QLOOP_REPLAY_RECEIVED", "QLOOP_CONTINUE_ON_DENIED")


def qloop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET and not k.startswith("ANTHROPIC_")}
    return subprocess.run(
        [str(BIN / "qloop"), *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "usage:" not in line and "Traceback" not in line, line
    return line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("run", "NB", "--aprove", "auto"),
         "qloop run: unrecognized arguments: --aprove auto (did you mean --approve?); "
         "see `qloop run --help`"),
        (("run", "NB", "--replay-recieved"),
         "qloop run: unrecognized arguments: --replay-recieved (did you mean --replay-received?)"),
        (("run", "NB", "--approve", "autoo"),
         "qloop run: argument --approve: invalid choice 'autoo' (did you mean 'auto'? choose from "
         "ask, auto, readonly, write, deny); see `qloop run --help`"),
        (("export", "NB", "--to", "cell"),
         "qloop export: argument --to: invalid choice 'cell' (did you mean 'cells'? choose from "
         "cells, script)"),
        (("rn", "NB"), "qloop: argument command: invalid choice 'rn' (did you mean 'run'? "),
        (("run",), "qloop run: the following arguments are required: notebook; see `qloop run --help`"),
        (("run", "NB", "--timeout", "soon"), "qloop run: argument --timeout: invalid float value: 'soon'"),
    ],
)  # fmt: skip
def test_a_mistake_on_the_command_line_is_one_line_that_offers_the_near_name(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    notebook = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = one_line(qloop(*(str(notebook) if a == "NB" else a for a in args)))
    assert line.startswith(says), line
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_option_with_no_near_name_is_one_line_without_a_guess(tmp_path: Path) -> None:
    line = one_line(qloop("run", str(tmp_path / "nb.ipynb"), "--zzzz"))
    assert line == "qloop run: unrecognized arguments: --zzzz; see `qloop run --help`"


@pytest.mark.kernel
def test_the_demo_names_every_flag_it_needs_at_once_and_a_failed_run_says_so(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo.executed.ipynb"
    first = qloop("run", str(DEMO), "-o", str(out), timeout=180)
    assert first.returncode == 1, first.stderr
    lines = first.stderr.splitlines()
    [failed] = [line for line in lines if line.startswith("qloop run: cell ")]
    assert "run `qloop run --approve auto --replay-received`" in failed
    # No earlier output: the run's cells are written to OUT, and the last line says it failed.
    assert lines[-1] == f"qloop run: the run did not finish; wrote what ran to {out}"
    assert not any(line == f"qloop run: wrote {out}" for line in lines)
    assert out.exists() and not (tmp_path / "demo.executed.failed.ipynb").exists()

    # The flags the first message named are all it takes.
    again = qloop(
        "run", str(DEMO), "-o", str(out), "--approve", "auto", "--replay-received", timeout=180
    )
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1] == f"qloop run: wrote {out}"
