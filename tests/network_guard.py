"""Fail every connection outside loopback, in the test process and in processes it starts.

:func:`install` patches ``socket.socket.connect`` / ``connect_ex`` / ``sendto``,
``socket.create_connection`` and ``socket.getaddrinfo``: an address outside 127.0.0.0/8 and ::1
(unix socket paths are fine) raises :class:`NetworkBlocked` at once and is appended to a log file, so that an attempt a
library swallows (an SDK retry, a best-effort update check) still fails the test run.

:func:`subprocess_env` writes a ``sitecustomize.py`` that installs the same guard in any Python
started with the returned environment (kernels, ``qloop run``, nbclient). This module imports
only the standard library: it is loaded by path at the start of those interpreters.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG_ENV = "QLOOP_TEST_NETWORK_LOG"
"""Environment variable naming the log file of blocked attempts (one line each)."""

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})

_lock = threading.Lock()
_originals: dict[str, Any] = {}


class NetworkBlocked(OSError):
    """A test tried to reach an address outside loopback."""

    def __init__(self, what: str) -> None:
        super().__init__(
            errno.ENETUNREACH,
            f"network access outside loopback is blocked in the tests: {what} "
            "(only 127.0.0.0/8, ::1 and unix sockets are allowed)",
        )


def is_loopback_host(host: object) -> bool:
    """True for a loopback IP literal or a name that always means this machine."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower().rstrip(".")
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _allowed_address(family: int, address: Any) -> bool:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True  # unix socket paths, netlink, ...: never leave the machine
    host = address[0] if isinstance(address, tuple) and address else address
    return is_loopback_host(host)


def _resolvable(host: Any) -> bool:
    """Names getaddrinfo may look up: none (binding), IP literals (connect checks them), local names."""
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if _is_ip_literal(host) or is_loopback_host(host):
        return True
    return host.lower() == socket.gethostname().lower()  # /etc/hosts, used by jupyter_client


def _refuse(what: str) -> NetworkBlocked:
    path = os.environ.get(LOG_ENV)
    if path:
        with _lock, open(path, "a", encoding="utf-8") as log:
            log.write(f"pid {os.getpid()}: {what}\n")
    return NetworkBlocked(what)


def _describe(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return repr(address)


def _guarded_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any) -> Any:
        # Connecting a datagram socket sends nothing (dask finds its own address that way);
        # what it sends is checked by sendto.
        if self.type != socket.SOCK_DGRAM and not _allowed_address(self.family, address):
            raise _refuse(f"connect to {_describe(address)}")
        return original(self, address)

    connect.__wrapped__ = original  # type: ignore[attr-defined]
    return connect


def _guarded_sendto(original: Callable[..., Any]) -> Callable[..., Any]:
    def sendto(self: socket.socket, data: Any, *flags_and_address: Any) -> Any:
        address = flags_and_address[-1] if flags_and_address else None
        if not _allowed_address(self.family, address):
            raise _refuse(f"sendto {_describe(address)}")
        return original(self, data, *flags_and_address)

    return sendto


def _guarded_create_connection(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        host = address[0] if isinstance(address, tuple) and address else address
        if not is_loopback_host(host):
            raise _refuse(f"create_connection to {_describe(address)}")
        return original(address, *args, **kwargs)  # type: ignore[no-any-return]

    return create_connection


def _guarded_getaddrinfo(original: Callable[..., Any]) -> Callable[..., Any]:
    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _resolvable(host):
            raise _refuse(f"name lookup of {host!r}")
        return original(host, *args, **kwargs)

    return getaddrinfo


def install(log_path: str | os.PathLike[str] | None = None) -> None:
    """Patch the socket module (idempotent); blocked attempts go to ``log_path`` if given."""
    if log_path is not None:
        os.environ[LOG_ENV] = os.fspath(log_path)
    with _lock:
        if _originals:
            return
        _originals.update(
            connect=socket.socket.connect,
            connect_ex=socket.socket.connect_ex,
            sendto=socket.socket.sendto,
            create_connection=socket.create_connection,
            getaddrinfo=socket.getaddrinfo,
        )
    socket.socket.connect = _guarded_connect(_originals["connect"])  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect(_originals["connect_ex"])  # type: ignore[method-assign]
    socket.socket.sendto = _guarded_sendto(_originals["sendto"])  # type: ignore[method-assign]
    socket.create_connection = _guarded_create_connection(_originals["create_connection"])
    socket.getaddrinfo = _guarded_getaddrinfo(_originals["getaddrinfo"])


def uninstall() -> None:
    """Restore the socket module."""
    with _lock:
        originals = dict(_originals)
        _originals.clear()
    if originals:
        socket.socket.connect = originals["connect"]  # type: ignore[method-assign]
        socket.socket.connect_ex = originals["connect_ex"]  # type: ignore[method-assign]
        socket.socket.sendto = originals["sendto"]  # type: ignore[method-assign]
        socket.create_connection = originals["create_connection"]
        socket.getaddrinfo = originals["getaddrinfo"]


SITECUSTOMIZE = """\
# Installs the tests' network guard in every Python started by the test run.
import importlib.util as _util
import os as _os

_spec = _util.spec_from_file_location("_qloop_network_guard", {guard!r})
_guard = _util.module_from_spec(_spec)
_spec.loader.exec_module(_guard)
_guard.install()
_guard.chain_sitecustomize()
"""


def chain_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one shadows, if the interpreter has one (e.g. Debian's)."""
    import importlib.machinery
    import sys

    # Another guard's folder (a pytest-xdist worker's, beside its controller's) is not chained:
    # each would find the other and recurse.
    others = [p for p in sys.path if not _holds_a_guard(p or ".")]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        import importlib.util

        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _holds_a_guard(path: str) -> bool:
    try:
        with open(os.path.join(path, "sitecustomize.py"), encoding="utf-8") as file:
            return file.readline() == SITECUSTOMIZE.splitlines(keepends=True)[0]
    except OSError:
        return False


def subprocess_env(directory: Path, log_path: Path) -> dict[str, str]:
    """Write ``directory/sitecustomize.py``; return the variables that make children load it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(guard=str(Path(__file__).resolve())),
        encoding="utf-8",
    )
    existing = os.environ.get("PYTHONPATH")
    python_path = os.pathsep.join([str(directory), *([existing] if existing else [])])
    return {"PYTHONPATH": python_path, LOG_ENV: str(log_path)}
