"""The cells that ended in an error since the kernel started: what ``%agent fix`` works from.

An IPython ``post_run_cell`` hook, registered when the extension loads, keeps each failed cell (by
the frontend's cell id) in the kernel's session: its source as run, the error, a bounded traceback
(the frames of the notebook's code and the innermost library frames; a deep recursion keeps its
first and last frames) and the names its failing lines use. A cell that runs without error since is
forgotten; a restarted kernel starts with none. The page's Fix, Explain or Edit of a cell (an
``%agent`` line sent with the cell's id) is not a run of that cell: it changes nothing here. Nothing
here is redacted: ``fix.py`` redacts what
it sends.
"""

from __future__ import annotations

import builtins
import io
import keyword
import linecache
import re
import tokenize
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

USER_FRAMES = 8  # the notebook's frames kept: the first and last halves of a longer chain
LIBRARY_FRAMES = 3  # the innermost frames of installed code kept
LINE_CHARS = 300  # a frame's line of code is cut here
ERROR_CHARS = 2_000  # the error's message is cut here
MAX_FAILED = 50  # failed cells remembered (the oldest go first)
# ipykernel names a cell's code /tmp/ipykernel_PID/NUMBER.py; plain IPython <ipython-input-...>
_CELL_FILE = re.compile(r"(ipykernel_\d+[/\\]\d+\.py$)|(^<ipython-input-)")


@dataclass(frozen=True)
class FailedCell:
    """One cell's last error."""

    cell_id: str
    source: str  # as it ran
    error: str  # ``Type: message``, bounded
    traceback: str  # bounded: see ``bounded_traceback``
    names: tuple[str, ...]  # the names the failing lines of the notebook's code use
    agent: bool  # an agent cell (``%%agent`` or ``%agent``) failed: not a cell to fix


def is_agent_cell(source: str) -> bool:
    """Whether ``source`` is an agent cell or an ``%agent`` line."""
    return source.lstrip().startswith(("%%agent", "%agent"))


# The execute request of the page's Fix, Explain or Edit with agent of a cell carries this in its
# metadata (with the cell's id as ``cellId``): its outputs go to the page's assist area beside the
# cell, not into the cell, and the page saves its record under the cell's ``qloop_assist`` key.
# Here (not in cell.py) so that the hooks the extension's load registers stay light.
ASSIST_KEY = "qloopAssist"
ASSIST_ACTIONS = ("fix", "explain", "edit")


def assist_of(metadata: Any) -> str | None:
    """The page's Fix, Explain or Edit named in an execute request's metadata, or None."""
    found = metadata.get(ASSIST_KEY) if isinstance(metadata, dict) else None
    return found if found in ASSIST_ACTIONS else None


def assist_running(shell: Any) -> bool:
    """Whether the request running now is the page's Fix, Explain or Edit of a cell: not a run of
    that cell, so the hooks that follow the cells' runs leave it out."""
    kernel = getattr(shell, "kernel", None)
    parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else {}
    return assist_of((parent or {}).get("metadata") or {}) is not None


def track_failures(shell: Any, failed: dict[str, FailedCell]) -> None:
    """Keep in ``failed`` (the session's) every cell of ``shell`` that ends in an error, and forget
    one that runs without error since."""

    def after(result: Any) -> None:  # Any: IPython's ExecutionResult
        info = getattr(result, "info", None)
        cell_id, source = getattr(info, "cell_id", None), getattr(info, "raw_cell", None)
        if not isinstance(cell_id, str) or not cell_id or not isinstance(source, str):
            return
        if assist_running(shell):  # the page's Fix of the cell, not a run of it
            return
        failed.pop(cell_id, None)  # the newest failure last
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if isinstance(error, BaseException) and not isinstance(error, KeyboardInterrupt):
            failed[cell_id] = failed_cell(cell_id, source, error)
            while len(failed) > MAX_FAILED:
                failed.pop(next(iter(failed)))

    shell.events.register("post_run_cell", after)


def failed_cell(cell_id: str, source: str, error: BaseException) -> FailedCell:
    """What is kept of ``error``, raised by the cell ``cell_id`` running ``source``."""
    frames = traceback.extract_tb(error.__traceback__)
    lines = [f.line or "" for f in frames if is_cell_frame(f.filename)]
    return FailedCell(
        cell_id=cell_id,
        source=source,
        error=_error_line(error),
        traceback=bounded_traceback(error.__traceback__),
        names=names_in(lines),
        agent=is_agent_cell(source),
    )


def is_cell_frame(filename: str) -> bool:
    """Whether a frame's file is a notebook cell's code."""
    return bool(_CELL_FILE.search(filename))


def _error_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " [cut]"


def bounded_traceback(tb: TracebackType | None) -> str:
    """The frames of the notebook's code (the first and last of a longer chain, the count left
    out said) and the innermost frames of installed code, innermost last."""
    frames = traceback.extract_tb(tb)
    user = [i for i, f in enumerate(frames) if is_cell_frame(f.filename)]
    library = [i for i, f in enumerate(frames) if not is_cell_frame(f.filename)]
    kept = set(user[: USER_FRAMES // 2] + user[-(USER_FRAMES // 2) :])
    kept |= set(library[-LIBRARY_FRAMES:])
    out: list[str] = []
    skipped = 0
    for index, frame in enumerate(frames):
        if index not in kept:
            skipped += 1
            continue
        if skipped:
            out.append(f"  ... {skipped} frames left out ...")
            skipped = 0
        out.append(_frame_text(frame))
    if skipped:
        out.append(f"  ... {skipped} frames left out ...")
    return "\n".join(out)


def _frame_text(frame: traceback.FrameSummary) -> str:
    where = "this cell" if is_cell_frame(frame.filename) else frame.filename
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    if len(code) > LINE_CHARS:
        code = code[:LINE_CHARS] + " [cut]"
    return f"  {where}, line {frame.lineno}, in {frame.name}\n    {code}"


def names_in(lines: list[str]) -> tuple[str, ...]:
    """The identifiers ``lines`` use (not keywords or builtins), in order, each once."""
    found: dict[str, None] = {}
    for text in lines:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text.strip()).readline))
        except (tokenize.TokenError, SyntaxError):
            continue
        for token in tokens:
            word = token.string
            usable = not keyword.iskeyword(word) and not hasattr(builtins, word)
            if token.type == tokenize.NAME and usable:
                found[word] = None
    return tuple(found)
