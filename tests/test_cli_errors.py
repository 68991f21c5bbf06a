"""Every mistake with a file or an option is one line that says the fix, with a documented exit code;
nothing is written before the input is checked and the kernel started; a failed or interrupted run
leaves an earlier output as it was."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest

from qloop_kernel.headless import cli
from qloop_kernel.headless.files import write_atomic

BIN = Path(sys.executable).parent
EARLIER = '{"earlier": "a good output"}\n'


def good_notebook(folder: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources or ("x = 1",)]
    path = folder / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() if p.is_file() else "/"
        for p in sorted(folder.rglob("*"))
    }


def one_line(capsys: pytest.CaptureFixture[str], start: str) -> str:
    printed = capsys.readouterr()
    assert printed.out == ""
    [line] = printed.err.splitlines()
    assert line.startswith(start) and "Traceback" not in line, line
    return line


@pytest.mark.parametrize("command", ["run", "show", "export"])
@pytest.mark.parametrize(
    ("case", "content", "says"),
    [
        ("missing", None, "no such file; check the path"),
        ("folder", "/", "is a folder, not a notebook"),
        ("not json", "hello, notebook\n", "not JSON (line 1, column 1"),
        ("cells not a list", '{"nbformat": 4, "nbformat_minor": 5, "cells": 3}', "'cells' is not a list"),
        ("no version", '{"cells": 3}', "no 'nbformat' version number"),
        ("a list", "[]", "its JSON is list"),
        ("invalid", '{"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code"}]}',
         "is not a valid Jupyter notebook (ValidationError"),
    ],
)  # fmt: skip
def test_a_bad_input_file_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, capsys, command: str, case: str, content: str | None, says: str
) -> None:
    path = tmp_path / "in.ipynb"
    if content == "/":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    before = files(tmp_path)
    assert cli.main([command, str(path)]) == 2
    line = one_line(capsys, f"qloop {command}: ")
    assert says in line
    assert files(tmp_path) == before


@pytest.mark.parametrize("command", ["run", "export"])
def test_an_output_in_a_missing_folder_or_a_folder_is_refused_before_running(
    tmp_path: Path, capsys, command: str
) -> None:
    source = good_notebook(tmp_path)
    before = files(tmp_path)
    assert cli.main([command, str(source), "-o", str(tmp_path / "nope" / "out.ipynb")]) == 2
    line = one_line(capsys, f"qloop {command}: -o ")
    assert "the folder" in line and "does not exist; create it first" in line
    assert cli.main([command, str(source), "-o", str(tmp_path)]) == 2
    assert "is a folder; give a file name" in one_line(capsys, f"qloop {command}: -o ")
    assert files(tmp_path) == before


def test_an_unknown_kernel_is_refused_and_the_earlier_output_kept(tmp_path: Path, capsys) -> None:
    source = good_notebook(tmp_path)
    out = tmp_path / "out.ipynb"
    out.write_text(EARLIER)
    assert cli.main(["run", str(source), "-o", str(out), "--kernel", "no-such-kernel"]) == 2
    line = one_line(capsys, "qloop run: --kernel no-such-kernel: no such kernel (installed: ")
    assert "python3" in line and "qloop install-kernel" in line
    assert out.read_text() == EARLIER


def test_a_bad_kernel_spec_name_is_one_line(tmp_path: Path, capsys) -> None:
    status = cli.main(["install-kernel", "--name", "a b/c", "--prefix", str(tmp_path)])
    assert status == 2
    assert "not a valid kernel name" in one_line(capsys, "qloop install-kernel: --name 'a b/c'")
    assert files(tmp_path) == {}


def test_version_and_help_say_the_version_and_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"qloop {version('qloop-kernel')}"
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    shown = capsys.readouterr().out
    assert "exit codes:" in shown and "130" in shown and "--continue-on-denied" in shown


def test_the_installed_command_prints_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "qloop"), "run", str(tmp_path / "missing.ipynb")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no such file" in done.stderr
    assert done.stdout == ""


def test_an_interrupted_write_keeps_the_earlier_file(tmp_path: Path) -> None:
    out = tmp_path / "out.ipynb"
    out.write_text(EARLIER)

    def half_then_fail(handle) -> None:
        handle.write('{"cells": [')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, half_then_fail)
    assert out.read_text() == EARLIER
    assert [p.name for p in tmp_path.iterdir()] == ["out.ipynb"]  # no temporary file left


@pytest.mark.kernel
def test_a_failed_run_keeps_the_earlier_output(tmp_path: Path, capsys) -> None:
    source = good_notebook(tmp_path, "x = 1", "1 / 0")
    out = tmp_path / "out.ipynb"
    out.write_text(EARLIER)
    assert cli.main(["run", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "qloop run: cell 2 failed: ZeroDivisionError: division by zero" in err
    assert out.read_text() == EARLIER
    failed = tmp_path / "out.failed.ipynb"
    assert f"wrote what ran to {failed} ({out} is left as it was)" in err
    assert nbformat.read(failed, as_version=4).cells[1].outputs[0]["ename"] == "ZeroDivisionError"


@pytest.mark.kernel
def test_an_interrupted_run_exits_130_and_keeps_the_earlier_output(tmp_path: Path) -> None:
    source = good_notebook(tmp_path, "print('started')", "import time\ntime.sleep(120)")
    out = tmp_path / "out.ipynb"
    out.write_text(EARLIER)
    err = tmp_path / "err.txt"
    with err.open("w") as stream:
        running = subprocess.Popen(
            [str(BIN / "qloop"), "run", str(source), "-o", str(out)], stderr=stream
        )
        deadline = time.monotonic() + 120
        while "[1/2] ok" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # the second cell is running
        running.send_signal(signal.SIGINT)
        assert running.wait(timeout=60) == 130
    lines = err.read_text().splitlines()
    assert "qloop run: cell 2 interrupted" in lines, lines
    assert "Traceback" not in err.read_text()
    assert out.read_text() == EARLIER
    ran = nbformat.read(tmp_path / "out.failed.ipynb", as_version=4)
    assert ran.cells[0].outputs[0]["text"] == "started\n"
