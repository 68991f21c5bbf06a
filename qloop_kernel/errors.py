"""The package's exception tree: every error qloop raises on purpose is a ``QloopError``."""

from __future__ import annotations


class QloopError(Exception):
    """Base of qloop's own errors."""


class ModelError(QloopError):
    """A model call failed for good (after any retries): the turn ends with status ``error``."""


class ModelTimeout(ModelError):
    """The model call ran past the turn's deadline."""


class RecordError(QloopError, ValueError):
    """A saved record cannot be used: the message says why and what to do."""


class ToolInputError(QloopError):
    """Raised by a tool for input that passed the schema but cannot be used (told to the model)."""


class ToolFailure(QloopError):
    """Raised by a tool whose work failed, with the full report for the model as the message."""


class UnknownModelPrice(QloopError, LookupError):
    """No price is known for a model, and a USD budget needs one."""
