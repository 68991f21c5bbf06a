"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.testing import StandInAPI
from qloop_kernel.values.summaries.trust import count_as_installed
from tests import network_guard
from tests.kernel_client import LabKernel

# -- kernels (real ipykernel processes driven like JupyterLab; see kernel_client.py) -----------


@pytest.fixture(scope="module")
def kernel() -> Iterator[LabKernel]:
    """One kernel shared by the tests of a module: use it where no state can leak."""
    with LabKernel() as lab_kernel:
        yield lab_kernel


@pytest.fixture
def fresh_kernel() -> Iterator[LabKernel]:
    """A kernel for this test alone."""
    with LabKernel() as lab_kernel:
        yield lab_kernel


@pytest.fixture
def kernel_factory() -> Iterator[Callable[..., LabKernel]]:
    """Start kernels with custom options, e.g. ``kernel_factory(env={...}, headless=True)``;
    all are shut down after the test."""
    started: list[LabKernel] = []

    def start(env: dict[str, str] | None = None, **options: Any) -> LabKernel:
        lab_kernel = LabKernel(env, **options)
        started.append(lab_kernel)
        return lab_kernel.start()

    yield start
    for lab_kernel in reversed(started):
        lab_kernel.shutdown()


# -- an agent kernel: the Messages API stand-in, and a kernel with the extension loaded -----------


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    """One stand-in shared by the tests of a module; each ``lab`` resets its script and log."""
    with StandInAPI() as server:
        yield server


@pytest.fixture
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    """A fresh kernel pointed at the stand-in, with ``%load_ext qloop_kernel`` run."""
    api.reset()
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel")
        yield kernel


# -- record signing: this test run is one "user", with its own key outside the home directory ------


def pytest_configure(config: pytest.Config) -> None:
    folder = tempfile.mkdtemp(prefix="qloop-signing-")
    os.environ.setdefault("QLOOP_SIGNING_KEY_FILE", os.path.join(folder, "key"))
    # Rules files: none of the user's own, approvals kept here, and a checkout's own AGENTS.md or
    # CLAUDE.md left out of the tests' turns (tests of rules set QLOOP_RULES themselves).
    os.environ.setdefault("QLOOP_USER_RULES", os.path.join(folder, "user-rules.md"))
    os.environ.setdefault("QLOOP_RULES_APPROVALS", os.path.join(folder, "rules-approved.json"))
    os.environ.setdefault("QLOOP_RULES", "user")
    # The spend ledger every kernel of this test run adds its model calls to (spend.py)
    os.environ.setdefault("QLOOP_USAGE_FILE", os.path.join(folder, "usage.jsonl"))


# -- no network outside loopback, here and in every Python the tests start (network_guard.py) --------


class BlockedAttempts:
    """The guard's log of blocked connections, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def take(self) -> list[str]:
        """Attempts logged since the last call, by this process or any process it started."""
        with self.path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return complete.decode("utf-8", "replace").splitlines()


_network: dict[str, Any] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    folder = Path(tempfile.mkdtemp(prefix="qloop-network-guard-"))
    log = folder / "blocked.log"
    log.touch()
    env = network_guard.subprocess_env(folder / "site", log)
    _network.update(
        folder=folder,
        attempts=BlockedAttempts(log),
        saved_env={name: os.environ.get(name) for name in env},
    )
    os.environ.update(env)
    network_guard.install(log)
    # Libraries a read runs (Spark's take() opening its socket) reach the guard's wrappers: they
    # are this environment's, not the notebook's code, which reads stop (summaries/readguard.py).
    count_as_installed(network_guard.install.__code__.co_filename)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _network:
        return
    late = _network["attempts"].take()
    network_guard.uninstall()
    for name, value in _network["saved_env"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(_network["folder"], ignore_errors=True)
    _network.clear()
    if late:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("network access outside loopback after the tests:", red=True)
            for attempt in late:
                reporter.write_line(f"  {attempt}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def blocked_attempts() -> BlockedAttempts:
    """The log of connections the guard blocked; ``take()`` the ones a test expects."""
    attempts: BlockedAttempts = _network["attempts"]
    return attempts


@pytest.fixture(autouse=True)
def _no_network_outside_loopback(blocked_attempts: BlockedAttempts) -> Iterator[None]:
    """Fail a test during which anything tried to leave loopback, even if the error was caught."""
    yield
    attempts = blocked_attempts.take()
    if attempts:
        pytest.fail("network access outside loopback:\n" + "\n".join(attempts), pytrace=False)


# -- every kernel a test starts inherits this process's environment: no test may change it ----------

_WATCHED_ENV = ("QLOOP_", "ANTHROPIC_", "AWS_", "GOOGLE_", "CLOUD_ML_")


def _watched_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_WATCHED_ENV)}


@pytest.fixture(autouse=True)
def _environment_left_as_found() -> Iterator[None]:
    """Fail a test that leaves a setting in this process's environment (a policy set there reaches
    every kernel the later tests start); monkeypatch restores what it set before this runs."""
    before = _watched_env()
    yield
    after = _watched_env()
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for name in changed:  # put it back, so one leak fails one test, not the rest of the run
            if name in before:
                os.environ[name] = before[name]
            else:
                os.environ.pop(name, None)
        pytest.fail(f"the test left these in the environment: {', '.join(changed)}", pytrace=False)


# -- the slowest modules first: worker processes (pytest-xdist) then finish about together ---------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the modules that start a JVM, then those that start kernels, ahead of the rest (a
    stable sort: each module's tests keep their order). With ``--dist loadfile`` the workers take
    modules in this order, so the longest come first and the last ones are short."""

    def weight(item: pytest.Item) -> int:
        return (
            0 if item.get_closest_marker("spark") else 1 if item.get_closest_marker("kernel") else 2
        )

    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        rank[module] = min(rank.get(module, 2), weight(item))
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])
