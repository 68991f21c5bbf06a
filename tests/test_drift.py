"""Stale and drift detection: fingerprints of what a turn read and changed, warnings on replay."""

from __future__ import annotations

import io
import json
import os

import nbformat
import numpy as np
import pandas as pd
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.records import load_record
from qloop_kernel.records.drift import (
    CellLedger,
    TurnPrints,
    code_names,
    differences,
    output_differences,
    variable_print,
)
from qloop_kernel.records.schema import Fingerprint, ToolCallRecord
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.values.fingerprint import record_hash as content_hash


def test_code_names_reads_assigns_and_imports() -> None:
    names = code_names(
        "import numpy as np\nfrom pandas import DataFrame\ny = df['a'] + x\n%time z = 1"
    )
    assert {"df", "x"} <= names.read and {"y", "np", "DataFrame"} <= names.assigned
    assert names.imported == {"numpy", "pandas"}


def test_a_fingerprint_tells_shape_dtype_and_value_changes() -> None:
    df = pd.DataFrame({"a": range(600), "b": 1.0})
    saved = Fingerprint(read=[variable_print("df", df)])
    assert differences(saved, {"df": df.copy()}) == []
    grown = pd.DataFrame({"a": range(800), "b": 1.0})
    assert differences(saved, {"df": grown}) == ["df: 600×2 → 800×2"]
    assert differences(saved, {"df": df.assign(b=2.0)}) == ["df: same shape, different values"]
    assert differences(saved, {"df": df.astype({"a": "float64"})})[0].startswith("df: dtypes")
    assert differences(saved, {}) == ["df: not defined now"]


def test_library_and_python_versions_are_compared() -> None:
    saved = Fingerprint(python="2.7.18", libraries={"pandas": "0.0.1", "numpy": np.__version__})
    assert differences(saved, {}) == [f"Python 2.7.18 → {__import__('platform').python_version()}",
                                      f"pandas 0.0.1 → {pd.__version__}"]  # fmt: skip


def test_big_data_is_hashed_from_a_bounded_sample() -> None:
    big = np.arange(50_000_000, dtype=np.int8)
    assert content_hash(big) == content_hash(big.copy()) != ""
    frame = pd.DataFrame({"a": np.arange(2_000_000)})
    assert content_hash(frame) != content_hash(frame.assign(a=frame["a"] * 2))


def test_turn_prints_record_the_first_read_and_the_final_state() -> None:
    namespace = {"df": pd.DataFrame({"a": [1, 2]}), "np": np}
    ledger = CellLedger()
    ledger.ran("setup", "df = load()")
    prints = TurnPrints(namespace, cells=ledger.defined)
    prints.before_step("df['b'] = df['a'] * 2\nout = np.sum(df['b'])")
    namespace["df"]["b"] = namespace["df"]["a"] * 2
    namespace["out"] = 6
    prints.before_step("df = df.dropna()")  # df was read already: its first state is kept
    built = prints.build(final=True)
    assert [p.shape for p in built.read] == ["2×1"]
    assert {p.name for p in built.changed} == {"df", "out"}
    assert [c.cell_id for c in built.cells] == ["setup"] and "numpy" in built.libraries


def test_output_differences_per_step() -> None:
    step = ToolCallRecord.model_validate(
        {"id": "t", "name": "run_code", "input": {"code": "print(1)"},
         "decision": {"kind": "approved"}, "output_summary": "stdout:\n1",
         "images": [{"mime": "image/png", "bytes": 3, "sha256": "aa"}]}
    )  # fmt: skip
    assert output_differences(step, "stdout:\n1\n", ["aa"]) == []
    # What the step changed is compared by the variable checks, not as output text; a record
    # saved before results carried that section still matches.
    changes = "\n\nnamespace changes:\nx: created (int)"
    assert output_differences(step, "stdout:\n1" + changes, ["aa"]) == []
    saved_with = step.model_copy(update={"output_summary": "stdout:\n1" + changes})
    assert output_differences(saved_with, "stdout:\n1\n\nnamespace changes:\nx: int → str", ["aa"]) == []
    assert output_differences(saved_with, "stdout:\n2" + changes, ["aa"]) == [
        "its text output differs from the saved run"
    ]
    # The count of figures is the project's own line, worded differently by earlier versions; the
    # figures themselves are compared by hash.
    drawn = step.model_copy(update={"output_summary": "stdout:\n1\n\n1 image(s) attached."})
    assert output_differences(drawn, "stdout:\n1\n\n1 image attached.", ["aa"]) == []
    assert output_differences(drawn, "stdout:\n2\n\n1 image attached.", ["aa"]) == [
        "its text output differs from the saved run"
    ]
    assert output_differences(step, "stdout:\n2", ["bb"]) == [
        "its text output differs from the saved run",
        "its figure differs from the saved run",
    ]


SETUP = (
    "%load_ext qloop_kernel\nimport pandas as pd\ndf = pd.DataFrame({'a': range(600), 'b': 1.0})"
)


@pytest.mark.kernel
def test_replay_warns_of_changed_data_an_edited_cell_and_a_differing_output(monkeypatch) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell("%%agent\nHow many rows has df?"),
    ]
    script = [
        Reply([tool_use("run_code", {"code": "rows = len(df)\nprint(rows, 'rows')"})]),
        Reply([text("df has 600 rows.")]),
    ]
    with StandInAPI(script) as api:
        for name, value in {**api.environment(), "QLOOP_APPROVAL": "auto"}.items():
            monkeypatch.setenv(name, value)
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        record = load_record(nb.cells[1].metadata["qloop"])
        assert record.fingerprint is not None
        assert [p.shape for p in record.fingerprint.read] == ["600×2"]
        assert record.fingerprint.cells[0].cell_id == nb.cells[0].id
        unchanged = json.dumps(nb.cells[1].outputs)
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        assert "changed since" not in json.dumps(nb.cells[1].outputs) != unchanged
        nb.cells[0].source = SETUP.replace("600", "800")  # the user edits the input cell
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
        assert api.requests[2:] == []  # replays ask no model
    shown = "\n".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for o in nb.cells[1].outputs
    )
    assert "changed since the turn ran: df: 600×2 → 800×2" in shown
    assert "the cell that defines" in shown and "was edited" in shown
    assert "step 1/1: its text output differs from the saved run" in shown
    assert "may be stale" in shown
    stale = [
        o["data"]["application/vnd.qloop.answer+json"]
        for o in nb.cells[1].outputs
        if "application/vnd.qloop.answer+json" in o.get("data", {})
    ]
    assert stale == [{"markdown": "df has 600 rows.", "stale": True}]
    assert os.environ["QLOOP_APPROVAL"] == "auto"
