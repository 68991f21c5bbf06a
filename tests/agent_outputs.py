"""Reading an agent cell's outputs and the requests it sent, shared by the kernel-level tests."""

from __future__ import annotations

from typing import Any

from qloop_kernel.notebook.display import ANSWER_MIME
from qloop_kernel.records import MIME_TYPE
from tests.kernel_client import LabKernel


def saved_record(lab: LabKernel, msg_id: str) -> dict[str, Any]:
    """The newest record in the cell's output mirror."""
    bundles = [
        m["content"]["data"][MIME_TYPE]
        for m in lab.messages(msg_id, "display_data", "update_display_data")
        if MIME_TYPE in m["content"]["data"]
    ]
    assert bundles, "no transcript mirror in the cell's outputs"
    return bundles[-1]  # type: ignore[no-any-return]


def shown_answers(lab: LabKernel, msg_id: str) -> dict[str, str]:
    """The model-written text each answer display of the cell shows now, by display id."""
    latest: dict[str, str] = {}
    for message in lab.messages(msg_id, "display_data", "update_display_data"):
        content = message["content"]
        display_id = content.get("transient", {}).get("display_id")
        answer = content["data"].get(ANSWER_MIME)
        if display_id and answer is not None:
            latest[display_id] = answer["markdown"]
    return latest


def wait_for_answer_text(lab: LabKernel, msg_id: str, text: str, timeout: float = 30) -> None:
    """Wait until the cell shows streamed model text containing ``text``."""
    lab.wait_for_display(msg_id, ANSWER_MIME, lambda answer: text in answer["markdown"], timeout)


def tool_results(request: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of a recorded request's newest message."""
    return [b for b in request.body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    """The text of a tool_result block, whichever content form it has."""
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
