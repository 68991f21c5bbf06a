"""Tools built again each turn: one input model per definition, rebuilt whenever what it reads differs."""

from __future__ import annotations

from typing import Annotated

from annotated_types import Interval

from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.tools.runtime import Tool, ToolRuntime

# A module whose function reads its annotation by name, as `from __future__ import annotations`
# leaves it: one code object, run in two namespaces that give the name different classes.
MODULE = compile(
    '''
from __future__ import annotations
from pydantic import BaseModel

def lookup(item: Item) -> str:
    """Look an item up."""
    return repr(item)
''',
    "<tools>",
    "exec",
)


def closures(default: int = 10):
    """A tool function defined again on each call, as the kernel's built-in tools are."""

    def recent(last: Annotated[int, Interval(ge=1, le=100)] = default) -> str:
        """The last cells.

        Args:
            last: how many
        """
        return str(last)

    return recent


def test_a_function_defined_again_reuses_its_model_and_schema():
    first, second = Tool.from_function(closures()), Tool.from_function(closures())
    assert closures() is not closures()
    assert first.input_model is second.input_model
    assert first.schema()["input_schema"] is second.schema()["input_schema"]
    assert first.schema()["input_schema"]["properties"]["last"]["maximum"] == 100


def test_a_different_default_gets_its_own_model():
    ten, five = Tool.from_function(closures(10)), Tool.from_function(closures(5))
    assert ten.input_model is not five.input_model
    assert ten.schema()["input_schema"]["properties"]["last"]["default"] == 10
    assert five.schema()["input_schema"]["properties"]["last"]["default"] == 5
    outcome = ToolRuntime.of([five], AutoApprover()).run(ToolCall(id="t", name="recent", input={}))
    assert outcome.text == "5"


def test_a_changed_docstring_is_the_new_description():
    func = closures()
    func.__doc__ = "Other words.\n\nArgs:\n    last: how many cells back"
    tool = Tool.from_function(func)
    assert tool.description == "Other words."
    assert (
        tool.schema()["input_schema"]["properties"]["last"]["description"] == "how many cells back"
    )
    assert Tool.from_function(closures()).description == "The last cells."


def _lookup_with(field: str):
    from pydantic import BaseModel, create_model

    namespace: dict = {"Item": create_model("Item", __base__=BaseModel, **{field: (str, ...)})}
    exec(MODULE, namespace)
    return namespace["lookup"]


def test_a_name_that_now_means_another_class_gets_a_new_model():
    by_sku, by_name = _lookup_with("sku"), _lookup_with("name")
    assert by_sku.__code__ is by_name.__code__  # one definition, two meanings of `Item`
    sku, name = Tool.from_function(by_sku), Tool.from_function(by_name)
    assert sku.input_model is not name.input_model
    assert "sku" in sku.schema()["input_schema"]["required"]
    assert "name" in name.schema()["input_schema"]["required"]
    runtime = ToolRuntime.of([name], AutoApprover())
    outcome = runtime.run(ToolCall(id="t", name="lookup", input={"name": "n"}))
    assert outcome.text == "Item(name='n')", outcome.text


def test_the_kernels_tools_built_for_two_turns_share_their_models():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    first = {t.name: t for t in builtin_tools(shell, code_timeout_s=30)}
    second = {t.name: t for t in builtin_tools(shell, code_timeout_s=30)}
    assert first.keys() == second.keys() and "run_code" in first
    for name, tool in first.items():
        assert second[name].input_model is tool.input_model, name
        assert second[name].func is not tool.func, name  # each turn's own functions still run
