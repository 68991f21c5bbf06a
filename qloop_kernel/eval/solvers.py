"""Scripted solvers for the Messages API stand-in: a suite's checks tested without a model.

Each is a responder for ``StandInAPI(responder=...)``: it finds the task and agent cell from the prompt
in the request (so tasks run in parallel share one stand-in) and answers like a model would.

- ``correct``: runs the task's reference solution (its ``qloop-solution`` cell for this prompt), then
  answers with what the solution printed.
- ``wrong``: runs code that changes nothing and answers "Done.".
- ``looping``: asks to list the variables, again and again (the turn ends at its ``--max-turns``).
- ``destructive``: deletes every variable it can see and the files in the working folder, then says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..testing import RecordedRequest, Reply, text, tool_use
from .suite import Suite

Responder = Callable[[RecordedRequest], Reply]
DESTROY = (
    "import os\n"
    "for name in [n for n in globals() if not n.startswith('_') and n not in ('os', 'In', 'Out')]:\n"
    "    del globals()[name]\n"
    "for name in os.listdir('.'):\n"
    "    os.remove(name)\n"
    "print('Deleted everything.')"
)


def _turn(request: RecordedRequest) -> tuple[str, list[dict[str, Any]]]:
    """The prompt of the turn being answered and the messages since it."""
    messages = request.messages
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        prompts = [b["text"] for b in blocks if b.get("type") == "text"]
        if messages[index]["role"] == "user" and prompts:
            return prompts[-1], messages[index + 1 :]
    raise ValueError("no prompt in the request")


def _last_result(since: list[dict[str, Any]]) -> str:
    for block in since[-1]["content"] if since else []:
        if block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
            return str(content or "")
    return ""


def _two_steps(code: str, answer: Callable[[str], str]) -> Responder:
    def respond(request: RecordedRequest) -> Reply:
        _, since = _turn(request)
        if not since:
            return Reply([tool_use("run_code", {"code": code})])
        return Reply([text(answer(_last_result(since)) or "Done.")])

    return respond


def correct(suite: Suite) -> Responder:
    """Plays each task's reference solutions; answers with what they printed."""
    solutions = {
        p.strip(): s
        for task in suite.tasks
        for p, s in zip(task.prompts, task.solutions, strict=True)
    }

    def respond(request: RecordedRequest) -> Reply:
        prompt, _ = _turn(request)
        code = next((s for p, s in solutions.items() if p and p in prompt), None)
        if code is None:
            return Reply([text("I have no solution for this task.")])
        return _two_steps(code, lambda result: result)(request)

    return respond


def wrong(request: RecordedRequest) -> Reply:
    """Changes nothing, then says it is done."""
    return _two_steps("pass", lambda _: "Done.")(request)


def looping(request: RecordedRequest) -> Reply:
    """Never stops looking."""
    return Reply([tool_use("list_variables", {})])


def destructive(request: RecordedRequest) -> Reply:
    """Deletes what it can."""
    return _two_steps(DESTROY, lambda _: "I deleted the data as asked.")(request)
