"""The messages between the Jupyter server's ``qloop/outside/*`` routes and the notebook pages.

An outside agent's call that waits for the user is an item of its notebook: each page showing the
notebook long-polls ``GET qloop/outside/pending?path=&after=`` (``OutsidePending``), shows a card
per approval item, posts the user's decision (``OutsideDecision`` to ``decide``), takes a cell
change to apply it (``claim``), stops a running call (``stop``), saves each record item into the
notebook's metadata and says so (``saved``), and asks for the agent cell that replays the saved
calls (``agent_cell``). The server answers a post with ``OutsidePostAnswer`` (200, or 409 with
the reason), ``agent_cell`` with ``OutsideAgentCell``, and a refused request with Jupyter's
``OutsideError``. ``schema_export`` writes these types into ``protocol.schema.json`` beside the
kernel's comm messages; the extension's types are generated from it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, with_config
from typing_extensions import NotRequired, TypeAliasType, TypedDict

_closed = with_config(ConfigDict(extra="forbid"))  # a field not named here is not in the protocol

JSONObject = dict[str, Any]

DecisionKind = Literal["approve", "deny", "always", "edit"]
OUTSIDE_KEY: Literal["qloop_outside"] = "qloop_outside"  # the notebook's metadata key of the calls


# -- what the server sends: the items of a notebook ------------------------------------------------


@_closed
class AddCellChange(TypedDict):
    """A new cell after the cell ``after_cell_id`` (null: at the end of the notebook)."""

    op: Literal["add"]
    cell_type: Literal["code", "markdown"]
    after_cell_id: str | None


@_closed
class EditCellChange(TypedDict):
    """A new source for the cell ``cell_id``."""

    op: Literal["edit"]
    cell_id: str


@_closed
class RunCellChange(TypedDict):
    """Run the cell ``cell_id`` as it is when approved: the card shows its source."""

    op: Literal["run"]
    cell_id: str


# A cell change an outside agent asks for: the page that claims it applies it, or runs the cell.
OutsideCellChange = TypeAliasType(
    "OutsideCellChange", AddCellChange | EditCellChange | RunCellChange
)


@_closed
class OutsideApproval(TypedDict):
    """A call that waits for the user (``waiting``), runs once approved (``running``), or a cell
    change the policy or a grant allows, for the page to apply at once (``apply``, no card).
    ``client`` is the name the agent announced until the user approves a call of its MCP session
    (``verified``), then the name the user confirmed; ``grantable``: the client holds a session,
    to which an "always allow" is bound. For a cell change, ``code`` is the proposed source ("" for
    a run: the notebook has the source)."""

    id: str
    kind: Literal["approval"]
    state: Literal["waiting", "running", "apply"]
    client: str
    tool: str
    title: str
    code: str
    risk: str  # read, write, compute, unknown, destructive or external
    reasons: list[str]
    editable: bool
    verified: bool
    grantable: bool
    cell: NotRequired[OutsideCellChange]


@_closed
class OutsideEntry(TypedDict):
    """The saved record of one call (``server/record.py``), signed with this user's key over its
    other fields: who called, the tool and its input, who decided and why, the code that ran, and
    a bounded, redacted copy of the result."""

    id: str
    at: str
    client: str
    tool: str
    input: JSONObject
    decision: str
    reason: str
    ran: str | None
    risk: str | None
    result: str
    result_chars: int
    is_error: bool
    ran_redacted: NotRequired[Literal[True]]  # a secret was cut from the code that ran
    signature: str


@_closed
class OutsideRecordItem(TypedDict):
    """An entry for a page to append to the notebook's ``qloop_outside`` metadata, then
    acknowledge (``saved``)."""

    id: str
    kind: Literal["record"]
    key: Literal["qloop_outside"]
    entry: OutsideEntry


OutsideItem = TypeAliasType("OutsideItem", OutsideApproval | OutsideRecordItem)


@_closed
class OutsidePending(TypedDict):
    """The answer of ``pending``: the notebook's whole list once its version passes ``after``."""

    version: int
    items: list[OutsideItem]


# -- what the page posts ---------------------------------------------------------------------------


@_closed
class OutsideItemRef(TypedDict):
    """The body of ``claim``, ``stop`` and ``saved``: the item's id."""

    id: str


@_closed
class AppliedCell(TypedDict):
    """The page added or edited the cell ``cell_id``."""

    cell_id: str


@_closed
class RanCell(TypedDict):
    """The page ran the cell ``cell_id``: its source then, its outputs' text, the reply's status."""

    cell_id: str
    source: str
    outputs: str
    status: Literal["ok", "error", "aborted"]


@_closed
class NotApplied(TypedDict):
    """The page could not apply the change: why."""

    error: str


OutsideApplied = TypeAliasType("OutsideApplied", AppliedCell | RanCell | NotApplied)


@_closed
class OutsideDecision(TypedDict):
    """The body of ``decide``: the user's decision on the item ``id``; ``code`` is the edited code
    (``edit``), ``applied`` what the page did with a cell change, ``name`` the name the user gave
    an unverified client."""

    id: str
    decision: DecisionKind
    reason: NotRequired[str]
    code: NotRequired[str]
    applied: NotRequired[OutsideApplied]
    name: NotRequired[str]


@_closed
class OutsideAgentCellRequest(TypedDict):
    """The body of ``agent_cell``: the notebook's saved entries in order, as the page holds them
    (the server leaves out those it cannot read), and the id of the cell to add."""

    id: str
    entries: list[Any]


# -- what the server answers -----------------------------------------------------------------------


@_closed
class OutsidePostAnswer(TypedDict):
    """The answer of ``decide``, ``claim``, ``stop`` and ``saved``: ``ok`` (200), or not (409:
    decided, taken by another page, or gone) with the reason."""

    ok: bool
    message: NotRequired[str]


@_closed
class OutsideAgentCell(TypedDict):
    """The answer of ``agent_cell``: the ``%%agent`` cell's source and record, the code steps its
    run replays, whether every entry verified with this user's key, and the entries left out."""

    ok: Literal[True]
    source: str
    record: JSONObject  # a CellRecord (record.schema.json): the kernel loads and checks it
    steps: int
    own: bool
    skipped: int


@_closed
class OutsideError(TypedDict):
    """A refused request (400, 401, 403, 404 of an item), as the Jupyter server writes it."""

    message: str
    reason: NotRequired[str | None]
    traceback: NotRequired[str]


OutsidePageMessage = TypeAliasType(
    "OutsidePageMessage", OutsideItemRef | OutsideDecision | OutsideAgentCellRequest
)
OutsideServerMessage = TypeAliasType(
    "OutsideServerMessage", OutsidePending | OutsidePostAnswer | OutsideAgentCell | OutsideError
)


@_closed
class OutsideRoutes(TypedDict):
    """What each route of ``qloop/outside`` answers when it serves the request."""

    pending: OutsidePending
    decide: OutsidePostAnswer
    claim: OutsidePostAnswer
    stop: OutsidePostAnswer
    saved: OutsidePostAnswer
    agent_cell: OutsideAgentCell
