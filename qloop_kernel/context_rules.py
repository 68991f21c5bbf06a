"""Rules files: the standing instructions a user keeps for the agent, read into the system prompt.

Where they are found, in the order they are sent (later ones are more specific and win where two
disagree):

1. the user's own file, ``QLOOP_USER_RULES`` or ``<jupyter config dir>/qloop/rules.md``;
2. in each folder from the project root down to the notebook's folder: ``AGENTS.md``, ``CLAUDE.md``,
   ``.qloop/rules.md``.

The notebook's folder is the folder of ``JPY_SESSION_NAME`` (set by Jupyter Server for the kernel of a
notebook) when it names one, else the kernel's working directory; symbolic links are resolved, so a
notebook reached through a link finds the rules of the project it really is in. The project root is the
nearest folder up from there holding ``.git``, else ``QLOOP_PROJECT_ROOT`` (e.g. the Jupyter root) when
the notebook is under it, else the home folder when the notebook is under it, else the notebook's
folder alone. A file reached twice (``CLAUDE.md`` a link to ``AGENTS.md``), or with the same text as
one already taken, is sent once.

A project file steers code that runs, so it is used only once the user approved its exact text (by
path and SHA-256, remembered in the user's own state file, never in the notebook); the user's own file
needs no approval. The rules are bounded in all (``MAX_RULES_CHARS``): the most specific files are
kept first and a cut file says so. Text is redacted like everything else sent to the model.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from .errors import QloopError
from .messages import now_iso
from .redact import redact_text
from .text import truncate

RULES_NAMES = ("AGENTS.md", "CLAUDE.md", ".qloop/rules.md")
USER_RULES_ENV = "QLOOP_USER_RULES"
PROJECT_ROOT_ENV = "QLOOP_PROJECT_ROOT"
APPROVALS_ENV = "QLOOP_RULES_APPROVALS"
USE_ENV = "QLOOP_RULES"  # "approved" (default), "all" (unseen project files too), "user", "none"
USE_MODES = ("approved", "all", "user", "none")
MAX_RULES_CHARS = 24_000  # all rules files together, as sent
MAX_FILE_BYTES = 1_000_000  # a larger file is not read
HEADING = (
    "# Rules the user keeps for this work\n"
    "Follow them; where two disagree, the later (more specific) one wins."
)

Origin = Literal["user", "project"]
Status = Literal["used", "cut", "unapproved", "changed", "declined", "off", "unreadable", "no room"]


class RulesError(QloopError, ValueError):
    """A rules setting or file that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class RulesFile:
    """One rules file as found: where, whose, its text (redacted) and the SHA-256 of its bytes."""

    path: str
    origin: Origin
    text: str = ""
    sha256: str = ""
    problem: str = ""  # why it cannot be read ("" when it was)

    @property
    def name(self) -> str:
        return self.path


@dataclass(frozen=True)
class RulesUse:
    """What a turn does with one rules file: its status and the text it sends (bounded)."""

    file: RulesFile
    status: Status
    sent: str = ""  # the text as it goes into the system prompt ("" when not used)
    previous: str | None = None  # the approved earlier text of a changed file (for its diff)

    @property
    def used(self) -> bool:
        return self.status in ("used", "cut")

    def describe(self) -> str:
        """One line: where it is from, whose, and what happens to it."""
        what = {
            "used": f"used, {len(self.sent):,} characters",
            "cut": f"cut to fit: {len(self.sent):,} of {len(self.file.text):,} characters sent",
            "unapproved": "not used: a project rules file you have not approved",
            "changed": "not used: changed since you approved it",
            "declined": "not used: you declined it",
            "off": f"not used ({USE_ENV} leaves it out)",
            "unreadable": f"not used: {self.file.problem}",
            "no room": f"not used: no room left within {MAX_RULES_CHARS:,} characters of rules",
        }[self.status]
        return f"{self.file.path} ({self.file.origin}): {what}"


# -- where --------------------------------------------------------------------------------------


def notebook_folder(environ: Mapping[str, str] | None = None, cwd: str | None = None) -> Path:
    """The folder of the running notebook: ``JPY_SESSION_NAME``'s, else the working directory."""
    env = os.environ if environ is None else environ
    session = env.get("JPY_SESSION_NAME", "")
    if session and os.path.isabs(session) and os.path.isdir(os.path.dirname(session)):
        return Path(os.path.dirname(session)).resolve()
    return Path(cwd or os.getcwd()).resolve()


def project_root(folder: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the upward search stops (see the module docstring)."""
    env = os.environ if environ is None else environ
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    for bound in (env.get(PROJECT_ROOT_ENV, ""), str(Path.home())):
        if bound and _is_within(folder, Path(bound).resolve()):
            return Path(bound).resolve()
    return folder


def _is_within(folder: Path, root: Path) -> bool:
    return folder == root or root in folder.parents


def user_rules_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's own rules file (it may not exist)."""
    env = os.environ if environ is None else environ
    configured = env.get(USER_RULES_ENV, "")
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_config_dir

    return Path(jupyter_config_dir()) / "qloop" / "rules.md"


def discover(
    folder: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[RulesFile]:
    """The rules files for a notebook in ``folder``, in the order they are sent."""
    folder = folder.resolve() if folder is not None else notebook_folder(environ)
    root = project_root(folder, environ)
    chain = [folder, *folder.parents]
    folders = list(reversed(chain[: chain.index(root) + 1]))
    found: list[RulesFile] = []
    user = user_rules_path(environ)
    if user.exists() or user.is_symlink():
        found.append(read_rules(user, "user"))
    for place in folders:
        found += [read_rules(place / n, "project") for n in RULES_NAMES if _present(place / n)]
    return _once(found)


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _once(files: list[RulesFile]) -> list[RulesFile]:
    """Each file once: by its real path, and by its content (the same text in two places)."""
    seen: set[str] = set()
    kept = []
    for rules in files:
        keys = {os.path.realpath(rules.path)} | ({rules.sha256} if rules.sha256 else set())
        if keys & seen:
            continue
        seen |= keys
        kept.append(rules)
    return kept


def read_rules(path: Path, origin: Origin) -> RulesFile:
    """One rules file read as UTF-8 text (redacted); a problem is kept as a reason, never raised."""
    shown = str(path)
    try:
        if path.is_dir():
            return RulesFile(shown, origin, problem="it is a folder, not a file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return RulesFile(shown, origin, problem=f"too large ({size:,} bytes; at most "
                             f"{MAX_FILE_BYTES:,})")  # fmt: skip
        raw = path.read_bytes()
    except FileNotFoundError:
        return RulesFile(shown, origin, problem="a broken link (its target does not exist)")
    except OSError as exc:
        return RulesFile(shown, origin, problem=f"cannot be read ({exc.strerror or exc})")
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return RulesFile(shown, origin, sha256=digest, problem="not UTF-8 text")
    if "\x00" in text:
        return RulesFile(shown, origin, sha256=digest, problem="a binary file, not text")
    return RulesFile(shown, origin, redact_text(text.strip()), digest)


# -- approvals: the user's own state --------------------------------------------------------------


def approvals_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's file of approved project rules (``QLOOP_RULES_APPROVALS`` or the data dir)."""
    env = os.environ if environ is None else environ
    configured = env.get(APPROVALS_ENV, "")
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "qloop" / "rules_approved.json"


@dataclass
class RulesApprovals:
    """Approved project rules files: path -> the SHA-256 and (redacted) text approved."""

    path: Path
    entries: dict[str, dict[str, str]] = field(default_factory=dict)
    declined: set[tuple[str, str]] = field(default_factory=set)  # this kernel's session only

    @classmethod
    def load(cls, path: Path | None = None) -> RulesApprovals:
        """Read the file; a missing or unreadable one counts as no approvals."""
        where = path or approvals_path()
        try:
            data = json.loads(where.read_text("utf-8"))
        except (OSError, ValueError):
            return cls(where)
        entries = data.get("approved") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return cls(where)
        kept = {k: v for k, v in entries.items() if isinstance(v, dict) and "sha256" in v}
        return cls(where, kept)

    def status(self, rules: RulesFile) -> Status:
        entry = self.entries.get(rules.path)
        if entry is not None and entry.get("sha256") == rules.sha256:
            return "used"
        if (rules.path, rules.sha256) in self.declined:
            return "declined"
        return "changed" if entry is not None else "unapproved"

    def previous(self, rules: RulesFile) -> str | None:
        entry = self.entries.get(rules.path)
        return entry.get("text") if entry is not None else None

    def approve(self, rules: RulesFile) -> None:
        """Remember ``rules`` as approved, written at once (mode 0600, atomically)."""
        self.entries[rules.path] = {"sha256": rules.sha256, "text": rules.text, "at": now_iso()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": 1, "approved": self.entries}, indent=1, ensure_ascii=False)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".rules-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)

    def decline(self, rules: RulesFile) -> None:
        self.declined.add((rules.path, rules.sha256))


def diff_lines(before: str, after: str, limit: int = 200) -> list[str]:
    """A unified diff of an approved text and the file now, at most ``limit`` lines."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "approved",
                                      "now", lineterm="", n=2))  # fmt: skip
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit:,} more diff lines"]
    return lines


# -- what a turn uses -----------------------------------------------------------------------------


def use_mode(environ: Mapping[str, str] | None = None) -> str:
    """``QLOOP_RULES``: which rules files a turn may use without asking."""
    env = os.environ if environ is None else environ
    mode = env.get(USE_ENV, "").strip().lower() or "approved"
    if mode not in USE_MODES:
        raise RulesError(f"{USE_ENV}={mode!r} is not one of {', '.join(USE_MODES)}")
    return mode


def select(files: list[RulesFile], approvals: RulesApprovals, mode: str) -> list[RulesUse]:
    """Each file's status before any question is asked, then bounded (see ``bounded``)."""
    uses = []
    for rules in files:
        status = _status(rules, approvals, mode)
        previous = approvals.previous(rules) if status == "changed" else None
        uses.append(RulesUse(rules, status, previous=previous))
    return bounded(uses)


def _status(rules: RulesFile, approvals: RulesApprovals, mode: str) -> Status:
    if rules.problem:
        return "unreadable"
    if mode == "none" or (mode == "user" and rules.origin == "project"):
        return "off"
    if rules.origin == "user" or mode == "all":
        return "used"
    return approvals.status(rules)


def _cut_rules(text: str, path: object, limit: int) -> str:
    """The head of a rules file and a note saying where it was cut, in ``limit`` characters (the
    note, whose length the file's path and the counts set, included)."""
    shown = str(path) if len(str(path)) <= 160 else "…" + str(path)[-159:]
    keep = limit
    for _ in range(4):  # settles at once unless the kept count loses a digit
        note = (f"\n[rules cut here: {keep:,} of {len(text):,} characters of {shown} "
                "sent; the rest is left out]")  # fmt: skip
        if keep == max(0, limit - len(note)):
            break
        keep = max(0, limit - len(note))
    return truncate(text, keep, note=note)


def bounded(uses: list[RulesUse], limit: int = MAX_RULES_CHARS) -> list[RulesUse]:
    """The used files' texts fitted into ``limit`` characters, most specific (last) first."""
    left = limit
    out = list(uses)
    for index in range(len(out) - 1, -1, -1):
        use = out[index]
        if use.status not in ("used", "cut"):
            continue
        text = use.file.text
        if left <= 200:
            out[index] = replace(use, status="no room", sent="")
            continue
        if len(text) <= left:
            out[index] = replace(use, status="used", sent=text)
        else:
            out[index] = replace(use, status="cut", sent=_cut_rules(text, use.file.path, left))
        left -= len(out[index].sent)
    return out


def rules_text(uses: list[RulesUse]) -> str:
    """The rules section of the system prompt ("" when no file is used)."""
    parts = [
        f"## From {u.file.path} ({'the user' if u.file.origin == 'user' else 'project'} rules)\n"
        f"{u.sent}"
        for u in uses
        if u.used
    ]
    return "\n\n".join([HEADING, *parts]) if parts else ""


def with_rules(system: str, uses: list[RulesUse]) -> str:
    """The system prompt followed by the rules used (one text, so one cached prefix)."""
    section = rules_text(uses)
    return f"{system}\n\n{section}" if section else system
