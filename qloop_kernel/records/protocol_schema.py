"""The messages of the ``qloop`` comms between the kernel and the JupyterLab extension, as types.

The kernel sends these as plain dicts and the extension (``labextension/src/protocol.ts``) answers
them; the types here describe both directions once. ``schema_export`` writes them into
``qloop_kernel/schema/protocol.schema.json``, the extension's types are generated from that file,
and the tests check the messages a real kernel sends against it.

Every request on the ``qloop`` comm carries an ``op`` and a ``request_id`` and gets one ``ack``
with the same ``request_id``: ``ok: true`` with the fields of its answer (``Answers``), or
``ok: false`` with the reason. The ``qloop.waiting`` comm announces an approval card that waits.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, RootModel, with_config
from typing_extensions import NotRequired, TypeAliasType, TypedDict  # pydantic's, before 3.12

from .schema import CellRecord

_closed = with_config(ConfigDict(extra="forbid"))  # a field not named here is not in the protocol

JSONObject = dict[str, Any]


# -- the saved things the messages carry ----------------------------------------------------------


@_closed
class Provenance(TypedDict):
    """What an accepted cell keeps in its metadata: the agent cell and step that made it, signed
    over the source it was proposed with."""

    agent_cell: str
    call_id: str
    source_sha256: str
    signature: str


@_closed
class NotebookGrantsValue(TypedDict):
    """The notebook's approval grants as saved in its metadata, signed for its path."""

    version: int
    grants: list[JSONObject]
    signature: str


# -- the notebook as read_notebook answers it ---------------------------------------------------


@_closed
class StreamView(TypedDict):
    output_type: Literal["stream"]
    name: str
    text: str
    chars: int


@_closed
class ErrorView(TypedDict):
    output_type: Literal["error"]
    ename: str
    evalue: str


@_closed
class RichView(TypedDict):
    """A result or display: its text/plain form and the names of its mime types, never its data."""

    output_type: Literal["execute_result", "display_data"]
    text: str
    chars: int
    mime: list[str]


@_closed
class OtherView(TypedDict):
    """An output of another type: named only."""

    output_type: str


class OutputView(RootModel[StreamView | ErrorView | RichView | OtherView]):
    """One output of a cell, bounded."""


@_closed
class CellView(TypedDict):
    """One cell in order: its id, type, execution count, bounded source and outputs."""

    id: str
    cell_type: str
    execution_count: int | None
    agent: bool
    source: str
    source_chars: int
    outputs: NotRequired[list[OutputView]]
    more_outputs: NotRequired[int]
    omitted: NotRequired[Literal[True]]  # listed without its content: the answer was full


@_closed
class NotebookView(TypedDict):
    """What read_notebook answers: the cells asked for (all by default), and the ids not found."""

    notebook_path: str
    total_cells: int
    cells: list[CellView]
    missing: list[str]


# -- requests: kernel -> page, on the ``qloop`` comm ----------------------------------------------


@_closed
class HelloRequest(TypedDict):
    """Which frontend holds the notebook, which operations it answers, and the notebook's path
    and saved grants."""

    op: Literal["hello"]
    request_id: str


@_closed
class SetMetadataRequest(TypedDict):
    """Save a turn's record in the agent cell's metadata."""

    op: Literal["set_metadata"]
    request_id: str
    cell_id: str
    key: Literal["qloop"]
    value: CellRecord  # finished and signed, or running and unsigned


@_closed
class SetNotebookMetadataRequest(TypedDict):
    """Save the approval grants in the notebook that holds the cell ``cell_id``."""

    op: Literal["set_notebook_metadata"]
    request_id: str
    cell_id: str
    key: Literal["qloop_grants"]
    value: NotebookGrantsValue


@_closed
class ReadNotebookRequest(TypedDict):
    """A bounded view of the notebook's cells (``cell_ids`` null: every cell)."""

    op: Literal["read_notebook"]
    request_id: str
    cell_id: str
    cell_ids: list[str] | None
    outputs: bool


@_closed
class ProposalEffect(TypedDict):
    """What a proposed code cell would change, from a run ahead that was taken back: one line per
    variable (``changes``), or why it was not run ahead, or not to its end (``note``, then shown
    instead)."""

    changes: list[str]
    note: str


class _Proposal(TypedDict):
    id: str  # the tool call's id
    source: str
    risk: str
    reasons: list[str]
    provenance: Provenance
    accepted: bool  # accepted already (approval policy, grant): applied without asking
    run: bool  # accepting an added code cell also runs it
    effect: NotRequired[ProposalEffect]  # a code cell waiting for the user's decision


@_closed
class AddProposal(_Proposal):
    """A new cell, after the cell ``after`` (or after the new cell of ``after_proposal`` while
    that proposal waits)."""

    kind: Literal["add"]
    cell_type: Literal["code", "markdown"]
    after: str
    after_proposal: NotRequired[str]


@_closed
class EditProposal(_Proposal):
    """A new source for the cell ``target``."""

    kind: Literal["edit"]
    target: str


@_closed
class ProposeRequest(TypedDict):
    """A cell change for the user to accept or reject; answered when the user decides."""

    op: Literal["propose"]
    request_id: str
    cell_id: str
    proposal: AddProposal | EditProposal


@_closed
class WithdrawRequest(TypedDict):
    """Take back a waiting proposal: its turn ended first."""

    op: Literal["withdraw"]
    request_id: str
    cell_id: str
    proposal: str  # the proposal's id


@_closed
class CellSourceRequest(TypedDict):
    """The type and whole source of the cell ``target``, which the agent runs."""

    op: Literal["cell_source"]
    request_id: str
    cell_id: str
    target: str


@_closed
class SetOutputsRequest(TypedDict):
    """The outputs of the cell ``target`` after the agent ran it, and its source as it ran."""

    op: Literal["set_outputs"]
    request_id: str
    cell_id: str
    target: str
    source: str
    outputs: list[JSONObject]  # nbformat outputs
    effect: str  # what the run did to the kernel's variables ("" for nothing)


@_closed
class RevertAddRequest(TypedDict):
    """Undo an accepted new cell: delete it, unless its source changed since."""

    op: Literal["revert_cell"]
    request_id: str
    cell_id: str
    kind: Literal["add"]
    target: str
    source: str


@_closed
class RevertEditRequest(TypedDict):
    """Undo an accepted edit: the source and provenance from before, unless it changed since."""

    op: Literal["revert_cell"]
    request_id: str
    cell_id: str
    kind: Literal["edit"]
    target: str
    source: str
    previous: str
    previous_provenance: JSONObject | None


class KernelRequest(
    RootModel[
        HelloRequest
        | SetMetadataRequest
        | SetNotebookMetadataRequest
        | ReadNotebookRequest
        | ProposeRequest
        | WithdrawRequest
        | CellSourceRequest
        | SetOutputsRequest
        | RevertAddRequest
        | RevertEditRequest
    ]
):
    """A request the kernel sends on the ``qloop`` comm (in its open message or later)."""


# -- answers: page -> kernel, on the ``qloop`` comm -----------------------------------------------


class _Ack(TypedDict):
    op: Literal["ack"]
    request_id: str | int | None  # the request's, echoed; null when the request had none
    ok: Literal[True]


@_closed
class Done(_Ack):
    """The answer of a request that returns nothing."""


@_closed
class Refusal(TypedDict):
    """A request the page cannot answer: malformed, or about a cell it does not hold."""

    op: Literal["ack"]
    request_id: str | int | None
    ok: Literal[False]
    error: str


@_closed
class HelloAnswer(_Ack):
    """The frontend, its version and operations; the notebook's path and saved grants when the
    page holds the notebook."""

    frontend: str
    version: str
    operations: list[str]
    notebook_path: NotRequired[str]
    notebook_grants: NotRequired[JSONObject | None]  # as the notebook holds them, unchecked


@_closed
class ReadNotebookAnswer(_Ack, NotebookView):
    """The notebook's view."""


@_closed
class ProposeAnswer(_Ack):
    """The user's decision: the cell it was applied to, its source then (an edit made before
    accepting included), or the reason it was rejected. An accepted edit says what it replaced."""

    decision: Literal["accepted", "rejected"]
    cell_id: str
    source: str
    reason: str
    previous: NotRequired[str]
    previous_provenance: NotRequired[JSONObject | None]


@_closed
class CellSourceAnswer(_Ack):
    cell_type: str
    source: str


@_closed
class Answers(TypedDict):
    """The answer of each request, by its ``op``."""

    hello: HelloAnswer
    set_metadata: Done
    set_notebook_metadata: Done
    read_notebook: ReadNotebookAnswer
    propose: ProposeAnswer
    withdraw: Done
    cell_source: CellSourceAnswer
    set_outputs: Done
    revert_cell: Done


@_closed
class Attached(TypedDict):
    """A page took the comm over (a reload): the kernel sends again what waits for an answer."""

    op: Literal["attached"]


class PageMessage(
    RootModel[
        Done
        | Refusal
        | HelloAnswer
        | ReadNotebookAnswer
        | ProposeAnswer
        | CellSourceAnswer
        | Attached
    ]
):
    """A message the page sends on the ``qloop`` comm."""


# -- the ``qloop.waiting`` comm -----------------------------------------------------------------


@_closed
class Waiting(TypedDict):
    """An approval card waits in cell ``cell_id``: ``model_id`` is its widget (sent on open and
    as the answer of ``describe``)."""

    op: Literal["waiting"]
    cell_id: str
    model_id: str


@_closed
class Describe(TypedDict):
    """A page that connected later asks which cell waits."""

    op: Literal["describe"]


class WaitingMessage(RootModel[Waiting | Describe]):
    """A message on the ``qloop.waiting`` comm, either way."""


class ProtocolMessage(RootModel[KernelRequest | PageMessage | WaitingMessage]):
    """Any message of the ``qloop`` and ``qloop.waiting`` comms."""


@_closed
class HostImage(TypedDict):
    mime: str
    data: str  # base64


# -- the ``qloop.host`` comm: the Jupyter server -> the kernel session (notebook/host.py) ---------
# In protocol.schema.json beside the page's messages (``HostMessage``), though the page never sees
# them: the tests check what a real kernel answers against these types.


@_closed
class HostRequest(TypedDict):
    """An outside agent's step the server has decided to run (its policy, a grant or the card):
    the kernel session runs it as the in-notebook agent's ``run_code`` runs."""

    op: Literal["run_step"]
    request_id: str
    call_id: str  # the step's id in the session's undo log
    client: str  # the outside client's name, as the card showed it
    code: str
    timeout_s: float | None


@_closed
class HostAnswer(TypedDict):
    """What the step did: ``ok`` when it ran, ``error`` when it raised or was stopped, ``refused``
    when it did not run or was undone (the step guard); the text as the model reads a tool
    result (outputs, value, error, the variables it changed), redacted in the kernel."""

    op: Literal["ack"]
    request_id: str
    ok: Literal[True]
    status: Literal["ok", "error", "refused"]
    text: str
    images: list[HostImage]
    changes: NotRequired[list[str]]
    not_undone: NotRequired[list[str]]


@_closed
class HostCancel(TypedDict):
    """Stop on the card of a step the host has not begun: it is answered ``refused`` without
    running (one that has begun is interrupted instead)."""

    op: Literal["cancel"]
    request_id: str


@_closed
class HostStarted(TypedDict):
    """The host begins to run the step: from now on a Stop interrupts the kernel (before, the
    interrupt would land in whatever the step waits behind)."""

    op: Literal["started"]
    request_id: str


# What a step stopped before it began answers.
STOPPED_BEFORE = "stopped before it ran: nothing of it ran"

# A message of the ``qloop.host`` comm, either way.
HostMessage = TypeAliasType("HostMessage", HostRequest | HostCancel | HostStarted | HostAnswer)
