"""The tests' network guard: connections outside loopback fail at once, here and in the kernels."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.kernel_client import LabKernel
from tests.network_guard import NetworkBlocked, is_loopback_host

if TYPE_CHECKING:
    from tests.conftest import BlockedAttempts

BLACKHOLE = ("10.255.255.1", 9)  # unroutable: without the guard a connect hangs until its timeout


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP server that accepts connections; yields its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_connect_outside_loopback_fails_at_once(blocked_attempts: BlockedAttempts) -> None:
    started = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        with pytest.raises(NetworkBlocked, match=r"outside loopback.*connect to 10\.255\.255\.1:9"):
            sock.connect(BLACKHOLE)
        with pytest.raises(NetworkBlocked):
            sock.connect_ex(BLACKHOLE)
    with pytest.raises(OSError, match="only 127.0.0.0/8, ::1 and unix sockets"):
        socket.create_connection(BLACKHOLE, timeout=10)
    assert time.monotonic() - started < 1.0
    assert [a.split(": ", 1)[1] for a in blocked_attempts.take()] == [
        "connect to 10.255.255.1:9",
        "connect to 10.255.255.1:9",
        "create_connection to 10.255.255.1:9",
    ]


def test_datagrams_outside_loopback_are_blocked_when_sent(
    blocked_attempts: BlockedAttempts,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        # Sends nothing (how dask finds its outward address); a machine without a route says so.
        with contextlib.suppress(OSError):
            udp.connect(("8.8.8.8", 80))
        with pytest.raises(NetworkBlocked, match="sendto 8.8.8.8:53"):
            udp.sendto(b"query", ("8.8.8.8", 53))
        with pytest.raises(NetworkBlocked, match="sendto 8.8.8.8:53"):
            udp.sendto(b"query", 0, ("8.8.8.8", 53))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.sendto(b"ping", server.getsockname())
        assert server.recv(16) == b"ping"
    assert [a.split(": ", 1)[1] for a in blocked_attempts.take()] == ["sendto 8.8.8.8:53"] * 2


def test_public_names_are_not_even_looked_up(blocked_attempts: BlockedAttempts) -> None:
    with pytest.raises(NetworkBlocked, match="name lookup of 'api.anthropic.com'"):
        socket.getaddrinfo("api.anthropic.com", 443)
    with pytest.raises(NetworkBlocked, match="create_connection to example.com:443"):
        socket.create_connection(("example.com", 443), timeout=10)
    with socket.socket() as sock, pytest.raises(NetworkBlocked, match="example.com:80"):
        sock.connect(("example.com", 80))
    assert len(blocked_attempts.take()) == 3


def test_loopback_and_unix_sockets_still_work(listener: int) -> None:
    with socket.create_connection(("127.0.0.1", listener), timeout=5):
        pass
    with socket.create_connection(("localhost", listener), timeout=5):
        pass
    assert socket.getaddrinfo("localhost", listener)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "s")
        with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
            server.bind(path)
            server.listen()
            client.connect(path)
    left, right = socket.socketpair()
    left.close()
    right.close()


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
        ("::ffff:127.0.0.1", True), ("localhost", True), ("LOCALHOST.", True), ("x.localhost", True),
        ("10.255.255.1", False), ("0.0.0.0", False), ("192.168.1.1", False), ("::ffff:8.8.8.8", False),
        ("2001:db8::1", False), ("example.com", False), ("localhost.example.com", False), (None, False),
    ],
)  # fmt: skip
def test_what_counts_as_loopback(host: str | None, local: bool) -> None:
    assert is_loopback_host(host) is local


def test_an_attempt_a_library_swallows_is_still_recorded(blocked_attempts: BlockedAttempts) -> None:
    def best_effort() -> None:
        with contextlib.suppress(OSError):  # what an update check or a retrying client does
            socket.create_connection(("198.51.100.7", 443), timeout=10)

    thread = threading.Thread(target=best_effort)
    thread.start()
    thread.join()
    assert [a.split(": ", 1)[1] for a in blocked_attempts.take()] == [
        "create_connection to 198.51.100.7:443"
    ]


def test_a_python_the_tests_start_has_the_guard(blocked_attempts: BlockedAttempts) -> None:
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection({BLACKHOLE!r}, timeout=10)\n"
        "except OSError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("NetworkBlocked ") and "10.255.255.1:9" in done.stdout
    assert time.monotonic() - started < 10
    [attempt] = blocked_attempts.take()
    assert attempt.endswith("create_connection to 10.255.255.1:9")
    assert not attempt.startswith(f"pid {os.getpid()}:")  # logged by the child


@pytest.mark.kernel
def test_a_kernel_the_tests_start_has_the_guard(blocked_attempts: BlockedAttempts) -> None:
    with LabKernel() as kernel:
        out = kernel.run(
            "import socket\n"
            "try:\n"
            "    socket.getaddrinfo('pypi.org', 443)\n"
            "except OSError as error:\n"
            "    print(type(error).__name__)\n"
        )
    assert out == "NetworkBlocked\n"
    [attempt] = blocked_attempts.take()
    assert attempt.endswith("name lookup of 'pypi.org'")
