"""Cell proposals: ``add_cell`` and ``edit_cell`` put the agent's work into ordinary notebook cells that
the user accepts or rejects one by one.

Both tools go through the one permission pipeline (``ToolRuntime``): a proposal is a notebook edit,
class ``write`` whatever its code would do (nothing runs when it is accepted), so headless policies
``auto`` and ``write`` accept it and ``readonly`` and ``deny`` reject it. Where someone can click, the
approver of a proposal is the page itself: the kernel sends ``propose`` on the ``qloop`` comm, the
extension shows the new cell, or the edited one with its diff, with Accept and Reject, and its answer
comes when the user decides (the kernel pumps the shell meanwhile, as for an approval card). A proposal
the policy or a grant accepts is sent already accepted. Under ``qloop run`` nothing is sent: the runner
applies the accepted proposals of the record to the output notebook (``headless/runner.py``); a cell
added with ``run`` runs in the kernel when the policy accepts it (its class is then its code's), and
the runner puts its outputs into the new cell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ToolFailure
from ..messages import Block  # noqa: TC001 - the tools' hints are read at run time
from ..notebook_view import SOURCE_CHARS, proposed_cell_id, provenance
from ..policy.permissions import ApprovalRequest, Approve, ApproveEdited, Deny
from ..policy.risk import Assessment, Reason, severity
from ..tools.runtime import Tool, running_call_id
from .cell_runs import run_cell_tool
from .undo import NotebookEdit

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..policy.permissions import Approver, Decision, Request
    from ..records import ToolCallRecord
    from .ahead import Effect
    from .cell_runs import CellRuns
    from .notebook_grants import NotebookGrantStore
    from .undo import StepChanges, UndoLog

PROPOSAL_TOOLS = ("add_cell", "edit_cell")


def _notebook_edit(code_class: Assessment | None, cell_type: str) -> Assessment:
    """A proposal's class: ``write`` (it changes the notebook; nothing runs), with what its code
    would do when the user runs it as the reasons."""
    reasons: tuple[Reason, ...] = (
        Reason(1, "write", "adds or changes a notebook cell; nothing runs until you run it"),
    )
    if code_class is not None and cell_type == "code":
        reasons += tuple(code_class.reasons)
    return Assessment("write", reasons, frozenset())


@dataclass
class CellProposals:
    """The proposals of one turn: who decides them, and the cells they made."""

    agent_cell: str | None
    page: NotebookGrantStore | None  # the page that runs the cell, when it shows proposals
    view_ids: Callable[[], list[str] | None]  # the notebook's cell ids (None: not known)
    classify_code: Callable[[dict[str, Any]], Assessment]
    runs: CellRuns | None = None  # where the page takes outputs: add_cell may run the cell
    undo: UndoLog | None = None  # where the page can take an accepted cell back: Undo does
    added: list[str] = field(default_factory=list)  # ids of the cells this turn added
    # The turn is the page's Fix or Edit of cell ``agent_cell``, an ordinary code cell: its own
    # source is what the agent may propose to change.
    assist: bool = False
    # The calls of the model's response still to run, and the request the approver would get
    # for one (None: it would not ask): the proposals the user will be asked about next are
    # shown with the current one, so they can be decided together (Accept all).
    upcoming: Callable[[], list[ToolCall]] = lambda: []
    would_ask: Callable[[ToolCall], ApprovalRequest | None] = lambda call: None
    # The data effect of a proposed code cell (its source; for an edit, the cell it changes),
    # run ahead and taken back (ahead.py); None: not run ahead (``qloop run``).
    ahead: Callable[[str, str | None], Effect | None] | None = None
    _answer: dict[str, Any] | None = None  # the page's answer to the proposal being run
    _sent: dict[str, str] = field(default_factory=dict)  # call id -> request shown ahead

    @property
    def interactive(self) -> bool:
        return self.page is not None

    # -- the approver of proposal tools ------------------------------------------------------

    def approver(self, others: Approver) -> Approver:
        """``others`` for every tool but the proposal tools, which the page decides."""
        return _ByTool(self, others)

    def decide(self, request: ApprovalRequest) -> Decision:
        """Send the proposal to the page and wait for the user's decision."""
        assert self.page is not None
        call = request.call
        sent = self._sent.pop(call.id, None)
        missing = self.missing_cell(call.name, call.input)
        if missing is not None:
            if sent is not None:
                self._withdraw(call.id, sent)
            return Deny(missing)
        if not sent:  # not shown ahead (or its send was cut short)
            sent = self._send(call.id, call.name, dict(call.input), request.assessment,
                              accepted=False)  # fmt: skip
            if sent is not None:
                self._send_ahead(call)
        answer = self.page.answer(sent, None) if sent is not None else None
        if answer is None:
            return Deny("the page showing the notebook closed before the proposal was decided")
        if answer.get("decision") != "accepted":
            reason = str(answer.get("reason") or "").strip()
            return Deny(reason or "rejected by the user")
        self._answer = answer
        source = answer.get("source")
        if isinstance(source, str) and source != request.call.input.get("source"):
            return ApproveEdited({**request.call.input, "source": source})
        return Approve()

    def _send_ahead(self, current: ToolCall) -> None:
        """Show the proposals that follow ``current`` in the model's response with it, as long
        as each is one the user would be asked about (the same pipeline decides each when its
        turn comes): they wait together, and Accept all decides them at once."""
        assert self.page is not None
        if "withdraw" not in self.page.operations or current.input.get("run"):
            return  # a cell that runs when accepted changes what the next ones would do
        last_add = current.id if current.name == "add_cell" else None
        for call in self.upcoming():
            input = dict(call.input)
            if call.name not in PROPOSAL_TOOLS or input.get("run") or call.id in self._sent:
                break
            if self.missing_cell(call.name, input) is not None:
                break
            request = self.would_ask(call)
            if request is None:
                break
            after = last_add if call.name == "add_cell" and not input.get("after") else None
            # Noted before it is sent: a Stop between the two still withdraws it at the end.
            self._sent[call.id] = ""
            sent = self._send(call.id, call.name, input, request.assessment, accepted=False,
                              after_proposal=after)  # fmt: skip
            if sent is None:
                del self._sent[call.id]
                break
            self._sent[call.id] = sent
            if call.name == "add_cell":
                last_add = call.id

    def finish(self) -> None:
        """The turn ended: proposals shown ahead of calls that never ran are withdrawn (a new
        cell goes, an edited cell stays as it was)."""
        if self.page is None:
            return
        for call_id, sent in list(self._sent.items()):
            self._withdraw(call_id, sent)
        self._sent.clear()

    def _withdraw(self, call_id: str, sent: str) -> None:
        assert self.page is not None
        self.page.forget(sent)
        self.page.request("withdraw", 5.0, cell_id=self.agent_cell, proposal=call_id)

    def _propose(
        self, call_id: str, tool: str, input: dict[str, Any], assessment: Assessment | None,
        *, accepted: bool,
    ) -> dict[str, Any] | None:  # fmt: skip
        assert self.page is not None
        sent = self._send(call_id, tool, input, assessment, accepted=accepted)
        return self.page.answer(sent, None) if sent is not None else None

    def _send(
        self, call_id: str, tool: str, input: dict[str, Any], assessment: Assessment | None,
        *, accepted: bool, after_proposal: str | None = None,
    ) -> str | None:  # fmt: skip
        assert self.page is not None
        source = str(input.get("source", ""))
        proposal: dict[str, Any] = {
            "id": call_id,
            "kind": "add" if tool == "add_cell" else "edit",
            "source": source,
            "risk": assessment.risk if assessment is not None else "",
            "reasons": [str(r) for r in assessment.reasons[1:]] if assessment else [],
            "provenance": provenance(self.agent_cell, call_id, source),
            "accepted": accepted,
            "run": bool(input.get("run")),  # accepting also runs it
        }
        if not accepted and self.ahead is not None and input.get("cell_type", "code") == "code":
            effect = self.ahead(source, str(input.get("cell_id")) if tool == "edit_cell" else None)
            if effect is not None:  # what it would change, or why it was not run ahead
                proposal["effect"] = effect.message()
        if tool == "add_cell":
            proposal.update(cell_type=input.get("cell_type", "code"), after=self._after(input))
            if after_proposal is not None:  # after the new cell of that proposal, while it waits
                proposal["after_proposal"] = after_proposal
        else:
            proposal["target"] = str(input.get("cell_id", ""))
        return self.page.send("propose", cell_id=self.agent_cell, proposal=proposal)

    def _after(self, input: Mapping[str, Any]) -> str:
        after = input.get("after")
        if isinstance(after, str) and after:
            return after
        return self.added[-1] if self.added else (self.agent_cell or "")

    def missing_cell(self, tool: str, input: Mapping[str, Any]) -> str | None:
        """Why a proposal cannot be placed (a cell id the notebook does not have), or None."""
        field_name = "after" if tool == "add_cell" else "cell_id"
        cell_id = input.get(field_name)
        if not isinstance(cell_id, str) or not cell_id or cell_id in self.added:
            return None
        if tool == "edit_cell" and cell_id == self.agent_cell and not self.assist:
            return "an agent cell's source is the user's task: propose a new cell instead"
        known = self.view_ids()
        if known is not None and cell_id not in known:
            return (f"the notebook has no cell with id {cell_id!r} ({field_name}); read_notebook "
                    "lists the cells and their ids")  # fmt: skip
        return None

    # -- what a proposal that passed the pipeline does ---------------------------------------

    def apply(self, call_id: str, tool: str, input: dict[str, Any]) -> str | list[Block]:
        """The result the model reads for an accepted proposal (and, where the page has not
        shown it yet, the proposal sent as accepted)."""
        answer, self._answer = self._answer, None
        if answer is None:  # not shown to anyone: accepted by the policy or a grant
            missing = self.missing_cell(tool, input)
            if missing is not None:
                raise ToolFailure(missing)
        source = str(input.get("source", ""))
        edited = answer is not None and answer.get("source") != source  # never: the edit ran
        if answer is None and self.page is not None:  # accepted by the policy or a grant
            answer = self._propose(call_id, tool, input, None, accepted=True)
            if answer is None or answer.get("decision") != "accepted":
                raise ToolFailure("the page did not apply the proposal (it closed or refused it)")
        if tool == "add_cell":
            where = self._after(input)
            cell_id = self._new_id(answer, source)
            self.added.append(cell_id)
            said = f"accepted: added cell {cell_id} after {where}" + _by_user(answer, edited)
            before = self.undo.latest if self.undo is not None else None
            try:
                runs = self.runs is not None
                if input.get("run") and runs and input.get("cell_type") == "code":
                    return self._run_added(said, cell_id, source)
                return said
            finally:
                ran = self.undo.latest if self.undo is not None else None
                self._undoable(
                    cell_id, source, answer, ran if ran is not before else None, adding=True
                )
        target = str(input.get("cell_id", ""))
        self._undoable(target, source, answer, None, adding=False)
        return f"accepted: cell {target} now has the proposed source" + _by_user(answer, edited)

    def _undoable(
        self, cell_id: str, source: str, answer: Mapping[str, Any] | None,
        step: StepChanges | None, *, adding: bool,
    ) -> None:  # fmt: skip
        """Make the accepted cell (and what its run did, ``step``) the step Undo takes back,
        where the page can take a cell back."""
        page = self.page
        if self.undo is None or page is None or answer is None:
            return
        previous = answer.get("previous")
        if "revert_cell" not in page.operations or not (adding or isinstance(previous, str)):
            return
        what = f"{'added' if adding else 'edited'} cell {cell_id}"
        fields: dict[str, Any] = {"target": cell_id, "source": str(answer.get("source", source))}
        if adding:
            fields["kind"] = "add"
        else:
            fields.update(kind="edit", previous=previous,
                          previous_provenance=answer.get("previous_provenance"))  # fmt: skip
        agent_cell = self.agent_cell

        def revert() -> str:
            done = page.request("revert_cell", cell_id=agent_cell, **fields)
            if done is None:
                return (f"cell {cell_id} left as it is: it was changed since the step, or its "
                        "page is closed")  # fmt: skip
            if adding:
                return f"removed cell {cell_id} (added by the step)"
            return f"cell {cell_id} has its source from before the step again"

        self.undo.edited(NotebookEdit(what, revert), step)

    def _run_added(self, said: str, cell_id: str, source: str) -> list[Block]:
        """Run the accepted cell (its accepted source): the model reads both."""
        assert self.runs is not None
        try:
            content = self.runs.run(cell_id, source)
        except ToolFailure as exc:
            raise ToolFailure(f"{said}; running it failed:\n{exc}") from None
        return [{**content[0], "text": f"{said}; it ran.\n{content[0]['text']}"}, *content[1:]]

    def _new_id(self, answer: Mapping[str, Any] | None, source: str) -> str:
        given = answer.get("cell_id") if answer is not None else None
        if isinstance(given, str) and given:
            return given
        return proposed_cell_id(self.agent_cell or "", len(self.added) + 1, source)


_ADDED = re.compile(r"added cell (\S+) after ")


def where_now(calls: Sequence[ToolCallRecord], view: Mapping[str, Any] | None) -> list[str]:
    """For a replay: one line per cell the saved turn's ``calls`` added or changed, saying whether
    the notebook (``view``, from read_notebook; None: unknown) still has it as accepted."""
    made = [c for c in calls
            if c.name in PROPOSAL_TOOLS and not c.is_error and c.decision.kind != "denied"]  # fmt: skip
    if not made:
        return []
    if view is None:
        return [f"this turn made {len(made)} proposed cells; the replay does not propose them again"
                if len(made) > 1 else
                "this turn made a proposed cell; the replay does not propose it again"]  # fmt: skip
    cells = {str(c.get("id")): c for c in view.get("cells") or [] if isinstance(c, Mapping)}
    notes = []
    for call in made:
        found = _ADDED.search(call.output_summary) if call.name == "add_cell" else None
        cell_id = found.group(1) if found else str(call.input.get("cell_id", ""))
        if not cell_id:
            continue
        what = "added" if call.name == "add_cell" else "changed"
        source = str(call.input.get("source", ""))
        now = cells.get(cell_id)
        if now is None:
            state = "was deleted since"
        elif now.get("source_chars") != len(source) or now.get("source") != source[:SOURCE_CHARS]:
            state = "was edited since; the replay leaves it as it is"
        else:
            state = "is in the notebook as accepted"
        notes.append(
            f"cell {cell_id}, {what} by this turn, {state}; the replay does not propose it again"
        )
    return notes


def _by_user(answer: Mapping[str, Any] | None, edited: bool) -> str:
    if answer is None:
        return " (by the approval policy; qloop run writes it into the output notebook)"
    return " by the user" + (", with the user's edits shown above" if edited else "")


@dataclass
class _ByTool:
    proposals: CellProposals
    others: Approver

    def decide(self, request: Request) -> Decision:
        if not isinstance(request, ApprovalRequest):
            return self.others.decide(request)
        if request.call.name in PROPOSAL_TOOLS and self.proposals.interactive:
            return self.proposals.decide(request)
        return self.others.decide(request)

    # Any: the other approver's extras (the card's cards, hints) stay reachable as they are
    def __getattr__(self, name: str) -> Any:
        return getattr(self.others, name)


def proposal_tools(proposals: CellProposals) -> list[Tool]:
    """add_cell and edit_cell, deciding through ``proposals``; where the page takes a cell's
    outputs, add_cell may also run the accepted cell, and run_cell runs an existing one."""

    def add_cell(
        source: str, cell_type: Literal["code", "markdown"] = "code", after: str | None = None
    ) -> str | list[Block]:
        """Propose a new notebook cell for work the user will keep (a cleaning step, a plot, a
        model fit, an explanation in markdown). The user sees it in the notebook and accepts or
        rejects it; an accepted cell is an ordinary cell and does not run by itself. To look at
        data or check something, use run_code instead.

        Args:
            source: the cell's source
            cell_type: code or markdown
            after: the id of the cell to put it after (default: after this agent cell, or after
                the last cell this turn added)
        """
        return proposals.apply(_current_call(), "add_cell", {
            "source": source, "cell_type": cell_type, "after": after})  # fmt: skip

    def add_cell_that_runs(
        source: str,
        cell_type: Literal["code", "markdown"] = "code",
        after: str | None = None,
        run: bool = False,
    ) -> str | list[Block]:
        """Propose a new notebook cell for work the user will keep (a cleaning step, a plot, a
        model fit, an explanation in markdown). The user sees it in the notebook and accepts or
        rejects it (in a headless run, the approval policy decides); an accepted cell is an
        ordinary cell. With run, accepting it also runs it: its outputs land in the cell and you
        read them, with what it did to the variables. To look at data or check something, use
        run_code instead.

        Args:
            source: the cell's source
            cell_type: code or markdown
            after: the id of the cell to put it after (default: after this agent cell, or after
                the last cell this turn added)
            run: run the code cell once it is accepted (its risk class is then the code's)
        """
        return proposals.apply(_current_call(), "add_cell", {
            "source": source, "cell_type": cell_type, "after": after, "run": run})  # fmt: skip

    def edit_cell(cell_id: str, source: str) -> str | list[Block]:
        """Propose a new source for an existing cell (read_notebook gives the ids). The user sees
        the change as a diff in the notebook and accepts or rejects it.

        Args:
            cell_id: the id of the cell to change
            source: the cell's whole new source
        """
        return proposals.apply(_current_call(), "edit_cell", {"cell_id": cell_id, "source": source})

    def classify(input: dict[str, Any]) -> Assessment:
        kind = str(input.get("cell_type", "code"))
        code = (
            proposals.classify_code({"code": input.get("source", "")}) if kind == "code" else None
        )
        edit = _notebook_edit(code, kind)
        if input.get("run") and code is not None:  # accepting runs it: the code's class counts
            if severity(code.risk) > severity(edit.risk):
                return Assessment(code.risk, edit.reasons, code.may_change)
            return Assessment(edit.risk, edit.reasons, code.may_change)
        return edit

    runs = proposals.runs
    adding = add_cell_that_runs if runs is not None else add_cell
    tools = [
        Tool.from_function(adding, name="add_cell", editable_field="source", classify=classify),
        Tool.from_function(edit_cell, editable_field="source", classify=classify),
    ]
    if runs is not None:
        tools.append(run_cell_tool(runs, proposals.classify_code))
    return tools


def _current_call() -> str:
    """The id of the tool call being run (the runtime sets it around each call)."""
    return running_call_id() or ""
