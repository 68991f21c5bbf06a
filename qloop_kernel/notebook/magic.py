"""``%%agent`` and ``%agent``: parse options, hand the turn to the kernel's agent, show settings/status.

Defaults come from the environment (``QLOOP_MODEL``, ``QLOOP_APPROVAL``, ``QLOOP_PRICE``) and
traitlets config (``c.QloopAgent.model = ...``, which wins over the environment); a cell's options
(``options.py``) override them for one turn.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from traitlets.config import Configurable

from . import options  # the load imports nothing heavier (options.py, names.py)

if TYPE_CHECKING:  # types only: the agent's modules are imported with its first use
    from pydantic import ValidationError

    from ..settings import Settings
    from .agent import KernelAgent
    from .commands import Command
    from .session import KernelSession

QloopAgent = options.config_class()  # a trait per option that sets a default (options.py)


def _usage_error(message: str) -> NoReturn:
    raise UsageError(f"%%agent: {message}. Options: see `%agent help`")


def _parser() -> argparse.ArgumentParser:
    return options.parser(on_error=_usage_error)


split_options = options.split_options  # the public name tests and callers use


def base_settings(config: Configurable) -> Settings:
    """Settings from config and environment."""
    from ..settings import SettingsError, settings_from

    values = {name: getattr(config, name) for name in config.trait_names(config=True)}
    try:
        return settings_from(values, os.environ)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


@magics_class
class AgentMagics(Magics):
    """The agent magics of one IPython shell."""

    # Any: IPython's shell (Magics types it loosely)
    def __init__(self, shell: Any, session: KernelSession | None = None) -> None:
        super().__init__(shell)
        if session is None:
            from .session import session_for

            session = session_for(shell)
        self.session = session
        self.config_obj = QloopAgent(parent=shell)
        session.config = self.config_obj  # the MCP servers read their configuration from it
        session.agent = None  # a (re)loaded extension's agent is made anew, from this config
        session.make_agent = self._make_agent
        self.config_obj.observe(self._follow_config, names=self.config_obj.trait_names(config=True))
        if self.config_obj not in shell.configurables:
            shell.configurables.append(self.config_obj)  # listed by %config

    # Any: traitlets' change bunch (a dict subclass with attribute access)
    def _follow_config(self, change: Any) -> None:
        """``%config QloopAgent.NAME = value``: the running kernel's settings follow."""
        if self.session.agent is None:
            return  # the agent reads the config when it is made
        name = change["name"]
        if name == "mcp_servers":
            return  # read by the agent's MCP servers at each use
        base = base_settings(self.config_obj)
        agent = self.agent
        manager = agent.manager
        agent.base_settings = base
        manager.settings = manager.settings.updated(**{name: getattr(base, name)})

    def _make_agent(self) -> KernelAgent:
        from ..values.summaries import trust
        from .agent import KernelAgent

        agent = KernelAgent(self.session, base_settings(self.config_obj))
        trust.follow(self.session.trusted_reprs)  # what reads may call
        return agent

    @property
    def agent(self) -> KernelAgent:
        """The session's agent (made on first use, for every caller)."""
        from .agent import KernelAgent

        agent = self.session.kernel_agent()
        assert isinstance(agent, KernelAgent)
        return agent

    def _refuse_inside_a_step(self) -> None:
        if self.session.agent is not None and self.agent.step_running:
            raise UsageError(
                "%agent and %%agent cannot run inside an agent step: approval, settings and "
                "grants are changed only by you, between cells"
            )

    # The task and options are taken as typed: IPython's `$name` / `{expr}` expansion would put a
    # value of the namespace (a frame, a key) into the prompt the model receives.
    @cell_magic("agent")  # type: ignore[arg-type]  # IPython's decorator types expect Never
    @no_var_expand
    def agent_cell(self, line: str, cell: str) -> None:
        """%%agent [options]: run the cell body as a task for the agent."""
        self._refuse_inside_a_step()
        args, first_line = self._parse(line)
        self._run(args, (first_line + "\n" + cell).strip())

    @line_magic("agent")  # type: ignore[arg-type]
    @no_var_expand
    def agent_line(self, line: str) -> None:
        """%agent: settings, status, reset, allow TOOL, or a one-line task."""
        self._refuse_inside_a_step()
        words = line.split() or ["help"]
        found = _commands().get(words[0])
        if found is not None and found.matches(words[1:]):
            found.run(self, words[1:])
            return
        if _looks_like_a_command(words, self._argument_words):
            raise UsageError(_did_you_mean(words))
        args, prompt = self._parse(line)
        self._run(args, prompt)

    def _argument_words(self) -> set[str]:
        """Words a sub-command takes: tool and setting names, risk classes, scopes."""
        from ..policy.grants import SCOPES
        from ..policy.risk import RISKS
        from ..settings import SETTABLE

        tools = {t.name for t in self.agent.tools(self.agent.manager.settings)}
        return tools | set(SETTABLE) | set(RISKS) | set(SCOPES) | set(_commands()) | _VALUE_WORDS

    def _parse(self, line: str) -> tuple[argparse.Namespace, str]:
        words, prompt = options.split_options(line)
        return _parser().parse_args(words), prompt

    def _run(self, args: argparse.Namespace, prompt: str) -> None:
        from pydantic import ValidationError

        from .agent import CellOptions

        if args.discard_plan:  # Discard on the plan list: the kept plan goes, nothing runs
            if prompt or args.plan or args.run_plan:
                raise UsageError("%agent --discard-plan: takes no task and no other plan option")
            self.agent.plans.discard()
            return
        if not prompt and not args.run_plan:  # --run-plan alone runs the last plan
            raise UsageError(
                "%%agent: the task is empty: write what the agent should do in the cell"
            )
        # Options not given keep the session's settings.
        given = vars(args)
        overrides = {
            name: given[name] for name in options.setting_names() if given[name] is not None
        }
        try:
            settings = self.agent.manager.settings.updated(**overrides)
        except ValidationError as exc:
            raise UsageError(f"%%agent: {_first_error(exc)}") from None
        from ..attachments import split_items

        cell_options = CellOptions(
            settings=settings,
            fresh=args.fresh,
            new=args.new,
            attach=tuple(split_items(args.attach)),
            plan=args.plan,
            run_plan=args.run_plan,
        )
        self.agent.run_cell(prompt, cell_options)


_VALUE_WORDS = {"all", "on", "off", "none", "true", "false", "--clear"}
# Words people type for a sub-command that has another name.
_SYNONYMS = {"disallow": "revoke", "unallow": "revoke", "forbid": "revoke", "deny": "revoke"}


def _closest_command(word: str, cutoff: float) -> str | None:
    if word in _SYNONYMS:
        return _SYNONYMS[word]
    import difflib

    close = difflib.get_close_matches(word.lower(), list(_commands()), n=1, cutoff=cutoff)
    return close[0] if close else None


def _looks_like_a_command(words: list[str], argument_words: Callable[[], set[str]]) -> bool:
    """A mistyped sub-command, not a task: one word close to a sub-command's name, or a
    sub-command (or a close name) followed only by words such as tool names and numbers.
    A line with other words (``reset the index``) is a task."""
    if words[0].startswith("--"):
        return False
    if len(words) == 1:
        return _closest_command(words[0], 0.6) is not None
    if words[0] not in _commands() and _closest_command(words[0], 0.75) is None:
        return False
    known = argument_words()
    return all(w in known or _is_number(w) for w in words[1:])


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _did_you_mean(words: list[str]) -> str:
    """The UsageError for a mistyped sub-command: the likely one and its usage."""
    name = words[0] if words[0] in _commands() else _closest_command(words[0], 0.6)
    usage = command_usage(str(name))
    if name == words[0]:
        return f"%agent {name}: wrong number of words. Usage: {usage}"
    guess = " ".join([str(name), *words[1:]])
    return (
        f"%agent: {words[0]!r} is not a sub-command; did you mean `%agent {guess}`? "
        f"Usage: {usage}. (`%agent help` lists them; write a task as a %%agent cell)"
    )


def command_usage(name: str) -> str:
    """The help line of sub-command ``name``."""
    from . import commands

    for text in commands.HELP.splitlines():
        if text.startswith(f"%agent {name}"):
            return " ".join(text.split()[: _usage_words(text)])
    return f"%agent {name}"


def _usage_words(text: str) -> int:
    """The words of a help line before its description (separated by two or more spaces)."""
    head = re.split(r"\s{2,}", text.strip(), maxsplit=1)[0]
    return len(head.split())


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    return f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}"


def _commands() -> dict[str, Command]:
    from . import commands

    return commands.COMMANDS
