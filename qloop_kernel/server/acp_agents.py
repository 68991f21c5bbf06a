"""Which coding agents the chat panel offers: known ACP agents found on ``PATH``, and the agents
the user declares in the Jupyter server's config (``c.QloopACP.agents``).

Only the user's Jupyter config sets these (``jupyter_server_config.py`` or the command line),
never a page or an agent.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from traitlets import Bool, Dict, List
from traitlets.config import Configurable

from ..errors import QloopError

CLIENT_HEADER = "X-Qloop-Client"  # the name a hosted agent's MCP calls are shown under

# (name, command, arguments): the ACP entry points these agents document.
KNOWN_AGENTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Claude Code", "claude-code-acp", ()),
    ("Codex", "codex-acp", ()),
    ("Gemini CLI", "gemini", ("--experimental-acp",)),
    ("Goose", "goose", ("acp",)),
    ("OpenCode", "opencode", ("acp",)),
)


class QloopACP(Configurable):
    """Settings of the coding agents the Jupyter server hosts over ACP."""

    agents = List(
        Dict(),
        help="Agents to offer beside those found on PATH: a list of {'name': ..., 'command': "
        "..., 'args': [...], 'env': {...}}; a declared agent of a known agent's name replaces it.",
    ).tag(config=True)

    discover = Bool(
        True, help="Offer the known ACP agents (Claude Code, Codex, Gemini CLI, Goose, OpenCode) "
        "whose command is on PATH."
    ).tag(config=True)  # fmt: skip


@dataclass(frozen=True)
class AgentSpec:
    """One agent: how to start it (``env`` adds to the small default environment)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def listing(self) -> dict[str, str]:
        return {"name": self.name, "command": self.command}


class ConfigError(QloopError, ValueError):
    """A declared agent the config describes wrongly."""


def declared(entry: object) -> AgentSpec:
    """An agent of ``c.QloopACP.agents``, checked."""
    if not isinstance(entry, dict):
        raise ConfigError(f"c.QloopACP.agents: each agent is a dict, not {entry!r}")
    name, command = entry.get("name"), entry.get("command")
    args, env = entry.get("args", []), entry.get("env", {})
    if not isinstance(name, str) or not name.strip() or not isinstance(command, str):
        raise ConfigError(f"c.QloopACP.agents: an agent needs a 'name' and a 'command': {entry!r}")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"c.QloopACP.agents: {name}'s 'args' is a list of strings")
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"c.QloopACP.agents: {name}'s 'env' maps names to strings")
    return AgentSpec(name.strip(), command, tuple(args), {str(k): v for k, v in env.items()})


def available(config: QloopACP) -> list[AgentSpec]:
    """The agents to offer, by name: the known ones on PATH, then the declared ones."""
    found: dict[str, AgentSpec] = {}
    if config.discover:
        for name, command, args in KNOWN_AGENTS:
            if shutil.which(command) is not None:
                found[name] = AgentSpec(name, command, args)
    for entry in config.agents:
        spec = declared(entry)
        found[spec.name] = spec
    return list(found.values())
