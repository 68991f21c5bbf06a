"""Token prices from a data file with an ``as_of`` date, and the cost of a response's usage."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import UnknownModelPrice as UnknownModelPrice
from .messages import Usage

_DATED_SUFFIX = re.compile(r"-\d{8}$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    @classmethod
    def from_input_output(cls, input_usd: float, output_usd: float) -> Price:
        """A price from the two headline figures, with the usual cache multipliers (1.25x, 0.1x)."""
        return cls(input_usd, output_usd, input_usd * 1.25, input_usd * 0.1)

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000


@cache
def _table() -> tuple[str, dict[str, Price]]:
    raw = json.loads(resources.files("qloop_kernel").joinpath("prices.json").read_text("utf-8"))
    models = {name: Price(**fields) for name, fields in raw["models"].items()}
    return str(raw["as_of"]), models


def prices_as_of() -> str:
    """The date the bundled price table was checked."""
    return _table()[0]


def price_for(model: str, override: Price | None = None) -> Price:
    """The price of ``model``: ``override`` if given, else the bundled table (dated ids fall back)."""
    if override is not None:
        return override
    as_of, models = _table()
    found = models.get(model) or models.get(_DATED_SUFFIX.sub("", model))
    if found is None:
        raise UnknownModelPrice(
            f"no price known for model {model!r} (price table as of {as_of}); give one with "
            "`%agent price INPUT_USD OUTPUT_USD` (per million tokens) or the QLOOP_PRICE "
            "environment variable, e.g. QLOOP_PRICE=3,15"
        )
    return found


def parse_price(text: str) -> Price:
    """Parse ``"3,15"`` or ``"3 15"`` (USD per million input, output tokens)."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if len(parts) != 2:
        raise ValueError(
            f"a price is two numbers, input and output USD per million tokens: {text!r}"
        )
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"a price is two numbers: {text!r}") from None
    if any(v < 0 for v in values):
        raise ValueError(f"prices cannot be negative: {text!r}")
    return Price.from_input_output(values[0], values[1])
