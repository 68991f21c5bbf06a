"""run_code: run the model's Python in the user's live namespace, through IPython.

Magics, display and inline plots work because the code goes through ``shell.run_cell``. What the code
printed and displayed (also through the file descriptors: a subprocess, a C library; descriptors.py)
is captured, shown in the agent cell, and returned to the model: stdout, stderr, the
value of the last expression, the exception with a short traceback, PNG figures as image blocks, and the
variables the step created, changed and deleted (``undo``: saved before it runs, so it can be undone).
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any

from IPython.display import display

from ..errors import ToolFailure
from ..messages import Block
from ..redact import PrivateVariables, redact_text, redacting_also
from ..settings import Settings
from ..text import counted
from ..tools.runtime import format_exception, strip_ansi, truncate
from ..values.summaries import bounded_repr
from .clusters import ClusterStep, stop_message
from .deadline import StepStopped, shielded, time_limit
from .descriptors import descriptor_output
from .session import KernelSession, session_for

MAX_IMAGES = 4
MAX_IMAGE_BASE64 = 2_000_000  # about 1.5 MB of PNG
MAX_STREAM_CHARS = 10_000
MAX_OUTPUT_CHARS = Settings.model_fields["max_output_chars"].default
OUTPUT_NOTE = "[the step printed {total:,} characters; shown: its first and last {shown:,}]\n"
RESULT_CHARS = 4_000  # the value of the last expression (lazy objects are never rendered)


@dataclass
class CodeRunner:
    """The ``run_code`` tool bound to an IPython shell."""

    shell: Any
    timeout_s: float | None = None
    private: PrivateVariables | None = None  # their values are redacted from what the code shows
    max_output_chars: int | None = None  # None: the session's setting (`%agent set`)
    # The kernel's session (its undo log, settings and running turn), passed by its owner; None:
    # the shell's (a runner made from the shell alone)
    session: KernelSession | None = None

    def kernel_session(self) -> KernelSession:
        """The session this runner's steps belong to."""
        if self.session is None:
            self.session = session_for(self.shell)
        return self.session

    def run_code(self, code: str) -> list[Block]:
        """Run Python code in the user's live Jupyter kernel namespace (variables persist between
        calls and are visible to the user). IPython magics and display() work and matplotlib
        figures are shown inline and returned as images. The last expression's value is returned.

        Args:
            code: Python source to run, as it would be typed in a notebook cell.
        """
        ran = self.execute(code)
        with ran.redacting():
            # The outputs appear in the agent cell, below the call's card, bounded like the model's view.
            limit = self.max_output_chars or output_limit(self.kernel_session())
            show_bounded(ran.captured, limit)
            content = ran.content()
        return ran.answer(content)

    def execute(self, code: str, *, own_result: bool = False) -> Ran:
        """Run ``code`` as a step (saved for undo, under the time limit and Stop, what it starts on
        a cluster stopped with it), capturing what it printed and displayed. ``own_result``: the
        last expression's value is kept for the caller instead of being shown in the running cell
        (a notebook cell the agent runs shows it as its own ``Out``)."""
        from IPython.utils.capture import capture_output

        private = self.private or PrivateVariables()
        before = private.values(self.shell.user_ns)
        log = self.kernel_session().undo
        snapshot = log.begin(code)  # what the step may change, saved for undo
        kernel_streams = (sys.stdout, sys.stderr)
        clusters = ClusterStep.begin()  # what the step starts on dask or Spark, stopped with it
        code_limit = _code_limit(self.timeout_s)
        result: Any = None
        kept = _OwnOutputs(self.shell, code) if own_result else None
        try:
            with (
                redacting_also(before),
                capture_output(display=True) as captured,
                descriptor_output(kernel_streams),  # a subprocess's or a C library's output too
                time_limit(self.timeout_s, _timeout_message(self.timeout_s)),
                kept if kept is not None else contextlib.nullcontext(),
            ):
                _accept_parents(self.shell.display_pub)
                result = self.shell.run_cell(code, store_history=False, silent=False)
        finally:
            # The step's code has ended: a limit firing again (every REFIRE_S after a stop) must
            # not cut its undo entry or the cancelling of the cluster jobs it left running.
            with shielded() as shield:
                step = log.finish(snapshot, private=private.names)
                error = _error_of(result)
                stop = stop_message(error, self.kernel_session().watch, code_limit)
                cancelled = clusters.end(stopped=result is None or stop is not None)
                if stop is not None:  # what follows reports the stop: no user code runs in it
                    shield.keep()
        if stop is not None and not isinstance(error, (StepStopped, KeyboardInterrupt)):
            error = StepStopped(stop)  # a stop a library reported as its own error (py4j)
        value = kept.value if kept is not None else (result.result if result is not None else None)
        # Private values as they were before and after the code: it may have set them.
        secrets = [*before, *private.values(self.shell.user_ns)]
        traceback = kept.traceback if kept is not None else None
        return Ran(captured, value, error, cancelled, step, secrets, traceback)


@dataclass
class Ran:
    """What one step captured: its outputs, the last expression's value, its error, what it
    stopped on a cluster and what it did to the namespace (``step``, from the undo log)."""

    captured: Any
    value: Any
    error: BaseException | None
    cancelled: list[str]
    step: Any  # undo.Step
    secrets: list[str]  # private values to redact from what it shows
    traceback: list[str] | None = None  # the error as IPython shows it (kept with own_result)

    def redacting(self) -> contextlib.AbstractContextManager[None]:
        return redacting_also(self.secrets)

    def content(self) -> list[Block]:
        """What the model reads (call inside :meth:`redacting`): outputs, value, error, and what
        the step did to the namespace."""
        if isinstance(self.error, KeyboardInterrupt):
            raise KeyboardInterrupt  # the user's interrupt ends the turn, not a tool failure
        content = _content(self.captured, self.value, self.error, self.cancelled)
        if self.step.changes:  # the model learns what its step did to the namespace
            content[0] = {**content[0], "text": f"{content[0]['text']}\n\n{self.step.text()}"}
        return [
            {**b, "text": redact_text(b["text"])} if b["type"] == "text" else b for b in content
        ]

    def answer(self, content: list[Block]) -> list[Block]:
        """``content`` as the tool's result, or the failure the model reads."""
        if self.error is not None:
            raise ToolFailure("\n".join(b["text"] for b in content if b["type"] == "text"))
        return content


class _OwnOutputs:
    """While it is entered, the last expression's value and the traceback of an error are kept
    here instead of being shown in the running cell: IPython's display hook and traceback answer
    to the agent cell, and a notebook cell the agent runs shows them as its own outputs."""

    def __init__(self, shell: Any, code: str) -> None:
        from IPython.core.displayhook import DisplayHook

        self.value: Any = None
        self.traceback: list[str] | None = None
        self._shell = shell
        self._quiet = DisplayHook.semicolon_at_end_of_expression(code)
        self._saved: Any = None

    def __call__(self, value: Any) -> None:
        if value is not None and not self._quiet:
            self.value = value

    def _keep_traceback(self, etype: Any, evalue: Any, stb: list[str]) -> None:
        self.traceback = list(stb)

    def __enter__(self) -> _OwnOutputs:
        self._saved, sys.displayhook = sys.displayhook, self
        self._shell._showtraceback = self._keep_traceback  # the instance's, over the class's
        return self

    def __exit__(self, *exc: object) -> None:
        sys.displayhook = self._saved
        vars(self._shell).pop("_showtraceback", None)


def bounded_output(text: str, limit: int) -> str:
    """``text`` as the cell shows it: whole if it fits in ``limit``, else head and tail, marked."""
    if len(text) <= limit:
        return text
    return truncate(text, limit) + "\n" + OUTPUT_NOTE.format(total=len(text), shown=limit)


def show_bounded(captured: Any, limit: int) -> None:
    """Show what a step printed and displayed, each stream and each output at most ``limit`` chars."""
    for text, stream in ((captured.stdout, sys.stdout), (captured.stderr, sys.stderr)):
        if text:
            stream.write(bounded_output(text, limit))
            stream.flush()
    for output in captured.outputs:
        data = getattr(output, "data", {}) or {}
        texts = {k: str(v) for k, v in data.items() if not k.startswith("image/")}
        if sum(map(len, texts.values())) <= limit:
            output.display()
            continue
        # One huge output (an HTML table of a whole frame): its plain text, bounded; images kept.
        images = {k: v for k, v in data.items() if k.startswith("image/")}
        plain = texts.get("text/plain") or next(iter(texts.values()))
        display({**images, "text/plain": bounded_output(plain, limit)}, raw=True)


def session_output_limit(shell: Any) -> int:  # Any: the IPython shell
    """The ``max_output_chars`` of the shell's session (the default without an agent)."""
    return output_limit(session_for(shell))


def output_limit(session: KernelSession) -> int:
    """The session's ``max_output_chars`` (the default without an agent)."""
    settings = session.settings
    return settings.max_output_chars if settings is not None else MAX_OUTPUT_CHARS


def _accept_parents(publisher: Any) -> None:
    """ipykernel sets the display publisher's parent for each request, also one a subshell (a
    Stop click) handles while the step runs: IPython's capturing publisher lacks the method."""
    if not hasattr(publisher, "set_parent"):
        publisher.set_parent = lambda parent: None


def _timeout_message(seconds: float | None) -> str:
    return f"the code ran longer than the {seconds or 0:g} s limit and was interrupted"


def _code_limit(seconds: float | None) -> tuple[float, str] | None:
    return (time.monotonic() + seconds, _timeout_message(seconds)) if seconds else None


def _error_of(result: Any) -> BaseException | None:
    return None if result is None else result.error_before_exec or result.error_in_exec


def _content(
    captured: Any, value: Any, error: BaseException | None, cancelled: list[str]
) -> list[Block]:
    sections: list[str] = []
    if captured.stdout:
        sections.append("stdout:\n" + truncate(strip_ansi(captured.stdout), MAX_STREAM_CHARS))
    if captured.stderr:
        sections.append("stderr:\n" + truncate(strip_ansi(captured.stderr), MAX_STREAM_CHARS))
    images, shown = _displays(captured.outputs)
    sections += shown
    if value is not None:
        sections.append("result:\n" + bounded_repr(value, RESULT_CHARS))
    if isinstance(error, StepStopped):  # a time limit or the Stop button
        stopped = "".join(f"; {note}" for note in cancelled)  # what it had started on a cluster
        sections.append(f"error: {error}{stopped}. Variables may be partly updated.")
    elif error is not None:
        sections.append("error:\n" + format_exception(error))
    text = "\n\n".join(sections) or "(the code ran and printed nothing)"
    return [{"type": "text", "text": text}, *images]


def _displays(outputs: list[Any]) -> tuple[list[Block], list[str]]:
    images: list[Block] = []
    texts: list[str] = []
    skipped = 0
    for output in outputs:
        data = getattr(output, "data", {}) or {}
        png = data.get("image/png")
        if isinstance(png, str) and len(images) < MAX_IMAGES and len(png) <= MAX_IMAGE_BASE64:
            images.append(_image(png.replace("\n", "")))
        elif png:
            skipped += 1
        elif "text/plain" in data:
            texts.append("displayed:\n" + truncate(strip_ansi(str(data["text/plain"])), 4000))
    if images:
        texts.append(f"{counted(len(images), 'image')} attached.")
    if skipped:
        more = counted(skipped, "more image", "more images")
        texts.append(f"{more} not attached (limit {MAX_IMAGES}, or too large).")
    return images, texts


def _image(data: str) -> Block:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
