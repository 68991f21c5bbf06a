"""The admin floor: what an operator sets for every user of a Jupyter installation, which no user
setting can loosen (docs/teams.md).

Read from ``qloop_admin.json`` in the system-wide Jupyter config folders (``jupyter --paths``, config:
``{sys.prefix}/etc/jupyter``, ``/usr/local/etc/jupyter``, ``/etc/jupyter``) and from the file the
``QLOOP_ADMIN_CONFIG`` environment variable names (for containers). Every file found applies: the
floor only rises, so a user who points ``QLOOP_ADMIN_CONFIG`` at a file of their own adds rules,
never removes one. A file that cannot be read or holds an unknown setting fails closed: no turn
runs until the operator fixes it.

A user who asks for something above the floor gets one line naming the admin setting and its file
(:class:`AdminRefusal`); nothing is lowered silently. The floor combines with the user's approval
policy in the permission pipeline (``pipeline.py``), never replacing it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import QloopError
from ..names import Policy
from ..redact import redact_shapes
from .risk.assessment import Risk

ADMIN_FILE = "qloop_admin.json"
ADMIN_ENV = "QLOOP_ADMIN_CONFIG"
_T = TypeVar("_T")


class AdminError(QloopError, ValueError):
    """An admin file that cannot be used; the message names the file and why."""


class AdminRefusal(QloopError, ValueError):
    """A user asked for something the admin floor does not allow; the message names the setting."""


class AdminSettings(BaseModel):
    """One admin file. Lists of names are fnmatch globs (``claude-opus-*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_providers: tuple[str, ...] | None = None  # None: every provider
    blocked_providers: tuple[str, ...] = ()
    allowed_models: tuple[str, ...] | None = None  # None: every model
    blocked_models: tuple[str, ...] = ()
    default_model: str | None = None  # the model of a user who chose none
    blocked_policies: tuple[Policy, ...] = ()  # approval policies users may not choose
    always_ask: tuple[Risk, ...] = ()  # classes a person approves at every step (denied headless)
    outside_agents: bool = True  # whether outside agents may connect to the notebook
    allowed_mcp_servers: tuple[str, ...] | None = None  # commands or URLs (globs); None: any
    user_mcp_servers: bool = True  # whether users may add servers of their own
    mcp_servers: dict[str, Any] = Field(default_factory=dict)  # the admin's own, as in .mcp.json
    max_cost_per_turn: float | None = Field(None, gt=0)  # USD
    max_cost_per_day: float | None = Field(None, gt=0)  # USD per user, across kernels (UTC days)
    usage_file: str | None = None  # the per-user spend ledger; "{user}" is the user's name
    redact_patterns: tuple[str, ...] = ()  # regular expressions of secrets to redact everywhere
    otel_endpoint: str | None = None  # OTLP/HTTP traces endpoint (else the OTEL_* variables)
    capture_content: bool | None = None  # export prompts, code and outputs (redacted) in traces

    @field_validator("redact_patterns")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redact pattern {pattern!r}: {exc}") from None
        return value


@dataclass(frozen=True)
class AdminFile:
    path: str
    settings: AdminSettings


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


@dataclass(frozen=True)
class AdminFloor:
    """Every admin file in effect, and the questions the rest of the package asks them."""

    files: tuple[AdminFile, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files)

    def _first(self, pick: Callable[[AdminSettings], _T | None]) -> tuple[_T, str] | None:
        for file in self.files:
            value = pick(file.settings)
            if value is not None:
                return value, file.path
        return None

    def _lowest(self, pick: Callable[[AdminSettings], float | None]) -> tuple[float, str] | None:
        found = [(v, f.path) for f in self.files if (v := pick(f.settings)) is not None]
        return min(found) if found else None

    def model_refusal(self, provider: str, model: str) -> str | None:
        """Why the admin does not allow ``model`` on ``provider``, or None."""
        for file in self.files:
            s = file.settings
            for what, name, allowed, blocked in (
                ("provider", provider, s.allowed_providers, s.blocked_providers),
                ("model", model, s.allowed_models, s.blocked_models),
            ):
                if _matches(name, blocked):
                    return _line(f"the {what} {name!r} is blocked", f"blocked_{what}s", file)
                if allowed is not None and not _matches(name, allowed):
                    shown = ", ".join(allowed) or "none"
                    setting = f"allowed_{what}s"
                    return _line(f"the {what} {name!r} is not allowed ({shown})", setting, file)
        return None

    def refusal(self, provider: str, model: str, policy: Policy | None) -> str | None:
        """Why settings naming ``provider``, ``model`` and ``policy`` go below the floor, or None:
        what settings, the kernel's turns and the server extension check."""
        return self.model_refusal(provider, model) or self.policy_refusal(policy)

    def default_model(self) -> tuple[str, str] | None:
        """The admin's default model and its file, or None."""
        return self._first(lambda s: s.default_model)

    def policy_refusal(self, policy: Policy | None) -> str | None:
        """Why the approval policy ``policy`` may not be chosen here, or None."""
        for file in self.files:
            if policy is not None and policy in file.settings.blocked_policies:
                return _line(f"the approval policy {policy!r} is not available", "blocked_policies",
                             file)  # fmt: skip
        return None

    def held(self, risks: Sequence[Risk | None]) -> str | None:
        """The line saying why a step of one of ``risks`` is put to a person whatever the user's
        policy or grants (None: the floor leaves it to them)."""
        for file in self.files:
            for risk in risks:
                if (risk or "unknown") in file.settings.always_ask:
                    return _line(f"every '{risk or 'unknown'}' step needs a person's approval",
                                 "always_ask", file)  # fmt: skip
        return None

    def outside_refusal(self) -> str | None:
        """Why outside agents may not connect, or None."""
        for file in self.files:
            if not file.settings.outside_agents:
                return _line("outside agents may not connect", "outside_agents", file)
        return None

    def mcp_refusal(self, target: str, user_added: bool) -> str | None:
        """Why the MCP server that runs ``target`` (its command line or URL) may not be used."""
        for file in self.files:
            s = file.settings
            if user_added and not s.user_mcp_servers:
                return _line("users may not add MCP servers", "user_mcp_servers", file)
            if s.allowed_mcp_servers is not None and not _matches(target, s.allowed_mcp_servers):
                return _line(f"the MCP server {target!r} is not allowed", "allowed_mcp_servers",
                             file)  # fmt: skip
        return None

    def turn_cap(self) -> tuple[float, str] | None:
        """The lowest USD cap per turn and its file."""
        return self._lowest(lambda s: s.max_cost_per_turn)

    def day_cap(self) -> tuple[float, str] | None:
        """The lowest USD cap per user per day and its file."""
        return self._lowest(lambda s: s.max_cost_per_day)

    def usage_file(self) -> str | None:
        found = self._first(lambda s: s.usage_file)
        return found[0] if found else None

    def redact_patterns(self) -> tuple[str, ...]:
        return tuple(p for f in self.files for p in f.settings.redact_patterns)

    def otel(self) -> tuple[str | None, bool | None]:
        """The admin's OTLP endpoint (or None) and whether traces carry content (None: the admin
        leaves that to the user; telemetry.py)."""
        endpoint = self._first(lambda s: s.otel_endpoint)
        capture = self._first(lambda s: s.capture_content)
        return (endpoint[0] if endpoint else None), (capture[0] if capture else None)

    def always_asked(self) -> frozenset[Risk]:
        """Every class some admin file puts to a person at every step (``always_ask``)."""
        return frozenset(risk for f in self.files for risk in f.settings.always_ask)


def _line(what: str, setting: str, file: AdminFile) -> str:
    return f"{what}: the admin setting {setting} in {file.path}"


def admin_paths() -> list[Path]:
    """The admin files to read, those that exist: the one ``QLOOP_ADMIN_CONFIG`` names (it must
    exist), then ``qloop_admin.json`` in each system-wide Jupyter config folder."""
    import jupyter_core.paths as jupyter_paths  # read at each call: the folders are module lists

    found = []
    named = os.environ.get(ADMIN_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise AdminError(f"{ADMIN_ENV}={named}: no such file")
        found.append(path)
    folders = [*jupyter_paths.ENV_CONFIG_PATH, *jupyter_paths.SYSTEM_CONFIG_PATH]
    found += [Path(d) / ADMIN_FILE for d in folders if (Path(d) / ADMIN_FILE).is_file()]
    return list(dict.fromkeys(found))


_cache: dict[Path, tuple[tuple[int, int], AdminFile]] = {}


def _read(path: Path) -> AdminFile:
    try:
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        cached = _cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        data = json.loads(path.read_text(encoding="utf-8"))
        read = AdminFile(str(path), AdminSettings.model_validate(data))
    except OSError as exc:
        raise AdminError(f"the admin file {path} cannot be read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise AdminError(f"the admin file {path} is not valid JSON (line {exc.lineno})") from None
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        raise AdminError(f"the admin file {path}: {where}: {err['msg']}") from None
    _cache[path] = (key, read)
    return read


def admin_floor() -> AdminFloor:
    """The admin floor in effect now (files are read again when they change); raises
    :class:`AdminError` for a file that cannot be used. Its redaction patterns apply from here on
    wherever the floor is read (the kernel, the server extension)."""
    floor = AdminFloor(tuple(_read(path) for path in admin_paths()))
    redact_shapes(floor.redact_patterns())
    return floor
