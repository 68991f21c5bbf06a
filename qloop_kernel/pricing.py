"""Token prices from a data file with an ``as_of`` date, the models it knows, and the cost of a usage.

``prices.json`` lists each available model with its status (active, legacy, deprecated) and prices, and
the retired ids with their replacement. A model priced by prompt length (Haiku 5.5) has a
``long_prompt`` rate that applies to every token of a request whose prompt is above the threshold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from .errors import UnknownModelPrice as UnknownModelPrice
from .messages import Usage

_DATED_SUFFIX = re.compile(r"-\d{8}$")
_FAMILY = re.compile(r"^claude-(opus|sonnet|haiku|fable|mythos)-")
# The documented multipliers on the input price where a model publishes no figure of its own.
WRITE_RATIO, WRITE_1H_RATIO, READ_RATIO = 1.25, 2.0, 0.1


@dataclass(frozen=True)
class Price:
    """USD per million tokens; ``long_prompt`` applies above ``above_tokens`` prompt tokens."""

    input: float
    output: float
    cache_write: float  # the 5-minute cache write
    cache_read: float
    cache_write_1h: float | None = None
    long_prompt: Price | None = None
    above_tokens: int | None = None

    @classmethod
    def from_input_output(cls, input_usd: float, output_usd: float) -> Price:
        """A price from the two headline figures, with the usual cache multipliers (1.25x, 0.1x)."""
        return cls.from_figures(input_usd, output_usd)

    @classmethod
    def from_figures(
        cls,
        input_usd: float,
        output_usd: float,
        cache_write: float | None = None,
        cache_read: float | None = None,
        *,
        model: str | None = None,
    ) -> Price:
        """A price from the given figures; missing cache prices follow ``model``'s own ratios
        (or its family's newest model's), else the usual multipliers."""
        write_ratio, read_ratio = cache_ratios(model)
        return cls(
            input_usd,
            output_usd,
            input_usd * write_ratio if cache_write is None else cache_write,
            input_usd * read_ratio if cache_read is None else cache_read,
            cache_write_1h=input_usd * WRITE_1H_RATIO,
        )

    def rate(self, usage: Usage) -> Price:
        """The rate a request with this usage pays (the long-prompt one above its threshold)."""
        long, above = self.long_prompt, self.above_tokens
        if long is not None and above is not None and usage.prompt_tokens > above:
            return long
        return self

    def cost(self, usage: Usage) -> float:
        rate = self.rate(usage)
        return (
            usage.input_tokens * rate.input
            + usage.output_tokens * rate.output
            + usage.cache_creation_input_tokens * rate.cache_write
            + usage.cache_read_input_tokens * rate.cache_read
        ) / 1_000_000

    def describe(self) -> str:
        """One line: input, output, cache write and read, and the long-prompt rate if any."""
        text = (
            f"${_usd(self.input)} in / ${_usd(self.output)} out, cache write "
            f"${_usd(self.cache_write)}, read ${_usd(self.cache_read)} per M tokens"
        )
        if self.long_prompt is not None:
            text += (
                f" (prompts over {self.above_tokens:,} tokens: "
                f"${_usd(self.long_prompt.input)} in / ${_usd(self.long_prompt.output)} out)"
            )
        return text


@dataclass(frozen=True)
class KnownModel:
    """A model of the price table: its id, lifecycle status, price and notes."""

    id: str
    status: str
    price: Price
    note: str = ""


@dataclass(frozen=True)
class Retired:
    id: str
    retired: str
    replacement: str


@dataclass(frozen=True)
class _Table:
    as_of: str
    models: dict[str, KnownModel]
    retired: dict[str, Retired]


def _price(fields: dict[str, Any]) -> Price:
    price = Price(
        float(fields["input"]),
        float(fields["output"]),
        float(fields["cache_write"]),
        float(fields["cache_read"]),
        None if fields.get("cache_write_1h") is None else float(fields["cache_write_1h"]),
    )
    long_prompt = fields.get("long_prompt")
    if long_prompt:
        extra = _price({k: v for k, v in long_prompt.items() if k != "above_tokens"})
        price = replace(price, long_prompt=extra, above_tokens=int(long_prompt["above_tokens"]))
    return price


@cache
def _table() -> _Table:
    raw = json.loads(resources.files("qloop_kernel").joinpath("prices.json").read_text("utf-8"))
    models = {
        name: KnownModel(name, str(fields["status"]), _price(fields), str(fields.get("note", "")))
        for name, fields in raw["models"].items()
    }
    retired = {
        name: Retired(name, str(fields["retired"]), str(fields["replacement"]))
        for name, fields in raw.get("retired", {}).items()
    }
    return _Table(str(raw["as_of"]), models, retired)


def prices_as_of() -> str:
    """The date the bundled price table was checked."""
    return _table().as_of


def known_models() -> list[KnownModel]:
    """The models of the price table, in its order (current lineup first)."""
    return list(_table().models.values())


def retired_models() -> list[Retired]:
    """The retired ids the table knows, with their replacements."""
    return list(_table().retired.values())


def _lookup(model: str) -> str:
    return _DATED_SUFFIX.sub("", model)


def retirement(model: str) -> str | None:
    """Why ``model`` cannot be used if it is retired (naming its replacement), else None."""
    table = _table()
    found = table.retired.get(model) or table.retired.get(_lookup(model))
    if found is None:
        return None
    return (
        f"model {model} was retired on {found.retired}; use {found.replacement} instead "
        "(`%agent models` lists the known ones)"
    )


def price_for(model: str, override: Price | None = None) -> Price:
    """The price of ``model``: ``override`` if given, else the bundled table (dated ids fall back)."""
    if override is not None:
        return override
    table = _table()
    found = table.models.get(model) or table.models.get(_lookup(model))
    if found is not None:
        return found.price
    retired = retirement(model)
    if retired is not None:
        raise UnknownModelPrice(retired)
    raise UnknownModelPrice(
        f"no price known for model {model!r} (price table as of {table.as_of}); give one with "
        "`%agent price INPUT_USD OUTPUT_USD [CACHE_WRITE_USD CACHE_READ_USD]` (per million "
        "tokens) or the QLOOP_PRICE environment variable, e.g. QLOOP_PRICE=3,15"
    )


def platform_price(provider: str, model: str) -> Price:
    """The price of ``model`` on ``provider``: the first-party table for ``anthropic``, the
    platform's published prices (prices.json ``platforms``) otherwise; UnknownModelPrice if none."""
    if provider == "anthropic":
        return price_for(model)
    listed = _platform_table().get(provider, {})
    fields = listed.get(model) or listed.get(_lookup(model))
    if fields is not None:
        return _price(fields)
    raise UnknownModelPrice(
        f"no published price of {model!r} on {provider} in the price table (as of "
        f"{_table().as_of}): cost is unknown; give your price with `%agent price INPUT_USD "
        "OUTPUT_USD [CACHE_WRITE_USD CACHE_READ_USD]` (per million tokens) or QLOOP_PRICE"
    )


@cache
def _platform_table() -> dict[str, dict[str, dict[str, Any]]]:
    raw = json.loads(resources.files("qloop_kernel").joinpath("prices.json").read_text("utf-8"))
    platforms = raw.get("platforms", {})
    return {name: dict(models) for name, models in platforms.items()}


def cache_ratios(model: str | None) -> tuple[float, float]:
    """(5-minute write, read) as fractions of the input price: the model's own when it is in the
    table, else its family's newest model's, else the usual 1.25 and 0.1."""
    if model is None:
        return WRITE_RATIO, READ_RATIO
    models = _table().models
    found = models.get(model) or models.get(_lookup(model))
    if found is None:
        family = _FAMILY.match(model)
        found = next(
            (m for m in models.values() if family and m.id.startswith(family.group(0))), None
        )
    if found is None or not found.price.input:
        return WRITE_RATIO, READ_RATIO
    price = found.price
    return price.cache_write / price.input, price.cache_read / price.input


def price_figures(text: str) -> tuple[float, ...]:
    """The numbers of a price: ``"3,15"`` or ``"3 15 3.75 0.3"`` (USD per million input and output
    tokens, optionally then cache write and cache read)."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if len(parts) not in (2, 4):
        raise ValueError(
            "a price is two numbers, input and output USD per million tokens, optionally "
            f"followed by the cache write and cache read prices: {text!r}"
        )
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f"a price is two or four numbers: {text!r}") from None
    if any(v < 0 for v in values):
        raise ValueError(f"prices cannot be negative: {text!r}")
    return values


def parse_price(text: str, model: str | None = None) -> Price:
    """Parse a price (see ``price_figures``); missing cache prices follow ``model``'s ratios."""
    return Price.from_figures(*price_figures(text), model=model)


def _usd(value: float) -> str:
    return f"{value:g}"
