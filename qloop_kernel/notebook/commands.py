"""The ``%agent`` sub-commands: help, status, set, models, price, allow, reset, key, private."""

from __future__ import annotations

import getpass
import keyword
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from pydantic import ValidationError

HELP = """\
%%agent [options]            the cell body is the task; the turn runs against this kernel
%agent [options] TASK        a one-line task
%agent status                session: turns, tokens, cost, settings
%agent set NAME VALUE        change a setting ({settable})
%agent models                the known model ids with their price and status
%agent price IN OUT [CW CR]  USD per million input/output (and cache write/read) tokens, for a
                             model without a known price; cache prices default to its family's
%agent allow TOOL            run TOOL without asking for the rest of the session
%agent reset                 start a fresh conversation
%agent key                   type the API key for this kernel (not shown, never saved)
%agent private [NAME ...]    keep variables from the agent (tools refuse to show them); no NAME:
                             list them; --clear [NAME ...]: make them (or all) visible again
options: --approve {{{policies}}} --max-turns N --max-cost USD --max-tokens N
         --timeout SECONDS --code-timeout SECONDS --model NAME --new (fresh conversation) --fresh (ignore the saved record)"""


def _help(magics: Any, args: list[str]) -> None:
    from ..permissions import POLICIES
    from ..settings import SETTABLE

    print(HELP.format(settable=", ".join(SETTABLE), policies=",".join(POLICIES)))


def _status(magics: Any, args: list[str]) -> None:
    manager = magics.agent.manager
    totals = manager.totals
    usage = totals.usage
    cost = f"${totals.cost_usd:.4f}" if totals.cost_known else "unknown (no price for the model)"
    settings = manager.settings.model_dump(exclude_none=True)
    print(
        f"session {manager.session_id}: {totals.turns} turn(s), {totals.model_calls} model call(s)"
    )
    print(
        f"tokens: {usage.input_tokens:,} input, {usage.output_tokens:,} output, "
        f"{usage.cache_read_input_tokens:,} cache read, {usage.cache_creation_input_tokens:,} "
        f"cache write; cost {cost}"
    )
    print(f"messages in the conversation: {len(manager.messages)}")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    if manager.always_allowed:
        print("always allowed: " + ", ".join(sorted(manager.always_allowed)))


def _set(magics: Any, args: list[str]) -> None:
    from ..settings import SETTABLE

    if len(args) != 2 or args[0] not in SETTABLE:
        raise UsageError(f"usage: %agent set NAME VALUE, NAME one of {', '.join(SETTABLE)}")
    name, value = args
    manager = magics.agent.manager
    empty = value.lower() in ("none", "off", "")
    try:
        manager.settings = manager.settings.updated(**{name: None if empty else value})
    except ValidationError as exc:
        raise UsageError(f"%agent set {name}: {exc.errors(include_url=False)[0]['msg']}") from None
    print(f"{name} = {getattr(manager.settings, name)}")


def _models(magics: Any, args: list[str]) -> None:
    from ..pricing import known_models, prices_as_of, retired_models

    current = magics.agent.manager.settings.model
    print(f"known models (prices as of {prices_as_of()}, USD per million tokens):")
    for model in known_models():
        mark = "*" if model.id == current else " "
        note = f"; {model.note}" if model.note else ""
        print(f"{mark} {model.id:<20} {model.status:<10} {model.price.describe()}{note}")
    retired = ", ".join(f"{r.id} (use {r.replacement})" for r in retired_models())
    print(f"retired, refused: {retired}")
    print("* the model in use; change it with `%agent set model ID` or `--model ID`")


def _price(magics: Any, args: list[str]) -> None:
    from ..pricing import Price, price_figures

    try:
        figures = price_figures(" ".join(args))
    except ValueError as exc:
        raise UsageError(f"%agent price: {exc}") from None
    manager = magics.agent.manager
    manager.settings = manager.settings.updated(price=figures)
    price = Price.from_figures(*figures, model=manager.settings.model)
    given = "" if len(figures) == 4 else f" (cache prices from the {manager.settings.model} ratios)"
    print(f"price: {price.describe()}{given}")


def _allow(magics: Any, args: list[str]) -> None:
    if len(args) != 1:
        raise UsageError("usage: %agent allow TOOL (for example: %agent allow run_code)")
    magics.agent.manager.always_allowed.add(args[0])
    print(f"{args[0]} now runs without asking for the rest of this session")


def _reset(magics: Any, args: list[str]) -> None:
    magics.agent.manager.reset()
    print(f"fresh conversation (session {magics.agent.manager.session_id})")


def _key(magics: Any, args: list[str]) -> None:
    value = getpass.getpass("Anthropic API key (not shown, not saved): ").strip()
    if not value:
        raise UsageError("no key entered")
    os.environ["ANTHROPIC_API_KEY"] = value
    print("API key set for this kernel")


def _private(magics: Any, args: list[str]) -> None:
    from ..redact import private_variables

    private = private_variables(magics.agent.manager)
    clear = bool(args) and args[0] == "--clear"
    names = args[1:] if clear else args
    bad = [n for n in names if not n.isidentifier() or keyword.iskeyword(n)]
    if bad:
        raise UsageError(
            f"%agent private: {bad[0]!r} is not a variable name "
            "(usage: %agent private NAME [NAME ...], or --clear [NAME ...])"
        )
    if clear:
        private.names.difference_update(names or set(private.names))
    else:
        private.names.update(names)
    shown = ", ".join(sorted(private.names)) or "none"
    print(f"private variables (tools do not inspect or print them): {shown}")


@dataclass(frozen=True)
class Command:
    """A sub-command and the numbers of words it takes; other word counts are a one-line task."""

    run: Callable[[Any, list[str]], None]
    arity: tuple[int, ...]


COMMANDS = {
    "help": Command(_help, (0,)),
    "status": Command(_status, (0,)),
    "set": Command(_set, (2,)),
    "models": Command(_models, (0,)),
    "price": Command(_price, (1, 2, 4)),
    "allow": Command(_allow, (1,)),
    "reset": Command(_reset, (0,)),
    "key": Command(_key, (0,)),
    "private": Command(_private, tuple(range(33))),
}
