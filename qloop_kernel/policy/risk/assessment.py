"""The risk classes and what an analysis returns: :data:`RISKS` lists the classes in ascending
severity, :func:`severity` and :func:`most_severe` rank them; a :class:`Reason` is one finding on one
line, an :class:`Assessment` the class of a piece of code with its findings and the names it may
change, and an :class:`Effect` what calling something does, the unit every rule is written in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

Risk = Literal["read", "write", "compute", "unknown", "destructive", "external"]
RISKS: tuple[Risk, ...] = get_args(Risk)  # ascending severity


def severity(risk: Risk) -> int:
    """The rank of a class: 0 for ``read`` up to 5 for ``external``."""
    return RISKS.index(risk)


def most_severe(risks: Iterable[Risk]) -> Risk:
    """The most severe of some classes (``read`` when there are none)."""
    return max(risks, key=severity, default="read")


@dataclass(frozen=True)
class Reason:
    """One finding: the line it is on (1-based), its class, and what the code does there."""

    line: int
    risk: Risk
    text: str  # e.g. "changes df, which exists"

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


@dataclass(frozen=True)
class Assessment:
    """The class of a piece of code, the findings behind it, and the names it may change.

    ``may_change`` lists the user-namespace names the code may assign, mutate or delete; ``None``
    means no bound can be given (it calls code that cannot be checked, ``%reset``, ``import *``...).
    """

    risk: Risk
    reasons: tuple[Reason, ...]
    may_change: frozenset[str] | None


@dataclass(frozen=True)
class Effect:
    """What calling something does: its class and a phrase for the card ("" for ``read``)."""

    risk: Risk
    text: str
