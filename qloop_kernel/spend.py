"""What this user's model calls cost: a ledger shared by every kernel of the user, and the admin's spend
caps checked before each request (docs/teams.md).

The ledger is one JSON line per model call (UTC day, time, model, notebook, session, tokens, cost,
steps) in ``usage.jsonl`` under the user's Jupyter data folder, or the file ``QLOOP_USAGE_FILE`` names,
or the admin's ``usage_file`` (which wins: a user cannot move the ledger a daily cap reads). Each line
is appended under an exclusive ``flock``, so kernels running at once add up; ``qloop usage`` reads it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import getpass
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .messages import BudgetExceeded, ModelResponse
from .policy.admin import AdminFloor, admin_floor

USAGE_ENV = "QLOOP_USAGE_FILE"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def usage_path(floor: AdminFloor) -> Path:
    """The ledger: the admin's file ("{user}" is the user's name), else QLOOP_USAGE_FILE, else
    ``usage.jsonl`` in qloop's folder of the user's Jupyter data folder."""
    chosen = floor.usage_file()
    if chosen is not None:
        return Path(chosen.replace("{user}", getpass.getuser())).expanduser()
    named = os.environ.get(USAGE_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "qloop" / "usage.jsonl"


COUNTERS = ("steps", "input_tokens", "output_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens")  # fmt: skip


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def ledger_call(row: dict[str, Any]) -> dict[str, Any] | None:
    """A ledger row as a model call (day, notebook, model, cost or None, the counters), or None when
    it is not one (a line written by hand, or cut)."""
    cost = row.get("cost_usd")
    day = row.get("day")
    if not isinstance(day, str) or not _is_day(day):
        return None
    if cost is not None and not _amount(cost):
        return None
    if not all(_count(row.get(name, 0)) for name in COUNTERS):
        return None
    return {
        "day": day,
        "notebook": str(row.get("notebook") or "-"),
        "model": str(row.get("model") or "-"),
        "cost_usd": None if cost is None else float(cost),
        **{name: row.get(name, 0) for name in COUNTERS},
    }


def _amount(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


def _is_day(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


@dataclass(frozen=True)
class SpendLedger:
    """The user's usage file."""

    path: Path

    def add(self, row: dict[str, Any]) -> None:
        """Append one row, holding the file's lock while writing."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            try:
                ledger.write(json.dumps(row, sort_keys=True) + "\n")
                ledger.flush()
            finally:
                fcntl.flock(ledger, fcntl.LOCK_UN)

    def read(self) -> tuple[list[dict[str, Any]], int]:
        """Every row, and how many lines are not a JSON object (skipped; blank lines aside).
        A missing file has no rows."""
        try:
            with self.path.open(encoding="utf-8", errors="replace") as ledger:
                fcntl.flock(ledger, fcntl.LOCK_SH)
                lines = ledger.readlines()
        except FileNotFoundError:
            return [], 0
        rows, unreadable = [], 0
        for line in filter(str.strip, lines):
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if isinstance(row, dict):
                rows.append(row)
            else:
                unreadable += 1
        return rows, unreadable

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row (a line that is not a JSON object is skipped)."""
        yield from self.read()[0]

    def spent_on(self, day: str) -> float:
        """USD recorded on a UTC day (``YYYY-MM-DD``) by the rows that are model calls."""
        calls = (ledger_call(row) for row in self.rows())
        return sum(c["cost_usd"] or 0.0 for c in calls if c is not None and c["day"] == day)


def resets_in(now: dt.datetime) -> str:
    """How long until the next 00:00 UTC, as `3 h 12 min`."""
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
    minutes = int((midnight - now).total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass
class SpendGuard:
    """Records each model call in the ledger and checks the admin's caps before each request."""

    ledger: SpendLedger
    turn_cap: tuple[float, str] | None = None
    day_cap: tuple[float, str] | None = None
    notebook: str = ""
    session: str = ""
    now: Callable[[], dt.datetime] = field(default=_utc_now)

    def check(self, turn_cost: float, next_cost: float, priced: bool) -> BudgetExceeded | None:
        """The stop when the next request would pass a cap (``next_cost``: the last call's)."""
        if (self.turn_cap or self.day_cap) and not priced:
            return BudgetExceeded("cost", 0.0, 0.0, cap=NO_PRICE)
        if self.turn_cap is not None and turn_cost + next_cost > self.turn_cap[0]:
            cap, path = self.turn_cap
            return BudgetExceeded("cost", turn_cost, cap, cap=(
                f"the admin's spend cap per turn is reached (${turn_cost:.4f} of ${cap:.2f}: "
                f"the admin setting max_cost_per_turn in {path})"))  # fmt: skip
        if self.day_cap is None:
            return None
        now = self.now()
        spent, (cap, path) = self.ledger.spent_on(now.date().isoformat()), self.day_cap
        if spent < cap and spent + next_cost <= cap:  # a cap reached refuses the next call
            return None
        return BudgetExceeded("cost", spent, cap, cap=(
            f"the daily spend cap is reached (${spent:.4f} of ${cap:.2f} today: the admin setting "
            f"max_cost_per_day in {path}); it resets at 00:00 UTC, in {resets_in(now)}"))  # fmt: skip

    def record(self, response: ModelResponse, model: str, cost: float | None) -> None:
        """One row for a model call."""
        now = self.now()
        usage = response.usage
        steps = sum(1 for b in response.content if b.get("type") == "tool_use")
        self.ledger.add({
            "day": now.date().isoformat(), "at": now.isoformat(timespec="seconds"),
            "model": model, "notebook": self.notebook, "session": self.session,
            "cost_usd": cost, "steps": steps, **usage.as_dict(),
        })  # fmt: skip


NO_PRICE = (
    "the admin's spend cap needs the model's price, and it is not known: give one with "
    "`%agent price IN OUT` (or QLOOP_PRICE)"
)


def spend_guard(session: str, floor: AdminFloor | None = None) -> SpendGuard:
    """The guard of a turn in this kernel: the admin floor's caps, this user's ledger, and the
    notebook the Jupyter server names in ``JPY_SESSION_NAME``."""
    floor = floor if floor is not None else admin_floor()
    return SpendGuard(
        SpendLedger(usage_path(floor)),
        turn_cap=floor.turn_cap(),
        day_cap=floor.day_cap(),
        notebook=os.environ.get("JPY_SESSION_NAME", ""),
        session=session,
    )
