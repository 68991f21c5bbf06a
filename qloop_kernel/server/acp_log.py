"""The session log of a hosted agent's chat: its decisions and actions outside notebooks.

One JSON line per entry, each entry signed and redacted as an outside call's record is
(:mod:`.record`), in ``<server root>/.qloop/acp/<chat id>.jsonl``: beside the files the agent
worked on, where ``qloop show`` finds them. An agent's notebook work goes through qloop's MCP
server, whose calls are recorded in the notebook itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import record

LOG_FOLDER = Path(".qloop") / "acp"


class SessionLog:
    """The log file of one chat."""

    def __init__(self, root: Path, chat_id: str) -> None:
        self.path = root / LOG_FOLDER / f"{chat_id}.jsonl"

    def append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")


def read_log(path: Path) -> list[tuple[dict[str, Any], bool]]:
    """The entries of a session log, each with whether it verifies (an unreadable line is
    skipped: it is no entry)."""
    found: list[tuple[dict[str, Any], bool]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append((entry, record.verified(entry)))
    return found
