"""Prompt-cache share: a 10-turn tool session through the stand-in; share of input tokens read from cache.

The stand-in accounts for cache breakpoints like the API does (each model's minimum cacheable prefix, the
20-block lookback), so this measures where qloop places its breakpoints. The tool's result is data-sized
(about 500 tokens, like a column summary of a real frame); the request carries the four built-in
tools too.

The most any placement could read: a request can only read a prefix it shares with an earlier
request, and only if that prefix reaches the model's minimum (the cache is written nowhere else), so
each request's ceiling is its longest such shared prefix, whatever the breakpoints. Target: from
turn 2 on, every request reads all of its ceiling from cache. The share of all input tokens read
from cache is printed beside it: it is bounded by the ceiling (81.9 % on this session, whose first
request is below Sonnet's 1,024-token minimum), so it cannot serve as the target itself.
Run: ``python bench/cache_ratio.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cache_cost import TOOLS  # noqa: E402
from qloop_kernel.conversation import SYSTEM_PROMPT  # noqa: E402
from qloop_kernel.loop import Limits, QueryLoop  # noqa: E402
from qloop_kernel.model import AnthropicModel  # noqa: E402
from qloop_kernel.policy.permissions import AutoApprover  # noqa: E402
from qloop_kernel.testing import DOCUMENTED_MODELS, Reply, StandInAPI, text, tool_use  # noqa: E402
from qloop_kernel.testing.tokens import prompt_segments  # noqa: E402
from qloop_kernel.tools.runtime import Tool, ToolRuntime  # noqa: E402

TURNS = 10
MODEL = "claude-sonnet-4-6"


def describe_column(name: str) -> str:
    """Summary statistics of a column."""
    return f"{name}: count 1000, mean 12.5, std 3.1, min 1.0, max 30.0, nulls 0 " * 30


def all_input(usage: dict[str, Any]) -> int:
    return int(usage["input_tokens"] + usage["cache_read_input_tokens"]
               + usage["cache_creation_input_tokens"])  # fmt: skip


def readable(bodies: list[dict[str, Any]], minimum: int) -> list[int]:
    """Per request, the tokens of its longest prefix shared with an earlier request that reaches
    ``minimum``: the most a cache read can be, wherever the breakpoints are."""
    chains = [[(s.digest, s.tokens) for s in prompt_segments(body)] for body in bodies]
    ceilings = []
    for n, chain in enumerate(chains):
        best = 0
        for earlier in chains[:n]:
            shared = 0
            for (digest, tokens), (other, _) in zip(chain, earlier, strict=False):
                if digest != other:
                    break
                shared += tokens
            best = max(best, shared if shared >= minimum else 0)
        ceilings.append(best)
    return ceilings


def main() -> int:
    script = [Reply([text(f"Checking column c{i}."), tool_use("describe_column", {"name": f"c{i}"})])
              for i in range(TURNS - 1)] + [Reply([text("All columns look clean.")])]  # fmt: skip
    tools = [describe_column, *TOOLS]  # and the four built-in tools' schemas, as a cell sends them
    runtime = ToolRuntime.of([Tool.from_function(f, requires_approval=False) for f in tools],
                             AutoApprover())  # fmt: skip
    with StandInAPI(script) as api:
        os.environ.update(api.environment())
        prompt = [
            {"role": "user", "content": [{"type": "text", "text": "Check every column of df."}]}
        ]
        loop = QueryLoop(AnthropicModel(MODEL), runtime, system=SYSTEM_PROMPT,
                         limits=Limits(max_turns=TURNS))  # fmt: skip
        result = loop.run(prompt)
        usages = [r.usage for r in api.requests]
        bodies = [r.body for r in api.requests]
    assert result.status == "completed", result.stop
    minimum = next(m.cache_minimum for m in DOCUMENTED_MODELS if m.id == MODEL)
    ceilings = readable(bodies, minimum)
    print(f"{'turn':>4}{'input':>8}{'cache read':>12}{'cache write':>13}{'read share':>12}"
          f"{'readable':>10}")  # fmt: skip
    for turn, (u, ceiling) in enumerate(zip(usages, ceilings, strict=True), 1):
        share = u["cache_read_input_tokens"] / all_input(u)
        print(f"{turn:>4}{u['input_tokens']:>8}{u['cache_read_input_tokens']:>12}"
              f"{u['cache_creation_input_tokens']:>13}{share:>12.1%}{ceiling:>10}")  # fmt: skip
    later = usages[1:]
    read = sum(u["cache_read_input_tokens"] for u in later)
    total = sum(map(all_input, later))
    ceiling = sum(ceilings[1:]) / total
    print(f"the most any breakpoints could read, turns 2-{TURNS}: {ceiling:.1%} (request 1, "
          f"{all_input(usages[0]):,} tokens, is below the {minimum:,}-token minimum: nothing "
          f"of it is cached, so request 2 reads nothing)")  # fmt: skip
    short = [n for n, (u, c) in enumerate(zip(usages, ceilings, strict=True), 1)
             if n > 1 and u["cache_read_input_tokens"] < c]  # fmt: skip
    tail = usages[2:]
    print(f"cache-read share of input tokens, turns 2-{TURNS}: {read / total:.1%}; turns "
          f"3-{TURNS}: {sum(u['cache_read_input_tokens'] for u in tail) / sum(map(all_input, tail)):.1%}")  # fmt: skip
    print(f"requests reading less than they could: {len(short)} {short} (target: 0)")
    return 0 if not short else 1


if __name__ == "__main__":
    sys.exit(main())
