"""Settings: every user-settable default, written once, and how config and the environment set them.

Sources, later ones winning: these defaults, the environment (``QLOOP_MODEL``, ``QLOOP_PROVIDER``,
``QLOOP_APPROVAL``, ``QLOOP_ASK_READ``, ``QLOOP_PRICE``), traitlets config
(``c.QloopAgent.model = ...``; a trait left unset, None, keeps the environment's value, and config
names no price), ``%agent set``, a cell's options (``notebook/options.py``). ``settings_from``
applies the first three, over the admin floor (``policy/admin.py``): the admin's default model where
none is chosen, and a choice below the floor refused with the admin's line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .contracts import Limits
from .errors import QloopError, UnknownModelPrice
from .policy.admin import AdminError, admin_floor
from .policy.permissions import POLICIES, Policy
from .pricing import Price, platform_price, price_figures
from .providers import (
    DEFAULT_PROVIDER,
    ProviderError,
    ProviderName,
    provider_from,
    short_model,
)

# A qualified class name or an fnmatch glob of one (values/summaries/trust.py reads them)
_CLASS_NAME = re.compile(r"[A-Za-z_*?\[][\w.*?\[\]!]*")
DEFAULT_MODEL = "claude-sonnet-5-5"  # the current Sonnet (Models overview, 2026-12)
_LIMITS = Limits()


class Settings(BaseModel):
    """User settings; a cell's options override them for one turn."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str = DEFAULT_MODEL
    provider: ProviderName = DEFAULT_PROVIDER  # the platform that serves the model
    approve: Policy | None = None  # None: "ask" when a frontend can click, else "readonly"
    ask_read: bool = True  # with "ask": False runs 'read' steps without a card
    max_turns: int = Field(_LIMITS.max_turns, ge=1)  # model calls per cell
    max_cost: float | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    timeout: float | None = Field(None, gt=0)
    code_timeout: float | None = Field(None, gt=0)  # per run_code call
    max_output_tokens: int = Field(_LIMITS.max_output_tokens, ge=256)
    max_output_chars: int = Field(100_000, ge=1_000)  # what a code step shows in the cell
    # Memory the snapshots for undoing a step may hold, in MB; None: a share of available memory
    undo_budget_mb: float | None = Field(None, ge=0)
    # Device (GPU) memory undo snapshots may take, in MB: none by default, a device array is not copied
    undo_device_budget_mb: float = Field(0, ge=0)
    # USD per million input, output tokens, optionally cache write and cache read tokens
    price: tuple[float, float] | tuple[float, float, float, float] | None = None
    # Classes whose methods a read may call (docs/security.md, "What a read runs"): qualified
    # names or globs, a notebook class by its bare name; `%agent set trusted_reprs a.B,c.*`
    trusted_reprs: tuple[str, ...] = ()

    @field_validator("provider", mode="before")
    @classmethod
    def _provider_name(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("ask_read", mode="before")
    @classmethod
    def _off_is_false(cls, value: object) -> object:
        return False if value is None else value  # `%agent set ask_read off` arrives as None

    @field_validator("trusted_reprs", mode="before")
    @classmethod
    def _class_names(cls, value: object) -> object:
        if value is None:  # `%agent set trusted_reprs off`
            return ()
        names = [n.strip() for n in value.split(",")] if isinstance(value, str) else value
        if isinstance(names, list | tuple):
            bad = [n for n in names if not isinstance(n, str) or not _CLASS_NAME.fullmatch(n)]
            if bad:
                raise ValueError(
                    f"{bad[0]!r} is not a class name or glob (such as mymodule.Point, Point or "
                    "mylib.*); separate names with commas"
                )
        return names

    def updated(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated (raises pydantic's ValidationError)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    def limits(self) -> Limits:
        return Limits(
            max_turns=self.max_turns,
            max_tokens=self.max_tokens,
            max_cost_usd=self.max_cost,
            timeout_s=self.timeout,
            max_output_tokens=self.max_output_tokens,
        )

    def undo_budget_bytes(self) -> int:
        """The undo snapshots' memory budget: the setting, else 10% of available memory, at most
        4 GiB (1 GiB when the available memory cannot be read)."""
        if self.undo_budget_mb is not None:
            return int(self.undo_budget_mb * 1024**2)
        available = available_memory()
        if available is None:
            return UNDO_BUDGET_FALLBACK
        return min(int(available * UNDO_BUDGET_SHARE), UNDO_BUDGET_CAP)

    def undo_device_budget_bytes(self) -> int:
        """The device memory undo snapshots may take (copies of GPU arrays); 0 by default."""
        return int(self.undo_device_budget_mb * 1024**2)

    def resolved_price(self, model: str) -> Price | None:
        """The price to count cost with; None if unknown and no USD budget needs it."""
        if self.price is not None:
            return Price.from_figures(*self.price, model=model)
        try:
            return platform_price(self.provider, short_model(self.provider, model))
        except UnknownModelPrice:
            if self.max_cost is not None:
                raise
            return None


UNDO_BUDGET_SHARE = 0.10
UNDO_BUDGET_CAP = 4 * 1024**3
UNDO_BUDGET_FALLBACK = 1024**3


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for row in meminfo:
                if row.startswith("MemAvailable:"):
                    return int(row.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


# Settings a user changes by name (`%agent set NAME VALUE`, config); `price` has its own command.
SETTABLE: tuple[str, ...] = tuple(name for name in Settings.model_fields if name != "price")


_BOOLEAN_WORDS = {"1": True, "true": True, "yes": True, "on": True,
                  "0": False, "false": False, "no": False, "off": False}  # fmt: skip


class SettingsError(QloopError, ValueError):
    """A setting from config or the environment is invalid; the message names its source."""


def settings_from(config: Mapping[str, Any], environ: Mapping[str, str]) -> Settings:
    """Settings from traitlets config values (unset ones absent or None) and the environment."""
    values: dict[str, Any] = {
        k: v for k, v in config.items() if v not in (None, "") and k in SETTABLE
    }
    model = environ.get("QLOOP_MODEL", "").strip()
    if model and "model" not in values:
        values["model"] = model
    provider = environ.get("QLOOP_PROVIDER", "").strip()
    if provider and "provider" not in values:
        try:
            values["provider"] = provider_from(provider)
        except ProviderError as exc:
            raise SettingsError(f"QLOOP_PROVIDER: {exc}") from None
    policy = environ.get("QLOOP_APPROVAL", "").strip().lower()
    if policy and policy not in POLICIES:
        raise SettingsError(f"QLOOP_APPROVAL={policy!r} is not one of {', '.join(POLICIES)}")
    if policy and "approve" not in values:
        values["approve"] = policy
    ask_read = environ.get("QLOOP_ASK_READ", "").strip().lower()
    if ask_read and ask_read not in _BOOLEAN_WORDS:
        raise SettingsError(
            f"QLOOP_ASK_READ={ask_read!r} is not one of {', '.join(_BOOLEAN_WORDS)}"
        )
    if ask_read and "ask_read" not in values:
        values["ask_read"] = _BOOLEAN_WORDS[ask_read]
    price = environ.get("QLOOP_PRICE")
    if price:
        try:
            values["price"] = price_figures(price)
        except ValueError as exc:
            raise SettingsError(f"QLOOP_PRICE: {exc}") from None
    return _above_floor(values)


def _above_floor(values: dict[str, Any]) -> Settings:
    """Settings from ``values`` and the admin floor (policy/admin.py): its default model where
    none was chosen; a choice below the floor refused with the admin's line."""
    try:
        floor = admin_floor()
    except AdminError as exc:
        raise SettingsError(str(exc)) from None
    default = floor.default_model()
    if default is not None and "model" not in values:
        values["model"] = default[0]
    settings = Settings(**values)
    refusal = floor.refusal(settings.provider, settings.model, settings.approve)
    if refusal is not None:
        raise SettingsError(refusal)
    return settings
