"""What a code step prints reaches the cell bounded: head and tail, a marker and the full size."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output
from traitlets.config import Config

from qloop_kernel.notebook.code import show_bounded
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, tool_results
from tests.kernel_client import LabKernel

PRINTED = 20_000_000


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


def test_a_long_stream_shows_its_head_and_tail_and_its_size(shell: InteractiveShell) -> None:
    with capture_output() as step:
        print("first line\n" + "x" * 50_000 + "\nlast line")
    with capture_output() as cell:
        show_bounded(step, 5_000)
    shown = cell.stdout
    assert len(shown) < 5_300 and shown.startswith("first line") and "last line" in shown
    assert "characters omitted" in shown and "printed 50,022 characters" in shown


def test_a_huge_rich_output_becomes_bounded_text_and_images_are_kept(
    shell: InteractiveShell,
) -> None:
    table = "<table>" + "<tr><td>1</td></tr>" * 20_000 + "</table>"
    with capture_output() as step:
        display({"text/html": table, "text/plain": "row\n" * 20_000}, raw=True)
        display({"image/png": "iVBORw0KGgo=" * 10_000, "text/plain": "<Figure>"}, raw=True)
        display({"text/plain": "small"}, raw=True)
    with capture_output() as cell:
        show_bounded(step, 5_000)
    big, figure, small = cell.outputs
    assert set(big.data) == {"text/plain"} and len(big.data["text/plain"]) < 5_300
    assert "printed 80,000 characters" in big.data["text/plain"]
    assert figure.data["image/png"] == "iVBORw0KGgo=" * 10_000  # images are not cut
    assert small.data == {"text/plain": "small"}


@pytest.mark.kernel
def test_a_step_printing_20_mb_sends_a_bounded_output_to_the_frontend() -> None:
    script = [
        Reply([tool_use("run_code", {"code": f"print('x' * {PRINTED})"})]),
        Reply([text("Printed it.")]),
    ]
    with StandInAPI(script) as api, LabKernel(api.environment()) as lab:
        lab.run("%load_ext qloop_kernel\n%agent set max_output_chars 50000")
        cell = lab.execute("%%agent --approve auto\nPrint a lot.", cell_id="big-output")
        assert lab.complete(cell, 120)["content"]["status"] == "ok"
        streams = lab.messages(cell, "stream")
        sent = sum(len(json.dumps(m["content"])) for m in streams)
        shown = lab.stdout(cell)
        to_model = result_text(tool_results(api.requests[1])[0])
    assert sent < 60_000, f"{sent:,} bytes of stream output reached the frontend"
    assert f"printed {PRINTED + 1:,} characters" in shown and "characters omitted" in shown
    assert len(to_model) < 12_000 and "characters omitted" in to_model  # the model's own bound


@pytest.mark.kernel
def test_what_a_step_writes_to_the_file_descriptors_is_bounded_and_seen_by_the_model() -> None:
    code = (
        "import os, subprocess, sys\n"
        "os.write(1, b'fd head\\n' + b'y' * 3_000_000 + b'\\nfd tail\\n')\n"
        "subprocess.run([sys.executable, '-c', 'import sys; print(\"child out\");"
        ' print("child err", file=sys.stderr)\'])\n'
        "print('printed from Python')\n"
    )
    # A step whose only output is a partial line, which the redacting relay holds back a moment.
    last = "import os\nos.write(1, b'the last words, no newline')"
    script = [
        Reply([tool_use("run_code", {"code": code})]),
        Reply([tool_use("run_code", {"code": last})]),
        Reply([text("Done.")]),
    ]
    # ipykernel forwards the descriptors as in a notebook server only outside pytest.
    real_streams = {"PYTEST_CURRENT_TEST": None}
    with StandInAPI(script) as api, LabKernel({**api.environment(), **real_streams}) as lab:
        lab.run("%load_ext qloop_kernel\n%agent set max_output_chars 50000")
        cell = lab.execute("%%agent --approve auto\nWrite through the descriptors.", cell_id="fd")
        assert lab.complete(cell, 120)["content"]["status"] == "ok"
        sent = sum(len(json.dumps(m["content"])) for m in lab.messages(cell, "stream"))
        shown, errors = lab.stdout(cell), lab.stderr(cell)
        to_model = result_text(tool_results(api.requests[1])[0])
        last_to_model = result_text(tool_results(api.requests[2])[0])
        after = lab.execute("import os\nos.write(1, b'a later cell\\n')\nprint('python')")
        assert lab.complete(after, 30)["content"]["status"] == "ok"
        later = lab.stdout(after)
    assert sent < 60_000, f"{sent:,} bytes of stream output reached the frontend"
    assert "fd head" in shown and "fd tail" in shown and "printed 3,000,047 characters" in shown
    assert "child out" in shown and "child err" in errors
    assert shown.startswith("printed from Python\nfd head")  # Python's output first, always
    assert (
        "stdout:\nprinted from Python\nfd head" in to_model
        and "child out" in to_model
        and "child err" in to_model
    )
    assert last_to_model.startswith("stdout:\nthe last words, no newline")
    assert "\x1b]" not in shown + errors + to_model  # the end marker is never shown
    assert "a later cell" in later and "python" in later  # the kernel's own forwarding is back


class _KernelStream:
    """Stands in for ipykernel's OutStream: what reaches the frontend is collected."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def write(self, text: str) -> int:
        self.sent.append(text)
        return len(text)


def test_the_end_marker_is_found_across_reads_and_later_output_goes_to_the_kernel() -> None:
    import io

    from qloop_kernel.notebook.descriptors import MARKER, _Redirect

    stream, step = _KernelStream(), io.StringIO()
    redirect = _Redirect(stream, step)
    stream.write = redirect.write  # type: ignore[method-assign]
    middle = len(MARKER) // 2
    stream.write("output \x1b")  # an escape that may begin the marker is held back
    stream.write("[0m more" + MARKER[:middle])
    assert not redirect.drained.is_set()
    stream.write(MARKER[middle:] + "from a process still running")
    assert redirect.drained.is_set()
    stream.write(" after")
    step.write("printed from Python")
    redirect.release()
    assert step.getvalue() == "printed from Pythonoutput \x1b[0m more"  # after the Python output
    assert stream.sent == ["from a process still running", " after"]
    assert "write" not in vars(stream)  # the stream's own write is back


def test_a_held_back_end_is_kept_when_no_marker_follows() -> None:
    import io

    from qloop_kernel.notebook.descriptors import _Redirect

    stream, step = _KernelStream(), io.StringIO()
    redirect = _Redirect(stream, step)
    stream.write = redirect.write  # type: ignore[method-assign]
    stream.write("last line\x1b]53")
    redirect.release()
    assert step.getvalue() == "last line\x1b]53" and stream.sent == []


def test_the_write_a_stream_had_is_used_after_the_step_and_put_back() -> None:
    import io

    from qloop_kernel.notebook.descriptors import MARKER, _Redirect

    stream, step = _KernelStream(), io.StringIO()

    def redacting(text: str) -> int:  # as the agent cell's redaction sets it on the stream
        stream.sent.append(text.replace("secret", "[REDACTED]"))
        return len(text)

    stream.write = redacting  # type: ignore[method-assign]
    redirect = _Redirect(stream, step)
    stream.write = redirect.write  # type: ignore[method-assign]
    stream.write("in the step " + MARKER + "a late secret")
    redirect.release()
    assert step.getvalue() == "in the step " and stream.sent == ["a late [REDACTED]"]
    assert stream.write is redacting
