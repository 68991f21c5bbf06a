"""The effective settings and where each comes from: admin, user, notebook, magic (``%agent config``
and ``qloop config --show``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .policy.admin import AdminError, AdminFloor, admin_floor
from .settings import SETTABLE, Settings, SettingsError, settings_from

# The environment variable that sets each setting (settings.py reads them)
ENVIRONMENT = {"model": "QLOOP_MODEL", "provider": "QLOOP_PROVIDER", "approve": "QLOOP_APPROVAL",
               "ask_read": "QLOOP_ASK_READ", "price": "QLOOP_PRICE"}  # fmt: skip


def _source(
    name: str, config: Mapping[str, Any], environ: Mapping[str, str], floor: AdminFloor
) -> str:
    if config.get(name) not in (None, ""):
        return f"user (c.QloopAgent.{name})"
    variable = ENVIRONMENT.get(name)
    if variable is not None and environ.get(variable, "").strip():
        return f"user ({variable})"
    default = floor.default_model()
    if name == "model" and default is not None:
        return f"admin (default_model in {default[1]})"
    return "default"


def floor_lines(floor: AdminFloor) -> list[str]:
    """One line per admin setting in effect, with its file."""
    lines = []
    for file in floor.files:
        for name, value in file.settings.model_dump(exclude_defaults=True).items():
            shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else value
            lines.append(f"  {name} = {shown}  (admin: {file.path})")
    return lines


def effective_lines(
    config: Mapping[str, Any], environ: Mapping[str, str], session: Settings | None = None
) -> list[str]:
    """The settings in effect, each with its source, then the admin floor. ``session``: the
    kernel's settings now (``%agent set`` changes them for this notebook's kernel)."""
    try:
        floor = admin_floor()
    except AdminError as exc:
        return [f"the admin floor cannot be read: {exc}"]
    lines: list[str] = []
    try:
        base = settings_from(config, environ)
    except SettingsError as exc:
        lines.append(f"refused: {exc}")
        base = Settings()
    now = session or base
    lines.append("settings (a cell's --options override them for its turn: magic):")
    for name in SETTABLE:
        value = getattr(now, name)
        changed = session is not None and value != getattr(base, name)
        source = "notebook (%agent set)" if changed else _source(name, config, environ, floor)
        lines.append(f"  {name} = {value}  ({source})")
    found = floor_lines(floor)
    lines.append("admin floor:" if found else "admin floor: none (no qloop_admin.json found)")
    return lines + found
