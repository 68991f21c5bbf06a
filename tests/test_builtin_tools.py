"""The built-in tools as the model sees them: bounds in the schema, mistakes as plain tool errors."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.tools.runtime import Tool, ToolRuntime
from qloop_kernel.tools.user import ToolNameTaken, UserTools


@pytest.fixture
def runtime() -> ToolRuntime:
    shell = InteractiveShell.instance()
    shell.user_ns["df"] = [1, 2, 3]
    return ToolRuntime.of(builtin_tools(shell), AutoApprover())


def test_paging_bounds_are_in_the_schema(runtime: ToolRuntime) -> None:
    props = runtime.tools["inspect_variable"].schema()["input_schema"]["properties"]
    assert {"maximum": 1000, "minimum": 0, "type": "integer"} in props["rows"]["anyOf"]
    assert props["offset"]["minimum"] == 0
    history = runtime.tools["notebook_history"].schema()["input_schema"]["properties"]["last"]
    assert (history["minimum"], history["maximum"]) == (1, 100)


def test_model_mistakes_come_back_plain_without_a_traceback(runtime: ToolRuntime) -> None:
    unknown = runtime.run(ToolCall("1", "inspect_variable", {"name": "dff"}))
    assert unknown.is_error and unknown.text == "No variable named 'dff'. Did you mean: df?"
    too_many = runtime.run(ToolCall("2", "inspect_variable", {"name": "df", "rows": 5000}))
    assert too_many.is_error and "less than or equal to 1000" in too_many.text
    assert "Traceback" not in unknown.text + too_many.text


def test_tool_names_are_unique_and_replacing_never_lowers_approval() -> None:
    tool = UserTools().tool  # one kernel's registry
    with pytest.raises(ToolNameTaken, match="built-in"):
        tool(lambda code: code, name="run_code")
    with pytest.raises(ToolNameTaken, match="cannot be read_only"):
        tool(lambda code: code, name="run_code", read_only=True, replace=True)

    def revenue(region: str) -> str:
        """Revenue."""
        return region

    tool(revenue, read_only=True)
    tool(revenue, read_only=True)  # the same cell run again: an update

    def other(region: str) -> str:
        """Another."""
        return region

    with pytest.raises(ToolNameTaken, match="already registered"):
        tool(other, name="revenue")
    with pytest.raises(ValueError, match="two tools are named"):
        ToolRuntime.of([Tool.from_function(other), Tool.from_function(other)], AutoApprover())
