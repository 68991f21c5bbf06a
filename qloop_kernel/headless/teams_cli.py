"""``qloop config --show`` and ``qloop usage``: what an operator and a user of a shared Jupyter read
about the admin floor, the settings in effect and the spend recorded (docs/teams.md)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..effective import effective_lines


def add_parsers(sub: Any) -> None:
    """Register ``qloop config`` and ``qloop usage`` on the ``qloop`` command's subparsers."""
    config = sub.add_parser(
        "config", help="the settings in effect, where each comes from, and the admin floor"
    )
    config.add_argument("--show", action="store_true", help="list them (the default)")
    config.set_defaults(func=_config)


def _config(args: argparse.Namespace) -> int:
    for line in effective_lines({}, os.environ):
        print(line)
    print("kernel config (c.QloopAgent) and %agent set: `%agent config` in the notebook")
    return 0
