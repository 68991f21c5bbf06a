"""The ``%%agent`` options, declared once.

Everything that knows the options reads this table: the cell's parser (``magic.py``), the options part
of ``%agent help`` (``commands.py``), the Run All scanner and the prompt readers of ``qloop show`` and
``qloop export`` (``agent_prompt``), and the ``QloopAgent`` config traits, which give every
cell its defaults. An option with ``config=True`` names a field of ``settings.Settings``, which holds
its type, default and bounds (``tests/test_options.py`` holds the two to each other).

Light to import: the magics load it with ``%load_ext`` (it needs only ``names.py`` and traitlets).
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn, cast

from traitlets import Dict, Enum, Float, Int, TraitType, Unicode
from traitlets.config import Configurable
from traitlets.traitlets import MetaHasTraits

from ..names import POLICIES, PROVIDERS


@dataclass(frozen=True)
class Option:
    """One ``%%agent`` option."""

    flag: str  # as typed: --max-cost
    dest: str  # the Settings field (config=True) or the cell option it sets
    help: str  # one line, for %agent help and the config trait
    metavar: str | None = None  # the value's word in help; None: a flag without a value
    value: Callable[[str], Any] = str  # reads the typed value
    choices: tuple[str, ...] = ()
    config: bool = False  # also a default for every cell: a QloopAgent trait and a Settings field
    repeatable: bool = False  # may be given more than once; the values are collected

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None


OPTIONS: tuple[Option, ...] = (
    Option("--approve", "approve", "the approval policy (below); else QLOOP_APPROVAL, else ask "
           "where a card can be clicked and readonly headless", "POLICY", str, POLICIES,
           config=True),
    Option("--max-turns", "max_turns", "model calls per cell turn", "N", int, config=True),
    Option("--max-cost", "max_cost", "USD budget per cell turn", "USD", float, config=True),
    Option("--max-tokens", "max_tokens", "token budget per cell turn", "N", int, config=True),
    Option("--timeout", "timeout", "seconds per cell turn, approval waits excluded", "SECONDS",
           float, config=True),
    Option("--code-timeout", "code_timeout", "seconds per run_code call", "SECONDS", float,
           config=True),
    Option("--model", "model", "the model id; else QLOOP_MODEL, else the default", "NAME",
           config=True),
    Option("--provider", "provider", "the model platform; else QLOOP_PROVIDER, else anthropic "
           "(docs/providers.md)", "PLATFORM", str.lower, PROVIDERS, config=True),
    Option("--new", "new", "start a fresh conversation"),
    Option("--fresh", "fresh", "ignore the cell's saved record and ask the model"),
    Option("--plan", "plan", "answer with a numbered plan and run nothing (only read tools)"),
    Option("--run-plan", "run_plan", "carry out the last plan; the cell's text, where given, is "
           "the plan (as you edited it)"),
    Option("--discard-plan", "discard_plan", "drop the session's last plan (Discard on the plan "
           "list); nothing runs"),
    Option("--with", "attach", "attach a file (text, CSV or Parquet head and schema, image), a "
           "variable's summary or a cell to the turn; repeatable, or a comma list",
           "PATH|VARIABLE|@CELL-ID", repeatable=True),
)  # fmt: skip


def valued_flags(options: Iterable[Option] = OPTIONS) -> frozenset[str]:
    """The flags followed by a value word."""
    return frozenset(o.flag for o in options if o.takes_value)


def setting_names(options: Iterable[Option] = OPTIONS) -> tuple[str, ...]:
    """The Settings fields the options set (config=True): a cell's values override the session's."""
    return tuple(o.dest for o in options if o.config)


class _Parser(argparse.ArgumentParser):
    def __init__(self, on_error: Callable[[str], NoReturn]) -> None:
        super().__init__(prog="%%agent", add_help=False)
        self._on_error = on_error

    def error(self, message: str) -> NoReturn:
        self._on_error(message)


def _value_error(message: str) -> NoReturn:
    raise ValueError(message)


def parser(
    options: Iterable[Option] = OPTIONS, on_error: Callable[[str], NoReturn] = _value_error
) -> argparse.ArgumentParser:
    """The parser of a cell's options; a mistake calls ``on_error`` with argparse's message."""
    built = _Parser(on_error)
    for option in options:
        if not option.takes_value:
            built.add_argument(option.flag, dest=option.dest, action="store_true")
        elif option.repeatable:
            built.add_argument(
                option.flag, dest=option.dest, action="append", default=[], type=option.value
            )
        else:
            built.add_argument(
                option.flag, dest=option.dest, type=option.value, choices=option.choices or None
            )
    return built


_WORD = re.compile(r"(\S+)\s*(.*)", re.DOTALL)


def split_options(line: str, options: Iterable[Option] = OPTIONS) -> tuple[list[str], str]:
    """The leading option words of ``line`` (a valued flag with its value) and the rest of the
    line verbatim (a prompt may hold quotes)."""
    valued = valued_flags(options)
    words: list[str] = []
    rest = line.strip()
    while rest.startswith("--"):
        word, rest = _WORD.match(rest).groups()  # type: ignore[union-attr]
        words.append(word)
        if word in valued and rest:
            value, rest = _WORD.match(rest).groups()  # type: ignore[union-attr]
            words.append(value)
    return words, rest


def agent_prompt(code: str) -> tuple[list[str], str]:
    """The options and the prompt of a ``%%agent`` cell's source, as the magic reads them."""
    first, _, body = code.lstrip().partition("\n")
    words, rest = split_options(first[len("%%agent") :])
    return words, (rest + "\n" + body).strip()


def help_lines(
    options: Iterable[Option] = OPTIONS, column: int = 29, width: int = 100
) -> list[str]:
    """The options part of ``%agent help``: each option's usage, then what it does (wrapped)."""
    lines = []
    for option in options:
        usage = option.flag if option.metavar is None else f"{option.flag} {option.metavar}"
        if option.choices:
            usage = f"{option.flag} {{{','.join(option.choices)}}}"
        usage = "  " + usage
        text = textwrap.wrap(option.help, width - column)
        if len(usage) + 2 > column:
            lines.append(usage)
        else:
            lines.append(usage.ljust(column) + text.pop(0))
        lines += [" " * column + rest for rest in text]
    return lines


def _trait(option: Option) -> TraitType[Any, Any]:
    help_text = option.help[0].upper() + option.help[1:] + "."
    if option.choices:
        return Enum(list(option.choices), None, allow_none=True, help=help_text)
    if option.value is int:
        return Int(None, allow_none=True, help=help_text)
    if option.value is float:
        return Float(None, allow_none=True, help=help_text)
    return Unicode(None, allow_none=True, help=help_text)


def config_class(options: Iterable[Option] = OPTIONS) -> type[Configurable]:
    """The ``QloopAgent`` configurable: a trait per config option (unset: None, so the built-in
    defaults stay in ``settings.py`` alone) and the MCP servers."""
    traits: dict[str, Any] = {o.dest: _trait(o).tag(config=True) for o in options if o.config}
    traits["mcp_servers"] = Dict(
        help="MCP servers, as in .mcp.json's mcpServers (docs/mcp.md)."
    ).tag(config=True)
    traits["__doc__"] = (
        "Defaults for agent cells (set in ipython_config.py / ipython_kernel_config.py, or with "
        "%config in a running kernel). Unset traits are None: the built-in defaults live in "
        "qloop_kernel.settings only."
    )
    traits["__module__"] = __name__
    # traitlets' metaclass (that of Configurable) turns the trait attributes into traits
    return cast("type[Configurable]", MetaHasTraits("QloopAgent", (Configurable,), traits))
