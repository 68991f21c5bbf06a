"""Running notebooks without a person: ``qloop run`` / ``show`` / ``export``, the runner, the papermill
engine, the nbconvert preprocessor and the kernel spec."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nbconvert import ReplayPreprocessor

__all__ = ["ReplayPreprocessor"]


def __getattr__(name: str) -> type[ReplayPreprocessor]:
    # ``qloop_kernel.headless.ReplayPreprocessor`` for nbconvert's command line, imported on use.
    if name == "ReplayPreprocessor":
        from .nbconvert import ReplayPreprocessor

        return ReplayPreprocessor
    raise AttributeError(name)
