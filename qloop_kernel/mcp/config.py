"""MCP server configuration: the ``mcpServers`` format other MCP clients use, and where it is read.

Sources, later ones winning for the same name: the user-level file (``mcp.json`` in qloop's
Jupyter config folder, or ``QLOOP_MCP_CONFIG``), kernel config (``c.QloopAgent.mcp_servers``), the
project's ``.mcp.json`` files (the notebook's folder and its project root, once approved), and
servers added with ``%agent mcp add`` in the notebook's own cells.

The admin floor (``policy/admin.py``) adds the admin's own servers (``mcp_servers`` in an admin file,
which win for the same name), limits every other server to the commands and URLs it allows
(``allowed_mcp_servers``), and may refuse every server a user adds (``user_mcp_servers``):
:func:`admitted` applies it, with a line for each server it refuses.

A project file can start processes, so it is *received* until the user approves it: the approval
is kept by path and sha256 in the user's Jupyter data folder (never in the notebook), and a
changed file needs approving again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import QloopError
from ..policy.admin import AdminError, admin_floor
from ..redact import SECRET_NAME

PROJECT_FILE = ".mcp.json"
USER_FILE_ENV = "QLOOP_MCP_CONFIG"
APPROVED_ENV = "QLOOP_MCP_APPROVED"  # the approvals file (tests point it elsewhere)
DEFAULT_TIMEOUT_S = 60.0
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_TOKEN = re.compile(r"^[A-Za-z0-9+/=_.~-]{16,}$")

Source = Literal["user", "config", "project", "notebook", "admin"]


class McpConfigError(QloopError, ValueError):
    """A server entry or file that cannot be used; the message says where and why."""


class ServerConfig(BaseModel):
    """One server: stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP (``url``,
    ``headers``). ``trusted``: its tools' annotations are taken as they are (else they may only
    raise the approval need). ``timeout``: seconds per tool call."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["stdio", "http", "streamable-http"] = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    trusted: bool = False
    timeout: float = Field(DEFAULT_TIMEOUT_S, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _kind(cls, data: object) -> object:
        if isinstance(data, dict) and "type" not in data and "url" in data:
            return {**data, "type": "http"}
        return data

    @model_validator(mode="after")
    def _complete(self) -> ServerConfig:
        if self.http and not self.url:
            raise ValueError("an http server needs a 'url'")
        if not self.http and not self.command:
            raise ValueError("a stdio server needs a 'command'")
        return self

    @property
    def http(self) -> bool:
        return self.type != "stdio"

    def shown(self) -> str:
        """What starts or is reached, without a secret: the command line or the URL, and the names
        (never the values) of its environment variables and headers."""
        if self.http:
            what = f"{self.url}"
            named = sorted(self.headers)
            return what + (f" (headers: {', '.join(named)})" if named else "")
        line = " ".join([self.command or "", *self.args])
        named = sorted(self.env)
        return line + (f" (env: {', '.join(named)})" if named else "")

    def secrets(self) -> list[str]:
        """Values to redact everywhere: every header value (and the token after its scheme),
        environment values whose name looks secret or which look like tokens."""
        found: set[str] = set()
        for value in self.headers.values():
            found.add(value)
            found.update(part for part in value.split()[1:] if len(part) >= 8)
        for name, value in self.env.items():
            if SECRET_NAME.search(name) or _TOKEN.match(value):
                found.add(value)
        return sorted((v for v in found if len(v) >= 4), key=len, reverse=True)


@dataclass(frozen=True)
class Configured:
    """A server as configured, and where it came from (a file path, or the source's name)."""

    name: str
    config: ServerConfig
    source: Source
    origin: str


def check_name(name: str) -> str:
    """A server name usable in a tool name: letters, digits, ``_`` and ``-``, at most 40."""
    if not _NAME.match(name) or "__" in name:
        raise McpConfigError(
            f"MCP server name {name!r}: use letters, digits, '_' and '-' (no '__'), at most 40"
        )
    return name


def parse_servers(data: Any, source: Source, origin: str) -> list[Configured]:
    """The servers of an ``{"mcpServers": {...}}`` document (or of the inner mapping itself)."""
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    if not isinstance(data, dict):
        raise McpConfigError(f'{origin}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
    found = []
    for name, entry in data.items():
        check_name(str(name))
        try:
            config = ServerConfig.model_validate(entry)
        except ValidationError as exc:
            errors = "; ".join(e["msg"] for e in exc.errors(include_url=False))
            raise McpConfigError(f"{origin}: MCP server {name!r}: {errors}") from None
        found.append(Configured(str(name), config, source, origin))
    return found


def read_file(path: Path, source: Source) -> list[Configured]:
    """The servers of one JSON file (none when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_servers(data, source, str(path))


def user_file() -> Path:
    """The user-level servers file."""
    named = os.environ.get(USER_FILE_ENV)
    if named:
        return Path(named).expanduser()
    from jupyter_core.paths import jupyter_config_dir

    return Path(jupyter_config_dir()) / "qloop" / "mcp.json"


def project_files(folder: Path) -> list[Path]:
    """``.mcp.json`` in the notebook's folder and in its project root (the nearest folder above
    holding ``.git``), those that exist, nearest first."""
    folder = folder.resolve()
    found = [folder / PROJECT_FILE]
    for parent in [folder, *folder.parents]:
        if (parent / ".git").exists():
            found.append(parent / PROJECT_FILE)
            break
    unique = list(dict.fromkeys(found))
    return [p for p in unique if p.is_file()]


def digest(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def approvals_file() -> Path:
    named = os.environ.get(APPROVED_ENV)
    if named:
        return Path(named).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "qloop" / "mcp_approved.json"


def _approvals() -> dict[str, str]:
    try:
        data = json.loads(approvals_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def is_approved(path: Path, sha256: str) -> bool:
    """Whether the user approved this project file with exactly these contents."""
    return _approvals().get(str(path.resolve())) == sha256


def approve(path: Path, sha256: str) -> None:
    """Remember that the user approved this project file with these contents."""
    saved = {**_approvals(), str(path.resolve()): sha256}
    target = approvals_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(saved, indent=1, sort_keys=True), encoding="utf-8")
    os.chmod(temporary, 0o600)
    temporary.replace(target)


def target(config: ServerConfig) -> str:
    """What the admin's ``allowed_mcp_servers`` globs are matched against: the URL, or the command
    line."""
    return (config.url or "") if config.http else " ".join([config.command or "", *config.args])


def admitted(entries: list[Configured]) -> tuple[list[Configured], list[str]]:
    """The servers the admin floor allows among ``entries``, then the admin's own; a line for
    each one refused. An admin file that cannot be used refuses them all."""
    try:
        floor = admin_floor()
    except AdminError as exc:
        return [], [f"MCP servers are off: {exc}"]
    kept, refused = [], []
    for entry in entries:
        why = floor.mcp_refusal(target(entry.config), user_added=True)
        if why is None:
            kept.append(entry)
        else:
            refused.append(f"MCP server '{entry.name}' is left out: {why}")
    for file in floor.files:
        if file.settings.mcp_servers:
            kept += parse_servers(file.settings.mcp_servers, "admin", file.path)
    return kept, refused


def check_admitted(entry: Configured) -> None:
    """Refuse a server the user adds now (``%agent mcp add``) that the admin floor does not allow."""
    _, refused = admitted([entry])
    if refused:
        raise McpConfigError(refused[0])
