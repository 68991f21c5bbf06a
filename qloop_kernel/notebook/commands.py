"""The ``%agent`` sub-commands: help, status, set, models, price, allow, grants, revoke, reset, key,
history, export, context, undo, private, mcp, fix, explain, edit."""

from __future__ import annotations

import difflib
import getpass
import keyword
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from IPython.core.error import UsageError
from pydantic import ValidationError

from ..effective import effective_lines
from ..policy.grants import SCOPE_TEXT, SCOPES, Grant, Scope
from ..policy.risk import RISKS
from ..pricing import Price, known_models, price_figures, prices_as_of, retired_models
from ..records.history import describe
from ..redact import private_variables
from ..settings import SETTABLE
from ..text import counted
from .cell import current_cell
from .context_turn import next_turn_view
from .export import records_script
from .fix import edit_command, explain_command, fix_command, instruction_text
from .mcp import mcp_command
from .options import help_lines, setting_names

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..policy.risk import Risk
    from ..tools.runtime import Tool
    from .agent import KernelAgent


class AgentMagics(Protocol):
    """What a sub-command uses of the magics (``magic.AgentMagics``): the agent and the shell."""

    @property
    def agent(self) -> KernelAgent: ...

    @property
    def shell(self) -> InteractiveShell | None: ...


HELP = """\
%%agent [options]            the cell body is the task; the turn runs against this kernel
%agent [options] TASK        a one-line task
%agent help                  this list
%agent status                session: turns, tokens, cost, settings
%agent config                the settings in effect, where each comes from (admin, user,
                             notebook, magic), and the admin floor
%agent set NAME VALUE        change a setting ({settable})
%agent models                the known model ids with their price and status
%agent price IN OUT [CW CR]  USD per million input/output (and cache write/read) tokens, for a
                             model without a known price; cache prices default to its family's
%agent allow TOOL [CLASS|all] [session|notebook]
                             run TOOL's calls of CLASS (default write) and milder ones without
                             asking, for this session (default) or, saved, for this notebook
%agent grants                what runs without asking: grants by tool, class and scope
%agent revoke TOOL|all       remove the grants of TOOL (or all of them)
%agent reset                 start a fresh conversation; clears the session's and cells' grants
%agent key                   type the API key for this kernel (not shown, never saved)
%agent history               the earlier records the agent cells run in this kernel keep
%agent export                this session's approved agent steps as one plain code cell below
%agent context [full] [--with ITEM]
                             what the next turn sends besides the prompt: the system prompt
                             and rules files (where from, used or not), the tools and their
                             sizes, attached items, the conversation, the first request's
                             estimated tokens and cost; full: the system prompt's text too
%agent fix [CELL_ID]         ask the agent to fix the last failed cell (or CELL_ID): it reads
                             the cell, its traceback and variables, and proposes an edit
%agent explain CELL_ID       ask the agent to explain cell CELL_ID (and its error): read tools
                             only, nothing runs and nothing is proposed
%agent edit CELL_ID "TEXT"   ask the agent for an edit of cell CELL_ID, proposed as a diff
%agent undo                  put back what the last agent step changed; removes what it created
%agent private [NAME ...]    keep variables from the agent (tools refuse to show them); no NAME:
                             list them; --clear [NAME ...]: make them (or all) visible again
%agent mcp [add|remove|restart|trust|approve ...]
                             MCP servers whose tools the agent uses (docs/mcp.md)
options of %%agent and %agent TASK:
{options}
policies by risk class ({classes}):
  ask (a card per step; `%agent set ask_read off` runs 'read' steps without one), readonly
  ('read' steps run, the rest denied), write ('read' and 'write' run, the rest asks, or is denied
  headless), auto (everything runs), deny (nothing)
defaults for every cell: %config QloopAgent.model = 'ID', and the same for
  {config};
  or QLOOP_MODEL / QLOOP_PROVIDER / QLOOP_APPROVAL in the environment
examples:
  %agent what's in df?                      a one-line task
  %%agent --approve write --max-cost 0.50   a cell task that may change data, within $0.50
  %agent set max_turns 10                   at most 10 model calls per cell from now on
  %agent allow run_code read notebook       'read' code steps run without a card, saved
  %agent revoke run_code                    ask again for every run_code step
  %agent private api_token                  the tools refuse to show api_token"""


def help_text() -> str:
    """``%agent help``: the sub-commands, then the options (from options.py), policies, defaults."""
    return HELP.format(
        settable=", ".join(SETTABLE),
        options="\n".join(help_lines()),
        classes=", ".join(RISKS),
        config=", ".join(name for name in setting_names() if name != "model"),
    )


def _help(magics: AgentMagics, args: list[str]) -> None:
    print(help_text())


def _status(magics: AgentMagics, args: list[str]) -> None:
    manager = magics.agent.manager
    totals = manager.totals
    usage = totals.usage
    cost = f"${totals.cost_usd:.4f}" if totals.cost_known else "unknown (no price for the model)"
    settings = manager.settings.model_dump(exclude_none=True)
    print(
        f"session {manager.session_id}: {counted(totals.turns, 'turn')}, "
        f"{counted(totals.model_calls, 'model call')}"
    )
    print(
        f"tokens: {usage.input_tokens:,} input, {usage.output_tokens:,} output, "
        f"{usage.cache_read_input_tokens:,} cache read, {usage.cache_creation_input_tokens:,} "
        f"cache write; cost {cost}"
    )
    print(f"messages in the conversation: {len(manager.messages)}")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    granted = magics.agent.grants
    if len(granted):
        print("grants: " + "; ".join(g.describe() for g in granted) + " (`%agent grants`)")


def _config(magics: AgentMagics, args: list[str]) -> None:
    config = getattr(magics, "config_obj", None)  # the QloopAgent traits (magic.py)
    names = config.trait_names(config=True) if config is not None else []
    values = {name: getattr(config, name) for name in names}
    for text in effective_lines(values, os.environ, magics.agent.manager.settings):
        print(text)


def _set(magics: AgentMagics, args: list[str]) -> None:
    if len(args) != 2 or args[0] not in SETTABLE:
        raise UsageError(f"usage: %agent set NAME VALUE, NAME one of {', '.join(SETTABLE)}")
    name, value = args
    manager = magics.agent.manager
    empty = value.lower() in ("none", "off", "")
    try:
        manager.settings = manager.settings.updated(**{name: None if empty else value})
    except ValidationError as exc:
        raise UsageError(f"%agent set {name}: {exc.errors(include_url=False)[0]['msg']}") from None
    print(f"{name} = {getattr(manager.settings, name)}")


def _models(magics: AgentMagics, args: list[str]) -> None:
    current = magics.agent.manager.settings.model
    print(f"known models (prices as of {prices_as_of()}, USD per million tokens):")
    for model in known_models():
        mark = "*" if model.id == current else " "
        note = f"; {model.note}" if model.note else ""
        print(f"{mark} {model.id:<20} {model.status:<10} {model.price.describe()}{note}")
    retired = ", ".join(f"{r.id} (use {r.replacement})" for r in retired_models())
    print(f"retired, refused: {retired}")
    print("* the model in use; change it with `%agent set model ID` or `--model ID`")


def _price(magics: AgentMagics, args: list[str]) -> None:
    try:
        figures = price_figures(" ".join(args))
    except ValueError as exc:
        raise UsageError(f"%agent price: {exc}") from None
    manager = magics.agent.manager
    manager.settings = manager.settings.updated(price=figures)
    price = Price.from_figures(*figures, model=manager.settings.model)
    given = "" if len(figures) == 4 else f" (cache prices from the {manager.settings.model} ratios)"
    print(f"price: {price.describe()}{given}")


ALLOW_USAGE = (
    "usage: %agent allow TOOL [CLASS|all] [session|notebook], CLASS one of {classes} "
    "(for example: %agent allow run_code write)"
)


def _allow(magics: AgentMagics, args: list[str]) -> None:
    agent = magics.agent
    tool = _known_tool(agent, args[0], "allow")
    assert tool is not None  # no extra names: a tool, or refused
    words = list(args[1:])
    scope: Scope = "session"
    if words and words[-1] in SCOPES:
        scope = cast(Scope, words.pop())
    if scope == "cell":
        raise UsageError("%agent allow: a grant for one cell is made on that cell's approval card")
    if len(words) > 1 or (words and tool.classify is None and words[0] != "all"):
        raise UsageError(_allow_usage())
    risk = _granted_class(tool, words[0] if words else None)
    if scope == "notebook":
        _need_notebook(agent)
    grant = agent.grants.add(Grant(tool.name, risk, scope))
    every = (
        " (every class: deleting data and reaching outside the kernel too)" if risk is None else ""
    )
    print(f"{grant.what()}{every} now run without asking, for {SCOPE_TEXT[scope]}")
    if risk is not None:
        print(f"other {tool.name} steps still ask; `%agent revoke {tool.name}` removes the grant")


def _allow_usage() -> str:
    return ALLOW_USAGE.format(classes=", ".join(RISKS))


def _granted_class(tool: Tool, word: str | None) -> Risk | None:
    """The class ``%agent allow`` grants: None (every call) for "all" or an unclassified tool."""
    if tool.classify is None or word == "all":
        return None
    if word is None:
        return "write"
    if word not in RISKS:
        close = difflib.get_close_matches(word, RISKS, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise UsageError(f"%agent allow: {word!r} is not a risk class{hint}. {_allow_usage()}")
    return word


def _need_notebook(agent: KernelAgent) -> None:
    agent.load_notebook_grants(current_cell(agent.shell))
    if not agent.notebook_grants.available:
        raise UsageError(
            "%agent allow: this frontend cannot save grants in the notebook (it needs JupyterLab "
            "with the qloop-kernel extension); grant for the session instead"
        )


def _known_tool(
    agent: KernelAgent, name: str, command: str, *, extra: tuple[str, ...] = ()
) -> Tool | None:
    """The tool named ``name`` (None for a name in ``extra``); an unknown name is refused with the
    closest known names."""
    tools: dict[str, Tool] = {t.name: t for t in agent.tools(agent.manager.settings)}
    if name in tools:
        return tools[name]
    if name in extra:
        return None
    known = sorted([*tools, *extra])
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UsageError(
        f"%agent {command}: no tool is named {name!r}; {hint}(tools: {', '.join(known)})"
    )


def _grants(magics: AgentMagics, args: list[str]) -> None:
    agent = magics.agent
    cell = current_cell(magics.shell)
    agent.load_notebook_grants(cell)
    granted = list(agent.grants)
    print("grants (calls that run without an approval card):")
    for grant in granted:
        print(f"  {grant.describe()} (since {grant.granted_at[11:16] or '?'})")
    if not granted:
        print("  none")
    notebook = agent.grants.notebook
    if notebook.received:
        listed = "; ".join(g.what() for g in notebook.received)
        print(f"saved in this notebook but not applied ({notebook.problem}): {listed}")
    settings = agent.manager.settings
    policy = agent.policy_for(settings, cell)
    reads = "run without asking" if not settings.ask_read else "ask"
    print(f"policy: {policy}" + (f" ('read' steps {reads})" if policy == "ask" else ""))
    if granted or notebook.received:
        print("remove with `%agent revoke TOOL` or `%agent revoke all`")


def _revoke(magics: AgentMagics, args: list[str]) -> None:
    agent = magics.agent
    name = args[0]
    named = {g.tool for g in agent.grants} | {g.tool for g in agent.grants.notebook.received}
    if name != "all":
        _known_tool(agent, name, "revoke", extra=("all", *sorted(named)))

    agent.notebook_grants.use_cell(current_cell(magics.shell))
    gone = agent.grants.revoke(None if name == "all" else name)
    if not gone:
        print(f"no grants to revoke{'' if name == 'all' else f' for {name}'}")
        return
    print("revoked: " + "; ".join(g.describe() for g in gone))
    if any(g.scope == "notebook" for g in gone):
        print("the notebook's saved grants are updated (save the notebook to keep the change)")


def _reset(magics: AgentMagics, args: list[str]) -> None:
    agent = magics.agent
    manager = agent.manager
    messages, turns, calls = len(manager.messages), len(manager.records), manager.totals.turns
    cleared = agent.grants.clear_session()
    manager.reset()
    grants = "; ".join(g.describe() for g in cleared)
    print(
        f"fresh conversation (session {manager.session_id}): cleared {counted(messages, 'message')}, "
        f"{counted(turns, 'replayed turn')} and the totals of {counted(calls, 'turn')} from the "
        f"conversation, and {counted(len(cleared), 'grant')}" + (f" ({grants})" if grants else "")
    )
    kept = len(agent.grants.in_notebook())
    saved = counted(kept, "grant")
    notebook = f", {saved} saved in this notebook (`%agent revoke all`)" if kept else ""
    print(f"kept: settings, private variables{notebook}")


def _key(magics: AgentMagics, args: list[str]) -> None:
    value = getpass.getpass("Anthropic API key (not shown, not saved): ").strip()
    if not value:
        raise UsageError("no key entered")
    os.environ["ANTHROPIC_API_KEY"] = value
    print("API key set for this kernel")


def _context(magics: AgentMagics, args: list[str]) -> None:
    print(next_turn_view(magics.agent, args))


def _undo(magics: AgentMagics, args: list[str]) -> None:
    log = magics.agent.undo
    try:
        report = log.undo()
    except ValueError as exc:
        raise UsageError(f"%agent undo: {exc}") from None
    whose = f" (a step of {report.by})" if report.by else ""
    print(f"undone{whose}: " + "; ".join(report.lines()))


def _private(magics: AgentMagics, args: list[str]) -> None:
    private = private_variables(magics.agent.manager)
    clear = bool(args) and args[0] == "--clear"
    names = args[1:] if clear else args
    bad = [n for n in names if not n.isidentifier() or keyword.iskeyword(n)]
    if bad:
        raise UsageError(
            f"%agent private: {bad[0]!r} is not a variable name "
            "(usage: %agent private NAME [NAME ...], or --clear [NAME ...])"
        )
    if clear:
        private.names.difference_update(names or set(private.names))
    else:
        private.names.update(names)
    shown = ", ".join(sorted(private.names)) or "none"
    print(f"private variables (tools do not inspect or print them): {shown}")


def _history(magics: AgentMagics, args: list[str]) -> None:
    saved = magics.agent.saved_records
    if not saved:
        print("no saved agent cells have run in this kernel yet")
        return
    for cell_id, record in saved.items():
        print("\n".join(describe(cell_id, record)))
    print('restore one with "Restore an Earlier Agent Record…" in the cell\'s context menu')


def _export(magics: AgentMagics, args: list[str]) -> None:
    script = records_script(list(magics.agent.manager.records.values()))
    if not script:
        print("no agent turns in this session yet")
        return
    shell = magics.shell
    assert shell is not None  # a magic runs in its shell
    shell.set_next_input(script)  # a frontend puts it in a new cell below
    print(script)


def _mcp(magics: AgentMagics, args: list[str]) -> None:
    mcp_command(magics, args)


def _fix(magics: AgentMagics, args: list[str]) -> None:
    fix_command(magics.agent, args[0] if args else None)


def _explain(magics: AgentMagics, args: list[str]) -> None:
    explain_command(magics.agent, args[0])


def _edit(magics: AgentMagics, args: list[str]) -> None:
    edit_command(magics.agent, args[0], instruction_text(args[1:]))


def _quoted_instruction(words: list[str]) -> bool:
    """``%agent edit CELL_ID "..."``: a quoted instruction (unquoted words are a one-line task)."""
    return len(words) >= 2 and words[1][:1] in "\"'"


@dataclass(frozen=True)
class Command:
    """A sub-command and the numbers of words it takes; other word counts are a one-line task."""

    run: Callable[[Any, list[str]], None]
    arity: tuple[int, ...]
    takes: Callable[[list[str]], bool] = lambda words: True  # else the words are a task

    def matches(self, words: list[str]) -> bool:
        """Whether ``words`` (after the sub-command's name) are this command's."""
        return len(words) in self.arity and self.takes(words)


COMMANDS = {
    "help": Command(_help, (0,)),
    "status": Command(_status, (0,)),
    "config": Command(_config, (0,)),
    "set": Command(_set, (2,)),
    "models": Command(_models, (0,)),
    "price": Command(_price, (1, 2, 4)),
    "allow": Command(_allow, (1, 2, 3)),
    "grants": Command(_grants, (0,)),
    "revoke": Command(_revoke, (1,)),
    "reset": Command(_reset, (0,)),
    "key": Command(_key, (0,)),
    "history": Command(_history, (0,)),
    "export": Command(_export, (0,)),
    "undo": Command(_undo, (0,)),
    "fix": Command(_fix, (0, 1)),
    "explain": Command(_explain, (1,)),
    "edit": Command(_edit, tuple(range(2, 200)), takes=_quoted_instruction),
    "context": Command(_context, tuple(range(33))),  # never a task: its words are checked
    "private": Command(_private, tuple(range(33))),
    "mcp": Command(_mcp, tuple(range(65))),
}
