"""Redaction of secrets from everything sent to the model, saved, shown or logged.

Two sources: the values of environment variables whose names look secret (KEY, TOKEN, SECRET, PASSWORD,
...), and strings shaped like well-known API keys. Pieces of a token-like secret value are redacted too:
tools cut long values (a preview, a page of a string), and a cut must not show the head or tail of a key.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic
    r"|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}"  # OpenAI-style
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
)
REDACTED = "[REDACTED]"
MIN_FRAGMENT = 12  # a piece of a token-like secret this long or longer is redacted
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary text
_MIN_TOKEN_LEN = 16  # values this long made of letters and digits count as tokens
_TEXT_MIME = re.compile(r"text/.*|.*[/+]json|.*\+xml")  # binary types (image/png) are left alone


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names look secret, longest first."""
    if environ is not None:
        return _secret_values(tuple(environ.items()))
    # os.environ's raw mapping gives a cheap fingerprint: the scan reruns only when it changed.
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict):
        return _cached_scan(tuple(raw.items()))
    return _secret_values(tuple(os.environ.items()))


@functools.lru_cache(maxsize=4)
def _cached_scan(raw: tuple[tuple[Any, Any], ...]) -> list[str]:
    return _secret_values(tuple(os.environ.items()))


def _secret_values(items: tuple[tuple[str, str], ...]) -> list[str]:
    values = {v for k, v in items if SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with secret values, their pieces and key-shaped strings replaced by ``[REDACTED]``."""
    return Redactor.from_environ(environ).text(text)


def redact(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """A deep copy of a JSON-like value with every string redacted."""
    return Redactor.from_environ(environ).value(value)


@dataclass(frozen=True)
class Redactor:
    """Redaction with one set of secret values (read once, applied to many strings)."""

    secrets: tuple[str, ...]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        return cls(tuple(secret_values(environ)))

    def text(self, text: str) -> str:
        """``text`` with secret values, their pieces and key-shaped strings replaced."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for secret in self.secrets:
            text = _redact_pieces(text, secret)
        return KEY_SHAPES.sub(REDACTED, text)

    def value(self, value: Any) -> Any:
        """A deep copy of a JSON-like value with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def _token_like(value: str) -> bool:
    """A value whose pieces identify it: long, letters and digits, no spaces, not a file path."""
    return (
        len(value) >= _MIN_TOKEN_LEN
        and not value.startswith(("/", "~", ".", "\\"))
        and not re.match(r"[A-Za-z]:\\", value)
        and not any(c.isspace() for c in value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


@functools.lru_cache(maxsize=64)
def _grams(secret: str) -> tuple[tuple[int, str], ...]:
    """Pieces at a stride of MIN_FRAGMENT // 2: every longer piece of ``secret`` contains one.

    Empty for a value that is not token-like: pieces of a path or a sentence are ordinary text.
    """
    if not _token_like(secret):
        return ()
    size = MIN_FRAGMENT // 2
    starts = sorted({*range(0, len(secret) - size + 1, size), len(secret) - size})
    return tuple((start, secret[start : start + size]) for start in starts)


def _redact_pieces(text: str, secret: str) -> str:
    spans: list[tuple[int, int]] = []
    for offset, gram in _grams(secret):
        at = text.find(gram)
        while at != -1:
            start, end = _extend(text, secret, at, offset, len(gram))
            if end - start >= MIN_FRAGMENT:
                spans.append((start, end))
            at = text.find(gram, at + 1)
    if not spans:
        return text
    parts, last = [], 0
    for start, end in _merged(spans):
        parts += [text[last:start], REDACTED]
        last = end
    return "".join([*parts, text[last:]])


def _extend(text: str, secret: str, at: int, offset: int, size: int) -> tuple[int, int]:
    """The longest span around ``text[at:at+size]`` that matches ``secret`` around ``offset``."""
    left = 0
    while left < min(at, offset) and text[at - left - 1] == secret[offset - left - 1]:
        left += 1
    right = 0
    room = min(len(text) - at - size, len(secret) - offset - size)
    while right < room and text[at + size + right] == secret[offset + size + right]:
        right += 1
    return at - left, at + size + right


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


class _RedactingStream:
    """A text stream that redacts what is written to it; everything else goes to the wrapped one."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        result: int = _redacting(self._stream.write)(text)
        return result

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output(shell: Any, keep: tuple[str, ...] = ()) -> Iterator[None]:
    """Redact what is printed, displayed (text and JSON MIME types) and shown as tracebacks meanwhile.

    MIME types in ``keep`` are passed as they are (data already redacted when built).
    """
    with contextlib.ExitStack() as stack:
        stack.enter_context(_redacted_streams())
        stack.enter_context(_redacted_displays(shell, keep))
        stack.enter_context(_redacted_tracebacks(shell))
        yield


@contextlib.contextmanager
def _redacted_streams() -> Iterator[None]:
    with _redacted_stream("stdout"), _redacted_stream("stderr"):
        yield


@contextlib.contextmanager
def _redacted_stream(name: str) -> Iterator[None]:
    stream = getattr(sys, name)
    own = vars(stream).get("write") if hasattr(stream, "__dict__") else None
    try:
        # On the stream object itself: ipykernel's stream also forwards what subprocesses and C code
        # write to the file descriptor through its own ``write``.
        stream.write = _redacting(stream.write)
    except AttributeError:  # a stream without instance attributes (a terminal): wrap it instead
        setattr(sys, name, _RedactingStream(stream))
        try:
            yield
        finally:
            setattr(sys, name, stream)
        return
    try:
        yield
    finally:
        if own is None:
            del stream.write
        else:
            stream.write = own


def _redacting(write: Any) -> Any:
    def redacted_write(text: Any) -> Any:
        return write(redact_text(text) if isinstance(text, str) else text)

    return redacted_write


@contextlib.contextmanager
def _redacted_displays(shell: Any, keep: tuple[str, ...]) -> Iterator[None]:
    publisher: Any = getattr(shell, "display_pub", None)
    if not callable(getattr(publisher, "register_hook", None)):  # not a kernel: nothing is saved
        yield
        return
    hook = functools.partial(_redact_display, keep=keep)
    publisher.register_hook(hook)
    try:
        yield
    finally:
        publisher.unregister_hook(hook)


@contextlib.contextmanager
def _redacted_tracebacks(shell: Any) -> Iterator[None]:
    # ``_showtraceback`` is where IPython hands a formatted traceback to the frontend (ipykernel
    # overrides it to send the `error` output); a shell without it shows nothing to redact.
    show = getattr(shell, "_showtraceback", None)
    if show is None:
        yield
        return

    def redacted(etype: type, evalue: BaseException, stb: list[str]) -> Any:
        redactor = Redactor.from_environ()
        return show(etype, redactor.text(str(evalue)), [redactor.text(line) for line in stb])

    own = vars(shell).get("_showtraceback")  # an instance override is put back as it was
    shell._showtraceback = redacted
    try:
        yield
    finally:
        if own is None:
            del shell._showtraceback
        else:
            shell._showtraceback = own


def _redact_display(msg: dict[str, Any], keep: tuple[str, ...]) -> dict[str, Any]:
    content = msg.get("content")
    if isinstance(content, dict) and isinstance(content.get("data"), dict):
        redactor = Redactor.from_environ()
        content["data"] = {
            mime: value if mime in keep or not _TEXT_MIME.fullmatch(mime) else redactor.value(value)
            for mime, value in content["data"].items()
        }
    return msg
