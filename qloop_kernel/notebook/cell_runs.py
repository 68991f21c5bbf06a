"""run_cell, and add_cell with ``run``: the agent runs a notebook cell, and its outputs land in
that cell.

While an agent cell runs, the kernel is busy with it: a cell the page executed now would wait
until the turn ends (its ``execute_request`` is held, pump.py). So the kernel runs the cell's
source itself, as one step like run_code's (saved for undo, under the time limit and Stop,
private values redacted), and sends the outputs to the page, which makes them that cell's
outputs (``set_outputs`` on the ``qloop`` comm). The source that runs is the cell's as the page
holds it when the call is decided (``cell_source``): the card or the policy decides on exactly
that source, an edit on the card becomes the cell's source, and what runs is what was decided.
The model reads the outputs, bounded like a run_code result, with what the run did to the
namespace; the agent cell and a note on the cell that ran show that effect ("df: DataFrame
10000×12 → 9412×12").
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ..errors import ToolFailure
from ..messages import Block
from ..notebook_view import CELL_RUN_MIME
from ..policy.risk import Assessment
from ..redact import redact
from ..tools.runtime import Tool, format_exception
from .display import line

if TYPE_CHECKING:
    from .code import CodeRunner, Ran
    from .notebook_grants import NotebookGrantStore

_Json: TypeAlias = "str | int | float | bool | None | dict[str, _Json] | list[_Json]"
CELL_OPS = frozenset({"cell_source", "set_outputs"})
"""What a page must answer for the agent to run its cells."""

AGENT_MAGIC = "%%agent"
class CellPort(Protocol):
    """Where the agent's cells are: their sources, and where a run's outputs go."""

    def cell(self, cell_id: str) -> tuple[str, str] | None:
        """The cell's type and whole source, or None (no such cell, or nobody answered)."""
        ...

    def deliver(
        self, cell_id: str, source: str, outputs: list[dict[str, Any]], effect: str
    ) -> bool:
        """Make ``outputs`` the cell's outputs; whether that was done."""
        ...


@dataclass
class PagePort:
    """The page that runs the agent cell (JupyterLab, Notebook 7), through the ``qloop`` comm."""

    agent_cell: str
    page: NotebookGrantStore

    def cell(self, cell_id: str) -> tuple[str, str] | None:
        answer = self.page.request("cell_source", cell_id=self.agent_cell, target=cell_id)
        if answer is None:
            return None
        return str(answer.get("cell_type")), answer.get("source")  # type: ignore[return-value]

    def deliver(
        self, cell_id: str, source: str, outputs: list[dict[str, Any]], effect: str
    ) -> bool:
        answer = self.page.request(
            "set_outputs", cell_id=self.agent_cell, target=cell_id, source=source,
            outputs=outputs, effect=effect,
        )  # fmt: skip
        return answer is not None


@dataclass
class RunnerPort:
    """``qloop run`` (and papermill, nbconvert through it): the cells it sent with the agent
    cell, and outputs it moves from the agent cell into the cell that ran, once the agent cell
    has run."""

    cells: Mapping[str, Any]

    def cell(self, cell_id: str) -> tuple[str, str] | None:
        found = self.cells.get(cell_id)
        if not (isinstance(found, list | tuple) and len(found) == 2):
            return None
        return str(found[0]), found[1]

    def deliver(
        self, cell_id: str, source: str, outputs: list[dict[str, Any]], effect: str
    ) -> bool:
        from IPython.display import display

        shown = {"target": cell_id, "outputs": outputs, "effect": effect}
        display({CELL_RUN_MIME: shown, "text/plain": f"cell {cell_id} ran"}, raw=True)
        return True


class RunCellInput(BaseModel):
    """run_cell's input: the model names the cell; the source is the cell's, read when the call
    is decided (a source the model sends is replaced by the cell's)."""

    model_config = ConfigDict(extra="forbid")

    cell_id: str = Field(description="the id of the code cell to run (read_notebook gives ids)")
    source: SkipJsonSchema[str] = ""


@dataclass
class CellRuns:
    """Runs cells of the notebook for the turn of ``agent_cell``."""

    agent_cell: str
    port: CellPort
    runner: CodeRunner

    def source_of(self, cell_id: str) -> str:
        """The source of code cell ``cell_id`` as the notebook holds it now."""
        if cell_id == self.agent_cell:
            raise ToolFailure("this is the running agent cell: it cannot run itself")
        found = self.port.cell(cell_id)
        if found is None:
            raise ToolFailure(
                f"the notebook has no cell with id {cell_id!r}, or its page did not answer; "
                "read_notebook lists the cells and their ids"
            )
        kind, source = found
        if kind != "code" or not isinstance(source, str):
            raise ToolFailure(f"cell {cell_id} is a {kind} cell: only code cells run")
        if source.lstrip().startswith(AGENT_MAGIC):
            raise ToolFailure(
                f"cell {cell_id} is an agent cell: its task is the user's to run, not the agent's"
            )
        return source

    def prepare(self, input: dict[str, Any]) -> dict[str, Any]:
        """run_cell's input as it is decided and runs: with the cell's current source."""
        cell_id = str(input.get("cell_id", ""))
        return {"cell_id": cell_id, "source": self.source_of(cell_id)}

    def run(self, cell_id: str, source: str) -> list[Block]:
        """Run ``source`` as cell ``cell_id``: its outputs go into that cell, the model reads them.
        Raises ToolFailure (outputs sent first) when the cell raised."""
        ran = self.runner.execute(source, own_result=True)
        with ran.redacting():
            outputs = redact(cell_outputs(ran))
            effect = "; ".join(ran.step.lines()) if ran.step.changes else ""
            taken = self.port.deliver(cell_id, source, outputs, effect)
            where = (
                f"cell {cell_id} ran; its outputs are in that cell"
                if taken
                else f"cell {cell_id} ran, but its page did not take the outputs (it closed)"
            )
            line(where + (f". {effect}" if effect else ""), "info" if taken else "warn")
            content = ran.content()
        content[0] = {**content[0], "text": f"{where}.\n\n{content[0]['text']}"}
        return ran.answer(content)


def cell_outputs(ran: Ran) -> list[dict[str, Any]]:
    """What a step printed, displayed, returned and raised, as nbformat outputs of a cell."""
    from IPython import get_ipython

    outputs: list[dict[str, Any]] = []
    for name, text in (("stdout", ran.captured.stdout), ("stderr", ran.captured.stderr)):
        if text:
            outputs.append({"output_type": "stream", "name": name, "text": text})
    for shown in ran.captured.outputs:
        outputs.append({"output_type": "display_data", "data": _json(shown.data or {}),
                        "metadata": _json(shown.metadata or {})})  # fmt: skip
    shell = get_ipython()
    if ran.value is not None and shell is not None:
        data, metadata = shell.display_formatter.format(ran.value)
        outputs.append({"output_type": "execute_result", "execution_count": None,
                        "data": _json(data), "metadata": _json(metadata)})  # fmt: skip
    if ran.error is not None:
        outputs.append(_error_output(ran))
    return outputs


def _error_output(ran: Ran) -> dict[str, Any]:
    error = ran.error
    assert error is not None
    shown = ran.traceback
    traceback = shown if shown is not None else format_exception(error).splitlines()
    return {"output_type": "error", "ename": type(error).__name__, "evalue": str(error),
            "traceback": [str(t) for t in traceback]}  # fmt: skip


def _json(value: Any) -> _Json:
    """A display bundle as JSON (bytes, as IPython gives a PNG, in base64)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def run_cell_tool(runs: CellRuns, classify_code: Callable[[dict[str, Any]], Assessment]) -> Tool:
    """The run_cell tool: decided on the cell's current source, like run_code on its code."""

    def run_cell(call: RunCellInput) -> list[Block]:
        """Run an existing code cell of the notebook (read_notebook gives the ids) as the user
        would: its current source runs in the kernel, its outputs replace the cell's outputs, and
        you read them like run_code's. Use it to re-run the user's cells after a change; to look
        at data use run_code, and for new work propose a cell with add_cell.
        """
        return runs.run(call.cell_id, call.source)

    tool = Tool.from_function(
        run_cell,
        editable_field="source",
        classify=lambda input: classify_code({"code": input.get("source", "")}),
    )
    tool.prepare = runs.prepare
    return tool
