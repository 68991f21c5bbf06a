"""Deterministic token estimates and prompt-cache accounting for the stand-in.

The estimate is about four characters per token of a block's canonical JSON (keys sorted, no
spaces, ``cache_control`` left out), at least one token per block. The prompt is the canonical
sequence tools -> system -> message content blocks; every block is one segment of it.

Caching follows the API's rules ("Prompt caching" in the API docs): a block carrying ``cache_control``
(or the last block, when the request has a top-level ``cache_control``) is a breakpoint, and the prefix
ending there is written to the cache if it is at least the model's minimum cacheable length. A later
request reads the longest written prefix found by looking back at most 20 blocks from each of its
breakpoints. An entry lives 5 minutes (or 1 hour with ``ttl: "1h"``) from its last write or read.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
MAX_BREAKPOINTS = 4
DEFAULT_TTL = "5m"
LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def canonical_json(block: Any) -> str:
    """Return the canonical JSON of a prompt block, without its ``cache_control`` marker."""
    if isinstance(block, Mapping):
        block = {key: value for key, value in block.items() if key != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def block_tokens(block: Any) -> int:
    """Estimate the tokens of one block: ceil(len(canonical JSON) / 4), at least 1."""
    return max(1, math.ceil(len(canonical_json(block)) / CHARS_PER_TOKEN))


def output_tokens(blocks: Sequence[Mapping[str, Any]]) -> int:
    """Return the output tokens of a reply's content blocks (at least 1, like the API)."""
    return max(1, sum(block_tokens(block) for block in blocks))


@dataclass(frozen=True)
class PromptSegment:
    """One block of the prompt prefix.

    ``digest`` identifies the whole prefix up to and including this block; ``breakpoint`` is the
    cache TTL ("5m" or "1h") when the block is a cache breakpoint, else None.
    """

    digest: str
    tokens: int
    breakpoint: str | None


@dataclass(frozen=True)
class InputUsage:
    """How a request's input tokens split between fresh input, cache writes and cache reads."""

    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_5m: int = 0
    cache_creation_1h: int = 0

    @property
    def cache_creation_input_tokens(self) -> int:
        """All tokens written to the cache by this request, whatever their TTL."""
        return self.cache_creation_5m + self.cache_creation_1h

    @property
    def total(self) -> int:
        """Every input token of the request, cached or not."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


def _ttl(block: Any) -> str | None:
    control = block.get("cache_control") if isinstance(block, Mapping) else None
    if not isinstance(control, Mapping):
        return None
    ttl = control.get("ttl", DEFAULT_TTL)
    return ttl if isinstance(ttl, str) else DEFAULT_TTL


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _prompt_blocks(body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Yield (place, block) for tools, then system blocks, then message content blocks."""
    for tool in body.get("tools") or []:
        yield "tool", tool
    for block in _as_blocks(body.get("system")):
        yield "system", block
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            for block in _as_blocks(message.get("content")):
                yield f"message:{message.get('role')}", block


def prompt_segments(body: Mapping[str, Any]) -> list[PromptSegment]:
    """Split a Messages request into prompt segments with chained prefix digests.

    The chain starts from the model name: as in the API, a cache entry serves one model only.
    """
    chain = hashlib.sha256(str(body.get("model", "")).encode())
    segments: list[PromptSegment] = []
    for place, block in _prompt_blocks(body):
        # NUL cannot occur in canonical JSON (it is escaped), so it separates parts unambiguously.
        chain.update(f"{place}\0{canonical_json(block)}\0".encode())
        digest = chain.copy().hexdigest()
        segments.append(PromptSegment(digest, block_tokens(block), _ttl(block)))
    automatic = _ttl(body)
    if automatic is not None and segments and segments[-1].breakpoint is None:
        last = segments[-1]
        segments[-1] = PromptSegment(last.digest, last.tokens, automatic)
    return segments


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """Return how many cache breakpoints a request sets (the API allows at most four)."""
    return sum(1 for segment in prompt_segments(body) if segment.breakpoint)


def count_input_tokens(body: Mapping[str, Any]) -> int:
    """Return the total input tokens of a request, as ``count_tokens`` reports them."""
    return sum(segment.tokens for segment in prompt_segments(body))


class PromptCache:
    """The stand-in's prompt cache: prefix digests written at breakpoints, with expiry. Thread-safe.

    ``clock`` (seconds, monotonic) decides expiry; tests can pass a fake one and move it on.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[str, tuple[float, str]] = {}  # digest -> (expires at, ttl)
        self._lock = threading.Lock()
        self.clock = clock

    def clear(self) -> None:
        """Forget every cached prefix."""
        with self._lock:
            self._entries.clear()

    def account(self, body: Mapping[str, Any], *, minimum: int = 0) -> InputUsage:
        """Split a request's input tokens into input/read/write, then write its breakpoints.

        A breakpoint whose prefix is shorter than ``minimum`` tokens is neither written nor read.
        """
        segments = prompt_segments(body)
        ends = _running_totals(segments)
        total = ends[-1] if ends else 0
        breakpoints = [
            i for i, segment in enumerate(segments) if segment.breakpoint and ends[i] >= minimum
        ]
        if not breakpoints:
            return InputUsage(input_tokens=total)
        with self._lock:
            now = self.clock()
            self._entries = {d: e for d, e in self._entries.items() if e[0] > now}
            hit = self._longest_hit(segments, breakpoints)
            read = ends[hit] if hit is not None else 0
            if hit is not None:
                self._touch(segments[hit].digest, self._entries[segments[hit].digest][1], now)
            for index in breakpoints:
                self._touch(segments[index].digest, segments[index].breakpoint or DEFAULT_TTL, now)
        written = _written_by_ttl(segments, ends, breakpoints, read)
        return InputUsage(
            input_tokens=total - read - sum(written.values()),
            cache_read_input_tokens=read,
            cache_creation_5m=written.get("5m", 0),
            cache_creation_1h=written.get("1h", 0),
        )

    def _longest_hit(
        self, segments: Sequence[PromptSegment], breakpoints: Sequence[int]
    ) -> int | None:
        best: int | None = None
        for index in breakpoints:
            for position in range(index, max(-1, index - LOOKBACK_BLOCKS), -1):
                if segments[position].digest in self._entries:
                    best = position if best is None else max(best, position)
                    break
        return best

    def _touch(self, digest: str, ttl: str, now: float) -> None:
        self._entries[digest] = (now + TTL_SECONDS.get(ttl, TTL_SECONDS[DEFAULT_TTL]), ttl)


def _running_totals(segments: Sequence[PromptSegment]) -> list[int]:
    totals: list[int] = []
    running = 0
    for segment in segments:
        running += segment.tokens
        totals.append(running)
    return totals


def _written_by_ttl(
    segments: Sequence[PromptSegment], ends: Sequence[int], breakpoints: Sequence[int], read: int
) -> dict[str, int]:
    """Attribute the tokens after the cache hit to the TTL of the breakpoint that closes them."""
    written: dict[str, int] = {}
    start = read
    for index in breakpoints:
        if ends[index] > start:
            ttl = segments[index].breakpoint or DEFAULT_TTL
            written[ttl] = written.get(ttl, 0) + ends[index] - start
            start = ends[index]
    return written
