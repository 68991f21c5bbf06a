"""A proposal's data effect before it is accepted: its code run ahead, then taken back.

Where the page shows a proposed code cell (an ``edit_cell`` or a code ``add_cell``) and the code's
class is ``read`` or ``write``, the one pipeline is asked about a ``run_code`` step of that code as
it would decide one (the policy, the admin floor's ``always_ask``, the grants; nobody is asked).
Where it would run without asking, the code runs as a step runs (the same ``CodeRunner``, under the
undo snapshot and the step guard) for at most ``AHEAD_S``, and its changes report is taken. It runs
on the snapshot's copies of the variables it may change (code the snapshot cannot copy entirely is
not run), and afterwards every name is bound to its own object again and the names it made are
gone: the namespace is exactly as before, aliases included, which the fingerprints confirm. The
proposal carries the report's lines ("would change: df: DataFrame 5×1 → 5×2, added column b"), or
why it was not run ahead. What the code printed or displayed is dropped, nothing of it reaches the
cell or the record, the model is not told, and the undo log is as it was (the run is no step Undo
could take back). ``qloop run`` runs nothing ahead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..messages import ToolCall
from ..policy.permissions import Approve
from ..redact import redact_text
from ..text import clip
from ..values.fingerprint import change_lines, fingerprint
from .code import CodeRunner
from .deadline import StepStopped
from .display import line

if TYPE_CHECKING:
    from ..policy.permissions import ApprovalRequest
    from ..settings import Settings
    from ..tools.runtime import ToolRuntime
    from .cell import CellContext
    from .code import Ran
    from .session import KernelSession
    from .tools import NotebookSource
    from .undo import Snapshot, StepChanges, UndoLog

AHEAD_S = 10.0  # a proposal's code runs ahead at most this long, then it is interrupted
AHEAD_CLASSES = ("read", "write")  # only code of these classes is run ahead
ERROR_CHARS = 300  # the error of a run ahead is cut here
AHEAD_CALL = "run-ahead"  # the id of the run_code call the pipeline is asked about


@dataclass(frozen=True)
class Effect:
    """What a proposal's code would change: ``changes``, one line per variable, from a run ahead
    that was taken back; or ``note``, why it was not run ahead, or not to its end."""

    changes: tuple[str, ...] = ()
    note: str = ""

    def message(self) -> dict[str, Any]:
        """The ``effect`` of a ``propose`` message (``protocol_schema.ProposalEffect``)."""
        return {"changes": list(self.changes), "note": self.note}


class AheadHost(Protocol):
    """What a run ahead needs of the kernel's agent (``agent.KernelAgent``)."""

    @property
    def session(self) -> KernelSession: ...

    def notebook_source(self, cell: CellContext | None) -> NotebookSource | None: ...


def run_ahead(
    agent: AheadHost, runtime: ToolRuntime, settings: Settings, cell: CellContext
) -> RunAhead | None:
    """What runs the turn's proposals ahead: the turn's runtime (its pipeline, guard and run_code
    tool) and a code runner like its steps'; None where nobody sees proposals (``qloop run``)."""
    if not cell.interactive:
        return None
    session = agent.session
    limit = min(settings.code_timeout or AHEAD_S, AHEAD_S)
    runner = CodeRunner(session.shell, timeout_s=limit, private=session.private_variables())
    return RunAhead(runtime, runner, session.undo, agent.notebook_source(cell))


@dataclass
class RunAhead:
    """Runs a proposed cell's code ahead and takes the run back (see the module's notes)."""

    runtime: ToolRuntime  # the turn's: the pipeline decides as for its run_code steps
    runner: CodeRunner
    undo: UndoLog
    notebook: NotebookSource | None = None  # the view that says an edited cell's type

    def __call__(self, source: str, target: str | None = None) -> Effect | None:
        """The effect of the proposed code cell ``source`` (``target``: the cell an edit
        changes); None where that cell is not a code cell."""
        tool = self.runtime.tools.get("run_code")
        if tool is None:
            return Effect(note="not run ahead: this turn runs no code")
        call = ToolCall(AHEAD_CALL, "run_code", {"code": source})
        request = self.runtime.request(tool, call, {"code": source})
        why = self.why_not(request)
        if why is not None:
            return Effect(note=f"not run ahead: {why}")
        if target is not None and not self._code_cell(target):
            return None  # asked only before running: the page shows no effect on other cells
        return self._run(source, request)

    def _code_cell(self, target: str) -> bool:
        """Whether the notebook's cell ``target`` is a code cell (False where unknown)."""
        view = self.notebook([target], False) if self.notebook is not None else None
        cells = view.get("cells") if isinstance(view, dict) else None
        found = [c for c in cells or [] if isinstance(c, dict) and c.get("id") == target]
        return bool(found) and found[0].get("cell_type") == "code"

    def why_not(self, request: ApprovalRequest) -> str | None:
        """Why the pipeline would not run ``request`` without asking anyone (None: it would)."""
        risk = request.risk or "unknown"
        if risk not in AHEAD_CLASSES:
            return f"its class is {risk}"
        pipeline = self.runtime.pipeline()
        permission = pipeline.settle(request)
        if permission is not None and isinstance(permission.decision, Approve):
            return None
        held = pipeline.held(request)
        if held is not None:
            return held
        name = pipeline.policy.name
        if permission is None:
            return f"the policy '{name}' asks before {risk} steps"
        return f"the policy '{name}' does not run {risk} steps"

    def _run(self, source: str, request: ApprovalRequest) -> Effect:
        namespace = self.runner.shell.user_ns
        with self.undo.aside():
            snapshot = self.undo.prepare(source, request.assessment)
            cannot = snapshot.notice()
            if cannot is not None:
                return Effect(note=f"not run ahead: it {cannot}")
            before = dict(namespace)
            swap_in_copies(snapshot, namespace)
            started = time.monotonic()
            try:
                ran, breach = self._execute(source)
            finally:
                put_back(namespace, before)
            took = time.monotonic() - started
        if isinstance(ran.error, KeyboardInterrupt):
            raise KeyboardInterrupt  # the user's interrupt ends the turn
        with ran.redacting():  # the private values the code saw are redacted too
            changes = tuple(redact_text(text) for text in change_lines(ran.step.changes))
            note = self._note(ran.error, breach, took)
        left = not_as_before(ran.step, namespace)
        if left:
            said = "its run ahead could not be taken back entirely: " + "; ".join(left)
            line(said, "warn")
            note = f"{note}; {said}" if note else said
        return Effect(() if note else changes, note)

    def _execute(self, source: str) -> tuple[Ran, str | None]:
        """Run ``source`` as a step runs, inside the turn's step guard (what it printed is
        kept by the runner, never shown)."""
        guard = self.runtime.guard
        if guard is not None:
            guard.before(self.runtime)
        breach = None
        try:
            ran = self.runner.execute(source, own_result=True)
        finally:
            if guard is not None:
                breach = guard.after(self.runtime)
        return ran, breach

    def _note(self, error: BaseException | None, breach: str | None, took: float) -> str:
        """Why the run ahead says no changes: it raised, ran out of time or was stopped."""
        if breach is not None:  # the guard put it back: the turn goes on, the bar says so
            return "run ahead, it changed how approval works; that was put back"
        limit = self.runner.timeout_s or AHEAD_S
        if isinstance(error, StepStopped) and took >= limit:
            return f"not run ahead to its end: it took longer than {limit:g} s and was interrupted"
        if isinstance(error, StepStopped):
            return f"not run ahead to its end: {error}"
        if error is not None and not isinstance(error, KeyboardInterrupt):
            said = redact_text(clip(f"{type(error).__name__}: {error}", ERROR_CHARS))
            return f"run ahead, it raised {said}"
        return ""


def swap_in_copies(snapshot: Snapshot, namespace: dict[str, Any]) -> None:
    """Bind each variable the code may change to its snapshot's copy, so the code changes the
    copies and the objects themselves (and every other name or container holding them) stay as
    they are; the snapshot is told, so it describes the namespace the code runs in."""
    for name, saved in snapshot.saved.items():
        if name in namespace and namespace[name] is not saved.value:
            namespace[name] = saved.value
            snapshot.identities[name] = id(saved.value)


def put_back(namespace: dict[str, Any], before: dict[str, Any]) -> None:
    """Make ``namespace`` bind exactly what it bound ``before``: the names the run added go, the
    others hold their own objects again."""
    for name in [n for n in namespace if n not in before]:
        del namespace[name]
    for name, value in before.items():
        if namespace.get(name, _MISSING) is not value:
            namespace[name] = value


_MISSING = object()


def not_as_before(step: StepChanges, namespace: dict[str, Any]) -> list[str]:
    """The variables the run changed whose fingerprints are not as before it (an object changed
    through another name than its own); empty when every one is as it was."""
    prints = step.snapshot.prints
    return [
        f"{change.name} is not as before"
        for change in step.changes
        if change.name in prints
        and change.name in namespace
        and fingerprint(namespace[change.name]) != prints[change.name]
    ]
