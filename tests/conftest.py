"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

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
