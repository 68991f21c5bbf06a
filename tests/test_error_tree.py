"""One exception tree: every error qloop raises for a person to read is a QloopError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import qloop_kernel
from qloop_kernel.errors import QloopError

# Signals raised and caught inside one module (or step), never shown as they are: each is turned
# into a message, a "not tracked" note or a step result where it is caught.
INTERNAL_SIGNALS = {
    "qloop_kernel.values.fingerprint.OutOfTime",  # a value's hash past its time limit: not tracked
    "qloop_kernel.values.summaries.common.TookTooLong",  # a repr past its time: a note
    "qloop_kernel.values.summaries.lazy.ComputeRefused",  # a dask compute while reading metadata
    "qloop_kernel.values.summaries.databases.SharedTransaction",  # a read would roll back the user's
    "qloop_kernel.values.summaries.databases.QueryTimeout",  # a catalog query past its time
    "qloop_kernel.notebook.undo.NotMeasured",  # a value undo cannot size: not snapshotted
    "qloop_kernel.notebook.deadline.StepStopped",  # raised in the user's code by Stop or a limit
    "qloop_kernel.notebook.guard.StepRunning",  # a qloop command from inside a step
    "qloop_kernel.values.arrow_content.UnreadableArrow",  # an Arrow type hashed another way
    "qloop_kernel.values.summaries.readguard.UserCodeStopped",  # a read reached the user's code
}


def _package_exceptions() -> dict[str, type[BaseException]]:
    import papermill  # noqa: F401  # before its engine module here, which it loads by entry point

    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(qloop_kernel.__path__, "qloop_kernel."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_error_of_the_package_is_in_the_one_tree() -> None:
    found = _package_exceptions()
    outside = sorted(
        name for name, cls in found.items()
        if not issubclass(cls, QloopError) and name not in INTERNAL_SIGNALS
    )  # fmt: skip
    assert outside == [], f"errors outside qloop_kernel.errors.QloopError: {outside}"
    assert set(INTERNAL_SIGNALS) <= set(found)  # the list names classes that exist


def test_errors_keep_the_builtin_kinds_callers_catch() -> None:
    from qloop_kernel.providers import ProviderError
    from qloop_kernel.settings import SettingsError

    assert issubclass(SettingsError, ValueError) and issubclass(ProviderError, ValueError)
