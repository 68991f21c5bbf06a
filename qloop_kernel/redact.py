"""Redaction of secrets from everything sent to the model, saved, shown or logged.

Sources: the values of environment variables whose names look secret (KEY, TOKEN, SECRET, PASSWORD, ...);
the passwords inside connection strings held by variables named like ``*_URL``, ``*_DSN``, ``*_URI``;
strings shaped like well-known API keys; the password part of any URL with credentials
(``postgres://user:[REDACTED]@host/db``); and, while an agent step runs, the values of the variables the
user marked private. Pieces of a token-like secret value are redacted too. Everything is found on the
original text, and each redacted span grows to the whole token-like run around it, so a piece of one
key never leaves the rest of another behind (two keys of one provider share a prefix).

A bounded view of a value (a page, a preview, a truncation) is cut from the redaction of the whole with
:meth:`Redactor.excerpt`: only a window around the cut is read (the longest secret and ``WINDOW_MARGIN``
more on each side), so a page of a huge string costs what the page costs, and no cut shows a piece of a
secret.

While an agent cell runs, what is printed, displayed, raised, and written to the process's file
descriptors (subprocesses, C code, the kernel's own terminal echo) passes through the redaction.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import numbers
import os
import re
import select
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload
from urllib.parse import unquote

from .text import marker

_R = TypeVar("_R")
_Text = TypeVar("_Text", str, bytes, bytearray)

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
# scheme://user:password@ : the password is redacted, the scheme, user and host stay readable. Bounded
# repeats and the lookbehind keep the scan linear on long runs of letters.
URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<head>[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/@'\"`<>]{0,256}:)"
    r"(?P<password>[^\s/'\"`<>]{1,256})@"
)
CONNECTION_NAME = re.compile(r"(?:^|_)(?:URL|URI|DSN)$|CONNECTION_STRING|CONN_STR", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(  # libpq and ODBC key=value strings: password=..., PWD=...;
    r"\b(?:password|passwd|pwd)\s*=\s*(?:'([^']*)'|\"([^\"]*)\"|([^\s;]+))", re.IGNORECASE
)
REDACTED = "[REDACTED]"
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-]*")  # a key's characters: a redacted span grows over them
# What a cut reads past its edges besides the longest secret: more than the longest URL credential
# match (about 550 characters) and any key shape a provider issues, twice over.
WINDOW_MARGIN = 2_048
MIN_FRAGMENT = 12  # a piece of a token-like secret this long or longer is redacted
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary text
_MIN_TOKEN_LEN = 16  # values this long made of letters and digits count as tokens
_MIN_PRIVATE_LEN = 4  # private values shorter than this ("1", "yes") are not searched for
_TEXT_MIME = re.compile(r"text/.*|.*[/+]json|.*\+xml")  # binary types (image/png) are left alone
_log = logging.getLogger(__name__)
# Values redacted everywhere while an agent step runs (see redacting_also); read from any thread.
_also_redacted: tuple[str, ...] = ()
_also_lock = threading.Lock()
_also_stack: list[tuple[str, ...]] = []


# Secret shapes an operator adds (the admin floor's redact_patterns): see redact_shapes.
_extra_shapes: tuple[re.Pattern[str], ...] = ()


def redact_shapes(patterns: Iterable[str]) -> None:
    """Also redact every match of these regular expressions, everywhere, from now on (the admin
    floor's ``redact_patterns``, policy/admin.py); replaces the shapes given before."""
    global _extra_shapes
    _extra_shapes = tuple(re.compile(p) for p in patterns)


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
    for name, value in items:
        if CONNECTION_NAME.search(name):
            values.update(p for p in connection_passwords(value) if len(p) >= _MIN_SECRET_LEN)
    return sorted(values, key=len, reverse=True)


def connection_passwords(value: str) -> set[str]:
    """The passwords inside a connection string: URL credentials and ``password=`` keywords.

    Each as written and percent-decoded (a program reading the URL prints the decoded form).
    """
    found = {m["password"] for m in URL_CREDENTIALS.finditer(value)}
    found |= {
        next(g for g in m.groups() if g is not None) for m in _KEYWORD_PASSWORD.finditer(value)
    }
    return {form for password in found for form in (password, unquote(password)) if form}


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with secret values, their pieces and key-shaped strings replaced by ``[REDACTED]``."""
    return Redactor.from_environ(environ).text(text)


@overload
def redacted_excerpt(value: str, start: int, stop: int) -> str: ...
@overload
def redacted_excerpt(value: bytes, start: int, stop: int) -> bytes: ...
@overload
def redacted_excerpt(value: bytearray, start: int, stop: int) -> bytearray: ...
def redacted_excerpt(value: _Text, start: int, stop: int) -> _Text:
    """``value[start:stop]`` cut from the redaction of the whole ``value`` (see Redactor.excerpt;
    bytes as Redactor.excerpt_bytes reads them)."""
    redactor = Redactor.from_environ()
    if isinstance(value, str):
        return redactor.excerpt(value, start, stop)
    shown = redactor.excerpt_bytes(value, start, stop)
    return bytearray(shown) if isinstance(value, bytearray) else shown


@overload
def redacted_head(value: str, length: int) -> str: ...
@overload
def redacted_head(value: bytes, length: int) -> bytes: ...
@overload
def redacted_head(value: bytearray, length: int) -> bytearray: ...
def redacted_head(value: _Text, length: int) -> _Text:
    """The first ``length`` characters (or bytes) of ``value``: all of it when it is no longer (it is
    redacted whole where it is shown), else its start cut from the redacted whole."""
    if len(value) <= length:
        return value[:length]
    return redacted_excerpt(value, 0, length)[:length]


def redacted_clip(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` if it fits in ``limit`` characters, else its start, cut from the redacted whole."""
    return text if len(text) <= limit else Redactor.from_environ().clip(text, limit, ellipsis)


def redacted_truncate(text: str, limit: int, *, note: str | None = None) -> str:
    """``text`` redacted and bounded as :func:`qloop_kernel.text.truncate` bounds it; each part is
    cut from the redacted whole."""
    return Redactor.from_environ().truncate(text, limit, note=note)


# Any: a JSON-like value of any shape, given back in that shape (tuples as lists)
def redact(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """A deep copy of a JSON-like value with every string redacted."""
    return Redactor.from_environ(environ).value(value)


@dataclass(frozen=True)
class Redactor:
    """Redaction with one set of secret values (read once, applied to many strings)."""

    secrets: tuple[str, ...]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """The environment's secrets (``os.environ`` by default) plus the values being kept private."""
        found = secret_values(environ)
        extra = _also_redacted
        if not extra:
            return cls(tuple(found))
        return cls(tuple(sorted({*found, *extra}, key=len, reverse=True)))

    def text(self, text: str) -> str:
        """``text`` with secret values, their pieces and key-shaped strings replaced."""
        return _replaced(text, self.spans(text), 0, len(text))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` holds secrets: sorted, disjoint ``(start, end)`` spans, each grown to the
        whole token-like run around it. Everything is found on ``text`` as it is."""
        found: list[tuple[int, int]] = []
        masked = text  # whole occurrences blanked (same length): their pieces need no search
        for secret in self.secrets:
            if whole := _occurrences(text, secret):
                found += whole
                masked = masked.replace(secret, "\0" * len(secret))
        for secret in self.secrets:
            found += _piece_spans(masked, secret)
        if "://" in text:
            found += [m.span("password") for m in URL_CREDENTIALS.finditer(text)]
        found += [m.span() for m in KEY_SHAPES.finditer(text)]
        found += [m.span() for shape in _extra_shapes for m in shape.finditer(text) if m[0]]
        return _merged([_grown(text, start, end) for start, end in found])

    def excerpt(self, text: str, start: int, stop: int) -> str:
        """``text[start:stop]`` as the redaction of the whole ``text`` shows it: a secret that the
        cut crosses is ``[REDACTED]``, never a piece of it. Reads only a window around the cut."""
        start, stop = max(0, start), min(len(text), stop)
        if start >= stop:
            return ""
        low, high = self._window(len(text), start, stop)
        around = text[low:high]
        return _replaced(around, self.spans(around), start - low, stop - low)

    def excerpt_bytes(self, data: bytes | bytearray, start: int, stop: int) -> bytes:
        """``data[start:stop]`` redacted as :meth:`excerpt` does (bytes read as Latin-1, so ASCII
        secrets are found and every other byte is kept as it is)."""
        start, stop = max(0, start), min(len(data), stop)
        if start >= stop:
            return b""
        low, high = self._window(len(data), start, stop)
        around = bytes(data[low:high]).decode("latin-1")
        shown = _replaced(around, self.spans(around), start - low, stop - low)
        return shown.encode("latin-1")

    def clip(self, text: str, limit: int, ellipsis: str = "…") -> str:
        """``text`` if it fits in ``limit`` characters, else its redacted start ending in ``ellipsis``
        (as :func:`qloop_kernel.text.clip`, cut from the redacted whole)."""
        if len(text) <= limit:
            return text
        room = max(0, limit - len(ellipsis))
        return self.excerpt(text, 0, room)[:room] + ellipsis

    def truncate(self, text: str, limit: int, *, note: str | None = None) -> str:
        """``text`` redacted, kept whole if it fits in ``limit`` characters, else its head and tail
        around the truncation marker (or its head and ``note``), as :func:`qloop_kernel.text.truncate`
        does, each part cut from the redacted whole."""
        if len(text) <= limit:
            return self.text(text)
        if note is not None:
            return self.excerpt(text, 0, limit)[:limit] + note
        head = limit * 2 // 3
        tail = limit - head
        omitted = len(text) - head - tail
        shown_tail = self.excerpt(text, len(text) - tail, len(text)) if tail else ""
        return self.excerpt(text, 0, head)[:head] + f"\n{marker(omitted)}\n" + shown_tail[-tail:]

    def _window(self, length: int, start: int, stop: int) -> tuple[int, int]:
        reach = WINDOW_MARGIN + max((len(secret) for secret in self.secrets), default=0)
        return max(0, start - reach), min(length, stop + reach)

    def value(self, value: Any) -> Any:  # Any: a JSON-like value, given back in its shape
        """A deep copy of a JSON-like value with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.text(v) if type(v) is str else self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.text(v) if type(v) is str else self.value(v) for v in value]
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


def _occurrences(text: str, secret: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    at = text.find(secret)
    while at != -1:
        found.append((at, at + len(secret)))
        at = text.find(secret, at + len(secret))
    return found


def _piece_spans(text: str, secret: str) -> list[tuple[int, int]]:
    """The pieces of ``secret`` (MIN_FRAGMENT characters or more) that ``text`` holds."""
    spans: list[tuple[int, int]] = []
    for offset, gram in _grams(secret):
        at = text.find(gram)
        while at != -1:
            start, end = _extend(text, secret, at, offset, len(gram))
            if end - start >= MIN_FRAGMENT:
                spans.append((start, end))
            at = text.find(gram, at + 1)
    return spans


def _grown(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` grown to the whole token-like run around it: the rest of a credential that
    shares a piece with a secret goes with it."""
    return _run_start(text, start), end + _run_length(text, end)


def _run_length(text: str, at: int) -> int:
    found = _TOKEN_RUN.match(text, at)
    return found.end() - at if found else 0


def _run_start(text: str, at: int) -> int:
    """Where the token-like run ending at ``at`` starts: read backwards in growing chunks."""
    size = 64
    while at > 0:
        low = max(0, at - size)
        backwards = text[low:at][::-1]
        run = _run_length(backwards, 0)
        if run < len(backwards):
            return at - run
        at, size = low, size * 2
    return 0


def _replaced(text: str, spans: list[tuple[int, int]], start: int, stop: int) -> str:
    """``text[start:stop]`` with each of ``spans`` it overlaps replaced by ``[REDACTED]``."""
    parts, last = [], start
    for low, high in spans:
        if high <= start or low >= stop:
            continue
        parts += [text[last : max(low, start)], REDACTED]
        last = min(high, stop)
    return "".join([*parts, text[last:stop]])


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

    def __getattr__(self, name: str) -> Any:  # Any: the wrapped stream's attribute, whatever it is
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
        stack.enter_context(redacted_fds(_stream_fds()))
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


def _redacting(write: Callable[[str], _R]) -> Callable[[str], _R]:
    def redacted_write(text: str) -> _R:
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

    def redacted(etype: type, evalue: BaseException, stb: list[str]) -> object:
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


# -- values kept private while an agent step runs --------------------------------------------------


@contextlib.contextmanager
def redacting_also(values: Iterable[str]) -> Iterator[None]:
    """Redact ``values`` too, in every redaction of this process (all threads), meanwhile."""
    global _also_redacted
    entry = tuple(v for v in values if len(v) >= _MIN_PRIVATE_LEN)
    with _also_lock:
        _also_stack.append(entry)
        _also_redacted = tuple({v for e in _also_stack for v in e})
    try:
        yield
    finally:
        with _also_lock:
            _also_stack.remove(entry)
            _also_redacted = tuple({v for e in _also_stack for v in e})


@dataclass
class PrivateVariables:
    """Variables the user marked private (``%agent private NAME``): tools refuse to inspect or list
    them, and what run_code shows is redacted of their values.

    Only cheap text forms are searched for: ``str`` and ``bytes`` values, numbers, and those directly
    inside a list, tuple, set or dict (its values, at most ``MAX_ITEMS``). A value the code transforms
    (formats, slices, encodes) before printing it is not recognised.
    """

    MAX_ITEMS = 100
    names: set[str] = field(default_factory=set)

    def covers(self, path: str) -> bool:
        """Whether a variable name or dotted attribute path starts at a private variable."""
        return path.strip().split(".")[0] in self.names

    def values(self, namespace: Mapping[str, object]) -> list[str]:
        """The text forms of the private variables' current values in ``namespace``."""
        found: set[str] = set()
        for name in self.names:
            if name in namespace:
                found.update(_value_texts(namespace[name], nested=True))
        return sorted((v for v in found if len(v) >= _MIN_PRIVATE_LEN), key=len, reverse=True)

    def redactor(self, namespace: Mapping[str, object]) -> Redactor:
        """A redactor for the environment's secrets plus the private values in ``namespace``."""
        secrets = {*Redactor.from_environ().secrets, *self.values(namespace)}
        return Redactor(tuple(sorted(secrets, key=len, reverse=True)))

    @contextlib.contextmanager
    def redacting(self, namespace: Mapping[str, object]) -> Iterator[Redactor]:
        """Every redaction meanwhile (the cuts of the views a tool builds included) also redacts
        the private values in ``namespace``; gives the redactor for what the tool returns."""
        with redacting_also(self.values(namespace)):
            yield Redactor.from_environ()


def private_variables(session: Any) -> PrivateVariables:
    """The private variables of an agent session (kept on its conversation manager)."""
    found = getattr(session, "private_variables", None)
    if not isinstance(found, PrivateVariables):
        found = PrivateVariables()
        session.private_variables = found
    return found


# Numbers of these libraries are read with their own str/repr; a subclass of Python's own numbers
# through the built-in class's methods; any other class's methods are the user's code, not run.
_NUMBER_LIBRARIES = frozenset({"numpy", "decimal", "fractions", "_decimal", "_pydecimal"})
_BUILTIN_NUMBERS = (int, float, complex)
_BUILTIN_CONTAINERS = (dict, list, tuple, set, frozenset)


def _value_texts(value: object, *, nested: bool) -> list[str]:
    """The texts a private value shows as, read through Python's own classes: a subclass's
    ``__repr__``, ``__str__`` or ``__iter__`` (code of the notebook's) is never called."""
    if isinstance(value, str):
        return [str.__str__(value), str.__repr__(value)[1:-1]]
    if isinstance(value, bytes | bytearray):
        raw = bytes(memoryview(value))  # the buffer, not a subclass's methods
        return [raw.decode("utf-8", "replace"), bytes.__repr__(raw)[2:-1]]
    if isinstance(value, bool):
        return []
    texts = _number_texts(value)
    if texts is not None:
        return texts
    if not nested or not isinstance(value, _BUILTIN_CONTAINERS):
        return []
    base = next(kind for kind in _BUILTIN_CONTAINERS if isinstance(value, kind))
    items = dict.values(value) if base is dict else base.__iter__(value)  # type: ignore[arg-type]
    texts = []
    for index, item in enumerate(items):
        if index >= PrivateVariables.MAX_ITEMS:
            break
        texts += _value_texts(item, nested=False)
    return texts


def _number_texts(value: object) -> list[str] | None:
    for kind in _BUILTIN_NUMBERS:
        if isinstance(value, kind):
            # their str is their repr; object.__str__ would call a subclass's __repr__
            return [kind.__repr__(value)]
    cls = type(value)
    if isinstance(value, numbers.Number) and cls.__module__.split(".")[0] in _NUMBER_LIBRARIES:
        return [str(value), repr(value)]
    return None


# -- file descriptors: subprocesses, C code and the kernel's own terminal ---------------------------

_RELAY_IDLE_S = 0.05  # a partial line (a prompt, a progress bar) is passed on after this pause
_RELAY_MAX_PENDING = 16_384  # a longer line is passed on in pieces ...
_RELAY_KEEP = 512  # ... keeping this much back, so a secret is not split between two pieces
_RELAY_DRAIN_S = 0.5  # how long the end of a step waits for the relay to pass the last output on
_relays: dict[int, _FdRelay] = {}  # the running relays, by the descriptor they relay


def _stream_fds() -> tuple[int, ...]:
    """fds 1 and 2, plus the descriptors ``sys.stdout``/``sys.stderr`` report as theirs.

    ipykernel's streams report a copy of the kernel's original stdout/stderr (its terminal or log):
    subprocesses given ``stdout=sys.stdout`` write there, and so does ipykernel's own echo of fd output.
    """
    fds = [1, 2]
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
            continue
        if isinstance(fd, int) and fd not in fds:
            fds.append(fd)
    return tuple(fds)


@contextlib.contextmanager
def redacted_fds(fds: Iterable[int] = (1, 2)) -> Iterator[None]:
    """Route what is written to the file descriptors ``fds`` through a redacting relay meanwhile.

    Each descriptor is pointed at a pipe; a thread reads it line by line, redacts, and writes to where
    the descriptor pointed before (for a kernel: ipykernel's own pipe, which shows the text in the cell
    and echoes it to the terminal). Restored when the block ends, also on errors and interrupts. A
    descriptor that cannot be relayed (not open, not POSIX) is left as it is.
    """
    with contextlib.ExitStack() as stack:
        for fd in fds:
            relay = _FdRelay.start(fd)
            if relay is not None:
                stack.callback(relay.stop)
        yield


def relay_backlog(fd: int) -> int:
    """Bytes written to ``fd`` that its redacting relay has not passed on yet (0 without one)."""
    relay = _relays.get(fd)
    if relay is None:
        return 0
    return relay.held + unread_bytes(relay.source)


def unread_bytes(fd: int) -> int:
    """Bytes waiting to be read from the pipe ``fd`` (0 when that cannot be told)."""
    try:
        import fcntl  # POSIX only
        import termios

        answer = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    except (ImportError, OSError):
        return 0
    return int(struct.unpack("i", answer)[0])


class _FdRelay:
    """One descriptor pointed at a pipe whose reader redacts and forwards to the old target."""

    def __init__(self, fd: int, target: int, source: int) -> None:
        self.fd, self.target, self.source = fd, target, source
        self.held = 0  # bytes read but not passed on yet (the end of a line still being written)
        self.thread = threading.Thread(target=self._run, name=f"qloop-redact-fd{fd}", daemon=True)

    @classmethod
    def start(cls, fd: int) -> _FdRelay | None:
        if os.name != "posix":
            return None
        _flush_python_stream(fd)  # text buffered before the block goes out the old way
        try:
            inheritable = os.get_inheritable(fd)
            target = os.dup(fd)
        except OSError:
            return None
        source, sink = os.pipe()
        try:
            os.dup2(sink, fd, inheritable=inheritable)
        except OSError:
            os.close(source)
            os.close(target)
            return None
        finally:
            os.close(sink)
        relay = cls(fd, target, source)
        relay.thread.start()
        _relays[fd] = relay
        return relay

    def stop(self) -> None:
        _flush_python_stream(self.fd)  # text buffered during the block goes through the relay
        if _relays.get(self.fd) is self:
            del _relays[self.fd]
        os.dup2(self.target, self.fd, inheritable=os.get_inheritable(self.fd))
        # The relay ends when every writer is gone; a background process started by the step keeps
        # its copy, and the relay goes on redacting its output after the step.
        self.thread.join(_RELAY_DRAIN_S)

    def _run(self) -> None:
        pending = b""
        try:
            while True:
                idle = _RELAY_IDLE_S if pending else None
                if not select.select([self.source], [], [], idle)[0]:
                    pending = self._forward(pending, everything=True)
                    self.held = len(pending)
                    continue
                # Counted as held before it leaves the pipe, so relay_backlog never misses it.
                size = unread_bytes(self.source) or 65_536
                self.held = len(pending) + size
                chunk = os.read(self.source, size)
                if not chunk:
                    break
                pending = self._forward(pending + chunk, everything=False)
                self.held = len(pending)
            self._forward(pending, everything=True)
        except OSError as exc:
            _log.debug("fd %d relay stopped: %s", self.fd, exc)
        finally:
            os.close(self.source)
            os.close(self.target)

    def _forward(self, data: bytes, *, everything: bool) -> bytes:
        """Write the complete lines of ``data`` redacted (all of it with ``everything``); return the rest."""
        cut = len(data) if everything else max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if len(data) - cut > _RELAY_MAX_PENDING:
            cut = len(data) - _RELAY_KEEP
        if cut:
            _write_all(self.target, _redacted_bytes(data[:cut]))
        return data[cut:]


def _redacted_bytes(data: bytes) -> bytes:
    # surrogateescape carries bytes that are not UTF-8 through unchanged
    try:
        return redact_text(data.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
    except Exception:  # the relay must keep draining the pipe, or the writers would block
        _log.exception("redaction of fd output failed")
        return f"{REDACTED} (output withheld: redaction failed)\n".encode()


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _flush_python_stream(fd: int) -> None:
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None and stream.fileno() == fd:
                stream.flush()
