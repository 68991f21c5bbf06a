"""The names a user types for approval policies and model platforms, kept in a module of their own.

``%load_ext`` imports the magics, whose options and configuration accept these names; this module is
all of the rest of the package that the load needs (permissions.py and providers.py, which use the
names, are imported with the agent's first turn or by the warm-up).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

Policy: TypeAlias = Literal["ask", "auto", "readonly", "write", "deny"]
POLICIES: tuple[Policy, ...] = ("ask", "auto", "readonly", "write", "deny")

ProviderName: TypeAlias = Literal["anthropic", "bedrock", "vertex", "foundry", "compatible"]
PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "bedrock", "vertex", "foundry", "compatible")
DEFAULT_PROVIDER: ProviderName = "anthropic"
