"""KernelAgent: one per kernel. Wires a cell's turn together: model, tools, approval, display, store."""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from IPython.core.error import UsageError

from ..conversation import ConversationManager
from ..loop import CancelToken
from ..mcp.config import McpConfigError
from ..mcp.servers import McpServers
from ..messages import Interrupted, TurnResult
from ..model import AnthropicModel
from ..notebook_view import select
from ..policy.admin import AdminError, admin_floor
from ..policy.grants import Grants, Scope
from ..policy.permissions import (
    HEADLESS_HINT,
    ApprovalPolicy,
    Policy,
    PolicyDenier,
    policy_approver,
)
from ..policy.pipeline import Provenance
from ..pricing import UnknownModelPrice
from ..providers import DEFAULT_PROVIDER, ProviderError, ProviderName, missing_setting
from ..records import MIME_TYPE, RecordError, load_record
from ..records.drift import FingerprintingObserver, TurnPrints
from ..records.history import AnnotatedStore
from ..redact import redact_text, redacted_output
from ..settings import Settings
from ..tools.runtime import ToolRuntime
from .ahead import run_ahead
from .approval import CardApprover, show_unasked
from .cell import AgentError, CellContext, current_cell, store_for
from .cell_runs import CELL_OPS, CellPort, CellRuns, PagePort, RunnerPort
from .changes import ChangesStore, StepOutcomes, StepViews, UndoNotices
from .code import CodeRunner
from .context_turn import turn_context
from .deadline import TurnWatch
from .display import TurnDisplay, line
from .guard import StepGuard
from .ledger import cell_ledger
from .mcp import review_project_files
from .notebook_grants import NotebookGrantStore, notebook_notice
from .plan import PLAN_TOOLS, PlannedStore, Plans, plan_task
from .proposals import CellProposals, proposal_tools, where_now
from .replay import replay, replay_policy, replay_steps
from .threaded import ThreadedModel
from .tools import BuiltinTools, code_classifier
from .undo import note_in_conversation

if TYPE_CHECKING:
    from ..records import CellRecord
    from ..records.schema import PlanRecord
    from ..tools.runtime import Tool
    from .session import KernelSession
    from .tools import NotebookSource
    from .undo import UndoLog, UndoReport

_T = TypeVar("_T")
ASK_WITHOUT_RECORD = "QLOOP_ASK_WITHOUT_RECORD"  # ask the model where the client sends no metadata
NO_METADATA = (
    "this client sent no cell metadata (plain `jupyter execute`, nbconvert or papermill), so the "
    "kernel cannot see the cell's saved record and will not ask the model instead. Replay with "
    "`qloop run NOTEBOOK`, `papermill --engine qloop IN OUT` or `jupyter nbconvert --to notebook "
    "--execute --Exporter.default_preprocessors=qloop_kernel.headless.ReplayPreprocessor "
    f"NOTEBOOK`; to ask the model anyway, set {ASK_WITHOUT_RECORD}=1 or add --fresh to the cell"
)


@dataclass(frozen=True)
class CellOptions:
    settings: Settings
    fresh: bool = False
    new: bool = False
    attach: tuple[str, ...] = ()  # --with items: files, variables, @cell-ids
    plan: bool = False  # --plan: answer with a numbered plan, run nothing
    run_plan: bool = False  # --run-plan: the task is the last plan (or the cell's edited one)


class KernelAgent:
    """The agent of one kernel: wires each cell's turn from the kernel's session."""

    def __init__(self, session: KernelSession, settings: Settings) -> None:
        self.session = session
        self.shell = session.shell
        self.base_settings = settings  # from config and environment: the policy for hidden code
        self.manager = ConversationManager(settings=settings)
        self.watch: TurnWatch | None = (
            None  # the running turn's TurnWatch: bounds each step (deadline.py)
        )
        self.step_running = False  # an approved step runs: qloop commands are refused (guard.py)
        self.saved_records: dict[str, Any] = {}  # cell id -> its saved record as last sent
        self.grants = Grants()  # what runs without a card: cell, session and notebook grants
        self.notebook_grants = NotebookGrantStore(self.grants)
        self.turn_running = False  # undo waits until the turn has ended
        self.rules_declined: set[tuple[str, str]] = set()  # rules files declined this session
        self.undo = self._undo_log()
        self.mcp = _mcp_servers(session)
        self._builtins: BuiltinTools | None = None  # built with the first turn, bound to each
        self.plans = Plans()  # the last plan a ``%%agent --plan`` turn answered (plan.py)
        session.agent = self  # a reloaded extension's agent replaces the earlier one

    @property
    def step_running(self) -> bool:
        return self._step_running

    @step_running.setter
    def step_running(self, running: bool) -> None:
        """Set by the step guard around each step: the turn's watch bounds what runs between."""
        self._step_running = running
        if self.watch is not None and running:
            self.watch.step_begins()
        elif self.watch is not None:
            self.watch.step_ends()

    def _undo_log(self) -> UndoLog:
        """The kernel's undo log, told this session's budget, and whom to tell of an undo."""
        log = self.session.undo
        log.budget = lambda: self.manager.settings.undo_budget_bytes()
        log.device_budget = lambda: self.manager.settings.undo_device_budget_bytes()
        log.turn_running = lambda: self.turn_running
        log.on_step, log.on_undone = [], []  # a reloaded extension replaces the earlier agent's
        log.on_undone.append(self._tell_model)
        self.step_views = StepViews(log)
        return log

    def _tell_model(self, report: UndoReport) -> None:
        """The model reads what was undone in its next turn, with the result of the undone step."""
        note_in_conversation(self.manager.messages, report.call_id, report.model_note())

    def tools(
        self,
        settings: Settings,
        cell: CellContext | None = None,
        proposals: CellProposals | None = None,
    ) -> list[Tool]:
        """The turn's tools; read_notebook only where the running cell's notebook can be read,
        add_cell and edit_cell where proposals can be shown or applied."""
        if self._builtins is None:
            self._builtins = BuiltinTools(self.shell, session=self.session)
        builtin = self._builtins.for_turn(
            code_timeout_s=settings.code_timeout,
            notebook=self.notebook_source(cell),
            running_cell=cell.cell_id if cell is not None else None,
        )
        cells = proposal_tools(proposals) if proposals is not None else []
        return builtin + cells + self.mcp_tools()

    def cell_proposals(self, cell: CellContext, settings: Settings) -> CellProposals | None:
        """Where the agent may propose cells: a page whose extension shows proposals, or
        ``qloop run`` (which sent the notebook's view and applies them); None elsewhere. Where
        the page also takes a cell's outputs, the agent may run cells (cell_runs.py)."""
        source = self.notebook_source(cell)
        if source is None or not cell.cell_id:
            return None
        page = None
        if cell.interactive:
            if "propose" not in self.notebook_grants.operations:
                return None
            page = self.notebook_grants

        def view_ids() -> list[str] | None:
            view = source(None, False)
            cells = view.get("cells") if isinstance(view, dict) else None
            return [str(c.get("id")) for c in cells] if isinstance(cells, list) else None

        port: CellPort | None = None
        if page is not None and page.operations >= CELL_OPS:
            port = PagePort(cell.cell_id, page)
        elif cell.headless and isinstance(cell.cells, dict):
            port = RunnerPort(cell.cells)
        runs = None
        if port is not None:
            private = self.session.private_variables()
            runner = CodeRunner(self.shell, settings.code_timeout, private, session=self.session)
            runs = CellRuns(cell.cell_id, port, runner)
        classify = code_classifier(self.shell)
        return CellProposals(cell.cell_id, page, view_ids, classify, runs=runs, undo=self.undo,
                             assist=cell.assist is not None)  # fmt: skip

    def notebook_source(self, cell: CellContext | None) -> NotebookSource | None:
        """What answers read_notebook for ``cell``: the view ``qloop run`` sent with it, or the
        extension of the page that sent it (asked at each call); None where neither exists (a
        console, a frontend without the extension, nbclient without ``qloop run``)."""
        if cell is None:
            return None
        view = cell.notebook
        if cell.headless and isinstance(view, dict):
            return lambda ids, outputs: select(view, ids, outputs)
        grants = self.notebook_grants
        if cell.interactive and "read_notebook" in grants.operations:
            return lambda ids, outputs: grants.request(  # the view holding the cell answers
                "read_notebook", cell_ids=ids, outputs=outputs, cell_id=cell.cell_id
            )
        return None

    def mcp_tools(self) -> list[Tool]:
        """The tools of the configured MCP servers (each connected on first use)."""
        try:
            if not self.mcp.configured():
                return []
            tools: list[Tool] = list(self.mcp.tools())
        except McpConfigError as exc:
            line(f"MCP: {exc}", "warn")
            return []
        for note in self.mcp.notes():
            line(note, "warn")
        return tools

    def _note_unrepeated(self, record: CellRecord) -> None:
        """Saved MCP calls a replay does not repeat (a tool not read-only, or its server not
        connected): the saved result stands, and the cell says so."""
        saved = [c for c in record.tool_calls if c.name.startswith("mcp__")]
        if not saved:
            return
        repeated = {c.id for c in replay_steps(record, {t.name: t for t in self.mcp_tools()})}
        for call in saved:
            if call.id not in repeated:
                line(f"{call.name}: the saved result is shown; the call was not repeated (only "
                     "read-only tools of a connected server are)", "warn")  # fmt: skip

    def _note_proposals(self, record: CellRecord, cell: CellContext) -> None:
        """A replay does not propose the saved turn's cells again: the cell says where each one
        it added or changed is now (kept as accepted, edited since, deleted since)."""
        source = self.notebook_source(cell)
        view = source(None, False) if source is not None else None
        for note in where_now(record.tool_calls, view):
            line(note, "warn")

    def replay_runtime(self, policy: ApprovalPolicy | None = None) -> ToolRuntime:
        """The turn's tools under the replay's ``policy``: the pipeline decides each saved step by
        the replay's approval (its card, Run All's, a grant or the policy), given as an input."""
        policy = policy or ApprovalPolicy()
        return ToolRuntime.of(
            self.tools(self.manager.settings), PolicyDenier(policy.name, policy.hint),
            policy=policy, guard=StepGuard(self), provenance=Provenance(approved="replay"),
        )  # fmt: skip

    def policy_for(self, settings: Settings, cell: CellContext) -> Policy:
        return settings.approve or ("ask" if cell.interactive else "readonly")

    def runtime_for(self, settings: Settings, cell: CellContext, tools: list[Tool]) -> ToolRuntime:
        """The turn's ToolRuntime: the policy by risk class, the grants, and the card when someone
        can click (every call that runs without one is shown, with its code)."""
        name = self.policy_for(settings, cell)
        scopes: tuple[Scope, ...] = ("cell", "session")
        if self.notebook_grants.available:
            scopes += ("notebook",)
        card = CardApprover(scopes=scopes, cell_id=cell.cell_id) if cell.interactive else None
        hint = HEADLESS_HINT if not cell.interactive else INTERACTIVE_HINT
        policy = ApprovalPolicy(name, cell.interactive, settings.ask_read, hint)
        approver = policy_approver(name, card)
        if card is not None and approver is card:  # the card says what cannot be undone
            approver = UndoNotices(card, self.undo)
        return ToolRuntime.of(
            tools, approver, grants=self.grants, policy=policy,
            cell_id=cell.cell_id, guard=StepGuard(self),
            on_unasked=show_unasked if cell.interactive else None,
        )  # fmt: skip

    def load_notebook_grants(self, cell: CellContext) -> None:
        """Read the grants of the cell's notebook once per frontend connection, and say so."""
        saved = self.notebook_grants.load(cell)
        self.notebook_grants.use_cell(cell)
        notice = notebook_notice(saved) if saved is not None else None
        if notice is not None:
            line(*notice)

    def run_cell(self, prompt: str, options: CellOptions) -> TurnResult | None:
        """Replay the cell's saved turn, or run a new one; what the cell shows is redacted."""
        cell = current_cell(self.shell)
        return self.guarded(cell, lambda: self._run_cell(prompt, options, cell))

    def guarded(self, cell: CellContext, work: Callable[[], _T]) -> _T:
        """Run ``work`` (a turn of ``cell``) with what the cell shows redacted; a headless
        client gets a UsageError as an error it reports."""
        with redacted_output(self.shell, keep=(MIME_TYPE,)):  # records are redacted when built
            try:
                return work()
            except UsageError as exc:
                if cell.interactive or isinstance(exc, AgentError):
                    raise
                # Headless clients report only an error output's traceback: never a blank error.
                raise AgentError(str(exc)) from None

    def _run_cell(self, prompt: str, options: CellOptions, cell: CellContext) -> TurnResult | None:
        if options.new:
            self.manager.reset()
        task, prompt = prompt, plan_task(self.plans, prompt, options.plan, options.run_plan)
        if no_metadata(cell) and not options.fresh and os.environ.get(ASK_WITHOUT_RECORD) != "1":
            raise AgentError(NO_METADATA)
        if cell.cell_id and isinstance(cell.saved, dict):
            self.saved_records[cell.cell_id] = cell.saved  # for %agent history
        if cell.saved is not None and not options.fresh:
            try:
                record = load_record(cell.saved)
            except RecordError as exc:
                raise UsageError(str(exc)) from None
            # The saved prompt is redacted: compare it with the prompt as it would be saved.
            if record.prompt == redact_text(prompt) and record.replayable:
                self.load_notebook_grants(cell)
                self._note_unrepeated(record)
                self._note_proposals(record, cell)
                replay(self, record, replay_policy(self.base_settings, cell), cell)
                if options.plan:  # the replayed plan is the session's plan again
                    self.plans.keep_text(task, record.answer, cell.cell_id)
                return None
        kept = self.plans.record(task) if options.run_plan else None
        result = self.run_turn(
            prompt, options.settings, cell, options.attach, plan=options.plan, kept_plan=kept
        )
        if options.plan:
            self.plans.keep(task, result, cell.cell_id)
        return result

    def run_turn(
        self, prompt: str, settings: Settings, cell: CellContext, attach: tuple[str, ...] = (),
        *, plan: bool = False, kept_plan: PlanRecord | None = None,
    ) -> TurnResult:  # fmt: skip
        """A new turn of ``cell``; ``plan``: only the read tools (the answer is a plan);
        ``kept_plan``: a ``--run-plan`` turn's plan, kept in its record."""
        _check_floor(settings)
        _check_credentials(settings.provider)
        try:
            settings.resolved_price(settings.model)
        except UnknownModelPrice as exc:
            raise UsageError(str(exc)) from None
        policy = self.policy_for(settings, cell)
        self.load_notebook_grants(cell)
        review_project_files(self.mcp, cell)
        proposals = None if plan else self.cell_proposals(cell, settings)
        tools = self.tools(settings, cell, proposals)
        if plan:  # nothing runs before the plan is run: the read tools alone
            tools = [t for t in tools if t.name in PLAN_TOOLS]
        runtime = self.runtime_for(settings, cell, tools)
        if proposals is not None:  # the page decides the proposals, the card the rest
            runtime.approver = proposals.approver(runtime.approver)
            proposals.upcoming = lambda: runtime.upcoming
            proposals.would_ask = runtime.would_ask
            proposals.ahead = run_ahead(self, runtime, settings, cell)  # their data effect
        cards = {t.name for t in tools if t.requires_approval} if cell.interactive else set()
        cancel = CancelToken()
        watch = TurnWatch(settings.timeout, cancel)  # ends a running step on Stop or --timeout
        context = turn_context(self, cell, list(attach))  # rules (asked for) and attachments
        prints = TurnPrints(self.shell.user_ns, cells=cell_ledger(self.session).defined)
        prints.sources = context.sources()
        for name in (a.name for a in context.attachments if a.kind == "variable"):
            prints.inspected(name)
        annotated = AnnotatedStore(
            store_for(cell),
            previous=cell.saved,
            unseen=no_metadata(cell),
            fingerprint=lambda record: prints.build(final=record.status != "running"),
        )
        planned = PlannedStore(annotated, kept_plan)  # the plan proposed and run, where one is
        store = ChangesStore(planned, self.undo)  # each step's changes in the record
        view = TurnDisplay(
            interactive=cell.interactive,
            max_turns=settings.max_turns,
            cancel=cancel,
            cards_for=cards,
            grants=lambda: self.grants.summary(cell.cell_id),
        )
        if policy == "readonly" and not cell.interactive and settings.approve is None:
            line("headless run: only 'read' code steps run (policy 'readonly'); allow more with "
                 "`--approve write` or `--approve auto` (or QLOOP_APPROVAL)", "warn")  # fmt: skip
        model = ThreadedModel(_platform_model(settings))
        observer = StepOutcomes(
            watch.observing(FingerprintingObserver(view, prints)), self.step_views,
            cards=getattr(runtime.approver, "cards", None), interactive=cell.interactive,
        )  # fmt: skip
        self.turn_running, self.watch = True, watch
        try:
            result, _ = self.manager.run_turn(
                prompt, model=model, runtime=runtime, settings=settings, cell_id=cell.cell_id,
                observer=observer, cancel=cancel, store=store, context=context,
            )  # fmt: skip
        finally:
            self.turn_running, self.watch = False, None
            self.undo.discard()  # a snapshot prepared for a step that never ran
            if proposals is not None:
                proposals.finish()  # proposals shown ahead of calls that never ran
        if cell.cell_id and annotated.last is not None and cell.assist is None:  # %agent history
            self.saved_records[cell.cell_id] = annotated.last.model_dump(mode="json")
        view.finish(result)
        if result.stop == Interrupted("keyboard"):
            raise KeyboardInterrupt
        if result.status == "error":
            raise AgentError(f"the agent turn failed: {getattr(result.stop, 'message', '')}")
        return result


INTERACTIVE_HINT = "to be asked instead, re-run the cell with `--approve ask`"


def no_metadata(cell: CellContext) -> bool:
    """The request carried no cell id and no headless mark: nbclient, papermill or nbconvert."""
    return cell.cell_id is None and not cell.headless


def _check_floor(settings: Settings) -> None:
    """One line naming the admin setting when the turn's settings go below the admin floor (a
    cell's ``--approve``, ``--model`` or ``%agent set``; config and environment are checked when
    read)."""
    try:
        refusal = admin_floor().refusal(settings.provider, settings.model, settings.approve)
    except AdminError as exc:
        raise UsageError(str(exc)) from None
    if refusal is not None:
        raise UsageError(refusal)


def _check_credentials(provider: ProviderName = DEFAULT_PROVIDER) -> None:
    """One line naming what to set when the platform's region or credentials are missing."""
    missing = missing_setting(provider)
    if missing is not None:
        raise UsageError(missing)


def _mcp_servers(session: KernelSession) -> McpServers:
    """The session's MCP servers: kernel config's read at each use, the notebook's folder the
    kernel's working folder (where Jupyter starts it); stopped when the kernel exits."""
    servers = McpServers(config=session.mcp_config)
    held = weakref.ref(servers)

    def close() -> None:
        found = held()
        if found is not None:
            found.close()

    atexit.register(close)
    return servers


def _platform_model(settings: Settings) -> AnthropicModel:
    """The turn's model client on the settings' platform; a compatible server's missing
    features are switched off on first use, with one line in the cell."""
    try:
        model = AnthropicModel(settings.model, provider=settings.provider)
    except ProviderError as exc:
        raise UsageError(str(exc)) from None
    try:
        notes = model.capability_notes()
    except ProviderError as exc:
        model.close()
        raise UsageError(str(exc)) from None
    for note in notes:
        line(note, "warn")
    return model
