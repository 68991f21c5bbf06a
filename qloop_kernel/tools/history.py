"""Read-only tool ``notebook_history``: the cells executed in this IPython session."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any

from qloop_kernel.redact import redacted_truncate
from qloop_kernel.text import marker
from qloop_kernel.values.summaries import bounded_repr, fit_text

MIN_MAX_CHARS = 500  # room for the title, a cut cell and the truncation markers
CELL_SOURCE_CHARS = 2_000
OUTPUT_CHARS = 500
_CELL_LABEL = re.compile(r"In\[(\d+)\]")


def notebook_history(shell: Any, *, last: int = 10, max_chars: int = 8000) -> str:
    """The last ``last`` non-empty cells executed in this session, oldest first.

    Each cell shows its execution count, its source as typed (bounded) and, when it produced
    one, a bounded repr of its ``Out[n]`` value. A cell still running (the one calling this
    tool) is marked as such. When the cells do not fit in ``max_chars`` the oldest are left out
    and a marker says how many.
    """
    if last < 1:
        raise ValueError(f"last must be at least 1, got {last}")
    if max_chars < MIN_MAX_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_MAX_CHARS}, got {max_chars}")
    cells = [(count, source) for count, source in enumerate(_inputs(shell)) if source.strip()]
    if not cells:
        return "No cells have been executed in this session yet."
    outputs = _outputs(shell)
    running = _running_counts(shell)
    chosen = cells[-last:]
    blocks = [
        _cell_block(count, source, outputs, running=count in running) for count, source in chosen
    ]
    title = f"Last {len(chosen)} of {len(cells)} executed cells, oldest first:"
    return _fit_newest(title, blocks, max_chars)


def _inputs(shell: Any) -> Sequence[str]:
    # The raw history holds what the user typed (``%%time``, not its Python translation).
    raw = getattr(shell.history_manager, "input_hist_raw", None)
    if raw:
        return [str(source) for source in raw]
    return [str(source) for source in shell.user_ns.get("In", [])]


def _outputs(shell: Any) -> Mapping[int, object]:
    out = shell.user_ns.get("Out")
    if isinstance(out, Mapping):
        return out
    return getattr(shell.history_manager, "output_hist", {})


def _running_counts(shell: Any) -> set[int]:
    """Execution counts of the cells whose code is on the call stack (such as the calling cell).

    IPython counts a cell as executed before running it, so the count alone cannot tell; its
    compiler names each cell's code object and ``format_code_name`` maps that name to ``In[n]``.
    """
    format_code_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if not callable(format_code_name):
        return set()
    counts: set[int] = set()
    frame = inspect.currentframe()
    while frame is not None:
        label = format_code_name(frame.f_code.co_filename)
        match = _CELL_LABEL.fullmatch(label[1]) if isinstance(label, tuple) else None
        if match:
            counts.add(int(match.group(1)))
        frame = frame.f_back
    return counts


def _cell_block(count: int, source: str, outputs: Mapping[int, object], *, running: bool) -> str:
    state = " (running now)" if running else ""
    text = source.strip("\n")
    if len(text) > CELL_SOURCE_CHARS:  # a secret the cut crosses is redacted whole
        note = f"\n{marker(len(text) - CELL_SOURCE_CHARS)}"
        text = redacted_truncate(text, CELL_SOURCE_CHARS, note=note)
    lines = [f"In [{count}]{state}:", text]
    if count in outputs:
        rendered = bounded_repr(outputs[count], OUTPUT_CHARS)
        separator = "\n" if "\n" in rendered else " "
        lines.append(f"Out[{count}]:{separator}{rendered}")
    return "\n".join(lines)


def _fit_newest(title: str, blocks: list[str], max_chars: int) -> str:
    """Keep the newest blocks that fit, oldest first, with a marker for the ones left out."""
    kept: list[str] = []
    used = len(title)
    for index in reversed(range(len(blocks))):
        # ``index`` blocks are older than this one: keep room for a marker counting them.
        reserve = len(_omitted_marker(index)) + 2 if index else 0
        if used + len(blocks[index]) + 2 + reserve <= max_chars:
            kept.append(blocks[index])
            used += len(blocks[index]) + 2
            continue
        omitted = index + 1
        if not kept:  # the newest cell alone is too long: show it cut rather than nothing
            kept.append(fit_text(blocks[index], max_chars - used - 2 - reserve, "cell too long"))
            omitted = index
        parts = [title, _omitted_marker(omitted)] if omitted else [title]
        return "\n\n".join([*parts, *reversed(kept)])
    return "\n\n".join([title, *reversed(kept)])


def _omitted_marker(count: int) -> str:
    return marker(count, "earlier cells", "max_chars reached; ask for fewer with last=")
