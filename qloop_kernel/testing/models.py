"""The models the stand-in serves, and what each accepts: the API's view of its lineup.

``DOCUMENTED_MODELS`` follows the model pages of the Claude Platform docs (as of 2026-12): the current
lineup and the legacy models that are still available. A model missing here (a typo, or a retired id
such as ``claude-sonnet-4-5``) gets the API's 404 ``not_found_error``. Tests that want another id pass
it to ``StandInAPI(models=...)``; a plain id is served like a legacy model with manual thinking,
sampling parameters and no cache minimum.

Sources: "Models overview" and each model's page (thinking mode, defaults); "Prompt caching >
Cache limitations" and the launch notes for the minimum cacheable prompt length. Where a page gives no
minimum, the family's is used: Opus 5.5 takes Opus 5's 512, Sonnet 5.5 Sonnet 5's 1,024, Haiku 5.5
Haiku 4.5's 4,096.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

ThinkingMode = Literal["always_on", "adaptive", "manual"]


@dataclass(frozen=True)
class ModelInfo:
    """What one model id accepts and how it answers by default.

    ``thinking`` is the default: "always_on" and "adaptive" models think without being asked (and
    return their thinking blocks with an empty ``thinking`` text, the default display); "manual"
    models think only when the request sets ``thinking``. ``manual_thinking`` is whether
    ``thinking: {"type": "enabled", ...}`` is accepted, ``sampling`` whether non-default
    ``temperature``/``top_p``/``top_k`` are. ``cache_minimum`` is the shortest cacheable prefix.
    """

    id: str
    thinking: ThinkingMode = "manual"
    manual_thinking: bool = True
    sampling: bool = True
    cache_minimum: int = 0

    @property
    def thinks_by_default(self) -> bool:
        """Whether a request without ``thinking`` gets thinking blocks."""
        return self.thinking != "manual"


def _current(model_id: str, thinking: ThinkingMode, cache_minimum: int) -> ModelInfo:
    # From Opus 4.7 on: adaptive thinking only, and sampling parameters at their defaults only.
    return ModelInfo(model_id, thinking, manual_thinking=False, sampling=False,
                     cache_minimum=cache_minimum)  # fmt: skip


DOCUMENTED_MODELS: tuple[ModelInfo, ...] = (
    _current("claude-fable-5-1", "always_on", 512),
    _current("claude-opus-5-5", "always_on", 512),
    _current("claude-sonnet-5-5", "adaptive", 1024),
    _current("claude-haiku-5-5", "adaptive", 4096),
    _current("claude-fable-5", "always_on", 512),
    _current("claude-opus-5", "adaptive", 512),
    _current("claude-sonnet-5", "adaptive", 1024),
    _current("claude-opus-4-8", "adaptive", 1024),
    _current("claude-opus-4-7", "adaptive", 2048),
    ModelInfo("claude-opus-4-6", cache_minimum=4096),
    ModelInfo("claude-opus-4-5", cache_minimum=4096),
    ModelInfo("claude-opus-4-5-20251101", cache_minimum=4096),
    ModelInfo("claude-sonnet-4-6", cache_minimum=1024),
    ModelInfo("claude-haiku-4-5", cache_minimum=4096),
    ModelInfo("claude-haiku-4-5-20251001", cache_minimum=4096),
)


def model_table(models: Iterable[str | ModelInfo] | None) -> Mapping[str, ModelInfo]:
    """The models a server knows: the documented ones (``None``), or the given ids and infos."""
    if models is None:
        models = DOCUMENTED_MODELS
    table: dict[str, ModelInfo] = {}
    for model in models:
        info = model if isinstance(model, ModelInfo) else ModelInfo(str(model))
        table[info.id] = info
    return table
