"""The record of an outside agent's call, saved in the notebook's ``qloop_outside`` metadata.

One entry per call: who called (the client's announced name), the tool and its input, who decided
(the user, a grant, the policy) and why, the code that really ran and a bounded, redacted copy of
what the client got back. Each entry is signed with this user's record key over its fields, so an
entry edited, or written by anyone else (a notebook received from elsewhere), does not verify.
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

from ..records.outside_schema import OUTSIDE_KEY, OutsideEntry
from ..records.signing import sign, verify

METADATA_KEY = OUTSIDE_KEY
RESULT_CHARS = 4_000  # of the result text kept in the notebook


def _body(entry: OutsideEntry | dict[str, Any]) -> bytes:
    fields = {k: v for k, v in entry.items() if k != "signature"}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def entry(
    *,
    client: str,
    tool: str,
    input: dict[str, Any],
    decision: str,
    reason: str = "",
    ran: str | None = None,
    risk: str | None = None,
    result: str = "",
    is_error: bool = False,
    ran_redacted: bool = False,
) -> dict[str, Any]:
    """A signed entry for the call (an ``OutsideEntry``)."""
    made: OutsideEntry = {
        "id": uuid.uuid4().hex,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "client": client,
        "tool": tool,
        "input": input,
        "decision": decision,
        "reason": reason,
        "ran": ran,
        "risk": risk,
        "result": result[:RESULT_CHARS],
        "result_chars": len(result),
        "is_error": is_error,
        "signature": "",
    }
    if ran_redacted:  # a secret was cut from the code: what is saved is not what ran
        made["ran_redacted"] = True
    made["signature"] = sign(_body(made))
    return dict(made)


def verified(found: Any) -> bool:
    """Whether ``found`` is an entry this user's key signed, unchanged since."""
    if not isinstance(found, dict) or not isinstance(found.get("signature"), str):
        return False
    try:
        body = _body(found)
    except (TypeError, ValueError):  # not JSON data: nobody signed it
        return False
    return verify(found["signature"], body)
