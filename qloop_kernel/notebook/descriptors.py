"""What a code step writes to the process's file descriptors, captured with its Python output.

ipykernel points file descriptors 1 and 2 at pipes, and a thread per stream reads them and forwards
what it reads to the frontend (``OutStream._watch_pipe_fd``): the output of a subprocess, of
``os.system``, of ``os.write`` and of C libraries. IPython's ``capture_output`` swaps ``sys.stdout``
and ``sys.stderr`` only, so without this that output bypasses a step's capture: sent whole to the
browser, never bounded, never seen by the model. While a step runs, the forwarding thread's ``write``
goes to the step's capture instead, after what the step printed from Python (in a fixed order, so
that a replay's output compares with its saved run). When the step wrote to a descriptor, or output
is still on its way (in a pipe, or in the redacting relay an agent cell runs, redact.py), a marker
written to the descriptor tells when everything before it has been read.

This relies on private ipykernel attributes; a stream without them (a terminal, another kernel) is
left alone, and its descriptor output is shown as before.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from ..redact import relay_backlog, unread_bytes

DRAIN_WAIT_S = 2.0  # at most this long for the pipe's reader to reach the end marker
# An OSC sequence, which the terminal ipykernel also echoes the pipe to does not show; the carriage
# return ends a line for the redacting relay (redact.py), which passes it on at once.
MARKER = "\x1b]5379;qloop-step-end\x07\r"


def _watched(stream: Any) -> bool:
    """Whether ``stream`` is an ipykernel stream forwarding a descriptor's pipe."""
    return (
        bool(getattr(stream, "_should_watch", False))
        and isinstance(getattr(stream, "_fid", None), int)
        and isinstance(getattr(stream, "_original_stdstream_fd", None), int)
        and hasattr(stream, "__dict__")
    )


def _marker_prefix(text: str) -> int:
    """The length of the longest end of ``text`` that begins the marker (it may be split)."""
    for size in range(min(len(MARKER) - 1, len(text)), 0, -1):
        if MARKER.startswith(text[-size:]):
            return size
    return 0


class _Redirect:
    """Stands in for one kernel stream's ``write`` while a step runs."""

    def __init__(self, stream: Any, target: TextIO) -> None:
        self.stream = stream
        self.target = target
        # The stream's own ``write`` may be an instance attribute already (the agent cell's
        # redaction, redact.py): it is what later output goes through, and it is put back.
        self._previous = vars(stream).get("write")
        self._pass_on = self._previous or functools.partial(type(stream).write, stream)
        self.seen = False  # something came through the descriptor during the step
        # Kept apart and put after the step's Python output at the end: the pipe's reader runs on
        # its own thread, so the two would otherwise interleave differently from run to run (and a
        # replay would seem to differ from its saved run).
        self._buffer = io.StringIO()
        self.drained = threading.Event()
        self._held = ""  # the end of a read that may begin the marker
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.seen = True
            if self.drained.is_set():  # after the step: written by something still running
                return int(self._pass_on(text))
            joined, self._held = self._held + text, ""
            at = joined.find(MARKER)
            if at >= 0:
                self._buffer.write(joined[:at])
                self.drained.set()
                rest = joined[at + len(MARKER) :]
                if rest:
                    self._pass_on(rest)
                return len(text)
            keep = _marker_prefix(joined)
            if keep:
                joined, self._held = joined[:-keep], joined[-keep:]
            self._buffer.write(joined)
            return len(text)

    def release(self) -> None:
        """Give the stream the ``write`` it had back, and the step what came through."""
        with self._lock:
            if self._previous is not None:
                self.stream.write = self._previous
            else:
                with contextlib.suppress(AttributeError):
                    del self.stream.write
            text = self._buffer.getvalue() + self._held
            self._held = ""
            if text:
                self.target.write(text)


@contextlib.contextmanager
def descriptor_output(kernel_streams: Sequence[Any]) -> Iterator[None]:
    """Send what the descriptors behind ``kernel_streams`` (the kernel's stdout and stderr, taken
    before ``capture_output``) receive to ``sys.stdout`` and ``sys.stderr`` as they are on entry."""
    targets = (sys.stdout, sys.stderr)
    redirects = [
        _Redirect(stream, target)
        for stream, target in zip(kernel_streams, targets, strict=False)
        if _watched(stream) and stream is not target
    ]
    for redirect in redirects:
        redirect.stream.write = redirect.write  # the pipe's reader looks it up on each read
    try:
        yield
    finally:
        try:
            for redirect in redirects:
                stream = redirect.stream
                # Still on its way: in ipykernel's pipe, or in the redacting relay before it.
                waiting = unread_bytes(stream._fid) + relay_backlog(stream._original_stdstream_fd)
                if redirect.seen or waiting > 0:
                    os.write(stream._original_stdstream_fd, MARKER.encode())
                    redirect.drained.wait(DRAIN_WAIT_S)
        finally:
            for redirect in redirects:
                redirect.release()
