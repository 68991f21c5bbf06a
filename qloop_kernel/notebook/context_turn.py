"""A turn's context in the kernel: the rules files (asking once for an unseen project file), the
``--with`` attachments, and ``%agent context``'s view of the next request.

Interactive, a project rules file the user has not approved (or that changed since) is shown on a
card (its text, or the diff from the approved text) before the turn; the answer is remembered in
the user's own state by path and SHA-256. Headless, nobody can answer: such a file is left out
unless ``QLOOP_RULES=all``. The cell's first line says which rules were used and which skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from ..attachments import Attachment, AttachmentError, Sources, attach_all, split_items
from ..context import estimate_tokens
from ..context_rules import (
    RulesApprovals,
    RulesError,
    RulesUse,
    bounded,
    diff_lines,
    discover,
    notebook_folder,
    select,
    use_mode,
)
from ..errors import ToolInputError
from ..messages import ToolCall
from ..model import cache_minimum
from ..policy.permissions import ApprovalRequest, Approve
from ..pricing import UnknownModelPrice
from ..text import counted
from ..tools import namespace
from ..turn_context import ESTIMATE_METHOD, RequestEstimate, TurnContext, estimate_request
from .approval import CardApprover
from .cell import CellContext, current_cell
from .display import line
from .tools import session_private_variables

if TYPE_CHECKING:
    from ..conversation import ConversationManager
    from ..pricing import Price
    from ..settings import Settings
    from ..tools.runtime import Tool
    from .proposals import CellProposals
    from .session import KernelSession


class TurnAgent(Protocol):
    """What a turn's context reads of the kernel's agent (``agent.KernelAgent``, which imports
    this module: it is known here by this protocol)."""

    rules_declined: set[tuple[str, str]]  # rules files declined this session

    @property
    def shell(self) -> Any: ...  # Any: the IPython shell

    @property
    def session(self) -> KernelSession: ...

    @property
    def manager(self) -> ConversationManager: ...

    def load_notebook_grants(self, cell: CellContext) -> None: ...

    def cell_proposals(self, cell: CellContext, settings: Settings) -> CellProposals | None: ...

    def tools(
        self,
        settings: Settings,
        cell: CellContext | None = None,
        proposals: CellProposals | None = None,
    ) -> list[Tool]: ...


RULES_NOTICE = (
    "A project rules file goes into the agent's instructions on every turn in this project: it "
    "steers the code the agent writes. Approve to use it; you are asked again only if it changes."
)


def turn_context(agent: TurnAgent, cell: CellContext, items: list[str]) -> TurnContext:
    """The rules (asking where needed) and attachments of a turn about to run."""
    attachments = attachments_for(agent, items)
    rules = rules_for(agent, cell)
    show_rules_line(rules)
    return TurnContext(rules=rules, attachments=attachments)


def rules_for(agent: TurnAgent, cell: CellContext, *, ask: bool = True) -> list[RulesUse]:
    """Each rules file found and whether the turn uses it; asks on a card when ``ask`` and a
    person can click."""
    try:
        mode = use_mode()
    except RulesError as exc:
        raise UsageError(str(exc)) from None
    approvals = RulesApprovals.load()
    approvals.declined = agent.rules_declined
    uses = select(discover(), approvals, mode)
    if not (ask and cell.interactive):
        return uses
    decided = [_ask(use, approvals, cell) for use in uses]
    return bounded(decided)


def _ask(use: RulesUse, approvals: RulesApprovals, cell: CellContext) -> RulesUse:
    if use.status not in ("unapproved", "changed"):
        return use
    decision = CardApprover(allow_always=False, cell_id=cell.cell_id).decide(rules_request(use))
    if isinstance(decision, Approve):
        approvals.approve(use.file)
        return RulesUse(use.file, "used")
    approvals.decline(use.file)
    return RulesUse(use.file, "declined")


def rules_request(use: RulesUse) -> ApprovalRequest:
    """The approval card's request for one project rules file: its text, or what changed."""
    rules = use.file
    if use.status == "changed" and use.previous is not None:
        shown: dict[str, Any] = {"file": rules.path, "sha256": rules.sha256,
                                 "changed since you approved it": diff_lines(use.previous, rules.text)}  # fmt: skip
        title = f"Changed project rules {rules.path}"
    else:
        shown = {"file": rules.path, "sha256": rules.sha256, "text": rules.text.splitlines()}
        title = f"Project rules {rules.path}"
    call = ToolCall(f"rules-{rules.sha256[:16]}", "project_rules", shown)
    return ApprovalRequest(call=call, title=title, details={"notices": [RULES_NOTICE]})


def show_rules_line(uses: list[RulesUse]) -> None:
    """One line in the cell: the rules used and those skipped, and why."""
    uses = [u for u in uses if u.status != "off"]  # left out by the user's own setting
    if not uses:
        return
    used = [u.file.path for u in uses if u.used]
    skipped = [u for u in uses if not u.used]
    parts = [f"rules: {', '.join(used) if used else 'none used'}"]
    if skipped:
        why = "; ".join(u.describe() for u in skipped)
        hint = " (QLOOP_RULES=all uses them when nobody can approve)"
        unseen = any(u.status in ("unapproved", "changed") for u in skipped)
        parts.append(f"skipped: {why}" + (hint if unseen else ""))
    line("; ".join(parts), "warn" if skipped else "info")


def attachments_for(agent: TurnAgent, items: list[str]) -> list[Attachment]:
    """The ``--with`` items, attached; a bad one is one UsageError line and nothing is sent."""
    if not items:
        return []
    try:
        return attach_all(items, sources_of(agent))
    except AttachmentError as exc:
        raise UsageError(str(exc)) from None


def sources_of(agent: TurnAgent) -> Sources:
    """Where ``--with`` looks: the notebook's folder, the namespace (through the same summary and
    private-variable rules as ``inspect_variable``), the cells run in this kernel."""
    shell = agent.shell
    private = session_private_variables(shell)

    def summarize(name: str) -> str:
        if private.covers(name):
            raise AttachmentError(f"--with {name}: {name!r} is private (`%agent private`); "
                                  "the agent is not shown it")  # fmt: skip
        try:
            summary = namespace.inspect_variable(shell.user_ns, name)
        except ToolInputError as exc:
            raise AttachmentError(f"--with {name}: {exc}") from None
        return private.redactor(shell.user_ns).text(summary)

    def cell_source(cell_id: str) -> str | None:
        found = [source for run_id, source in agent.session.cells_run if run_id == cell_id]
        return found[-1] if found else None

    return Sources(notebook_folder(), shell.user_ns, summarize, cell_source)


CONTEXT_USAGE = "usage: %agent context [full] [--with ITEM[,ITEM...]]"


def next_turn_view(agent: TurnAgent, words: list[str]) -> str:
    """``%agent context``: what the next turn's first request holds besides the prompt; no
    model is called."""
    full, items = _context_words(words)
    settings = agent.manager.settings
    cell = current_cell(agent.shell)
    context = TurnContext(
        rules=rules_for(agent, cell, ask=False),
        attachments=attachments_for(agent, items),
    )
    manager = agent.manager
    history = manager.context_policy.apply(manager.messages)
    system = context.system(manager.system_prompt)
    opening = [b for a in context.attachments for b in a.blocks]
    estimate = estimate_request(
        settings.model, system=system, tools=turn_schemas(agent, settings, cell),
        messages=[*history, *([{"role": "user", "content": opening}] if opening else [])],
        max_tokens=settings.max_output_tokens, price=_price(settings),
    )  # fmt: skip
    lines = [f"next turn (model {settings.model}): what the model is sent besides your prompt"]
    lines += _system_lines(manager.system_prompt, estimate.system_text, context.rules)
    lines += _tool_lines(estimate)
    lines += _attached_lines(context.attachments)
    lines.append(f"conversation: {counted(len(history), 'earlier message')} "
                 f"(~{estimate_tokens(history):,} tokens)")  # fmt: skip
    lines += _estimate_lines(settings.model, estimate)
    if full:
        lines += ["", "system prompt as sent:", estimate.system_text]
    return "\n".join(lines)


def turn_schemas(agent: TurnAgent, settings: Settings, cell: CellContext) -> list[dict[str, Any]]:
    """The tools a turn run in ``cell`` would send, chosen as ``run_turn`` chooses them: the
    notebook's tools where the page (or ``qloop run``) offers them, the MCP servers' tools."""
    agent.load_notebook_grants(cell)  # what the page can do decides the notebook's tools
    proposals = agent.cell_proposals(cell, settings)
    return [tool.schema() for tool in agent.tools(settings, cell, proposals)]


def _context_words(words: list[str]) -> tuple[bool, list[str]]:
    full, given = False, []
    rest = list(words)
    while rest:
        word = rest.pop(0)
        if word == "full":
            full = True
        elif word == "--with" and rest:
            given.append(rest.pop(0))
        else:
            raise UsageError(f"%agent context: {word!r} is not understood. {CONTEXT_USAGE}")
    return full, split_items(given)


def _price(settings: Settings) -> Price | None:
    try:
        return settings.resolved_price(settings.model)
    except UnknownModelPrice:
        return None


def _system_lines(base: str, system: str, rules: list[RulesUse]) -> list[str]:
    lines = [f"system prompt: {len(system):,} characters (~{estimate_tokens(system):,} tokens): "
             f"the built-in instructions ({len(base):,} characters)"]  # fmt: skip
    if not rules:
        return [lines[0] + "; no rules files found (see docs/context.md for where they are read)"]
    lines[0] += ", then the rules files in this order:"
    return lines + [f"  {use.describe()}" for use in rules]


def _tool_lines(estimate: RequestEstimate) -> list[str]:
    sizes = estimate.tool_sizes()
    total = sum(t.chars for t in sizes)
    lines = [f"tools: {len(sizes)} ({total:,} characters, ~{total // 4:,} tokens)"]
    return lines + [f"  {t.name}: {t.chars:,} characters" for t in sizes]


def _attached_lines(attachments: list[Attachment]) -> list[str]:
    if not attachments:
        return ["attached: nothing (add files, variables or cells with %%agent --with ITEM)"]
    return ["attached (before the prompt):"] + [f"  {a.describe()}" for a in attachments]


def _estimate_lines(model: str, estimate: RequestEstimate) -> list[str]:
    cost = "unknown (no price for the model)"
    if estimate.cost_usd is not None:
        cost = f"${estimate.cost_usd:.4f} at the input price, nothing read from cache"
    cached = (
        "the tools and system prompt end in a cache breakpoint: later requests within 5 minutes "
        "read them from cache"
        if estimate.cached_prefix()
        else f"the tools and system prompt are shorter than {model}'s shortest cached prefix "
        f"({cache_minimum(model):,} tokens): not cached on their own"
    )
    return [
        f"first request: ~{estimate.tokens:,} input tokens besides the prompt ({ESTIMATE_METHOD}); "
        f"cost {cost}",
        f"cache: {cached}",
    ]
