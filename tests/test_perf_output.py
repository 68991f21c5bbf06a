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
