"""Prompt-cache cost of a 50-call session: qloop against pydantic-ai with its Anthropic cache settings.

Both run the same session through the stand-in, which accounts for the cache as the API documents it
(each model's minimum cacheable prefix, the 20-block lookback, the 5-minute lifetime): the real system
prompt, the four built-in tools (same names, parameters and descriptions; data-sized results: a
frame's summary, ``describe()``, the variable list), the same scripted replies. pydantic-ai runs with
``anthropic_cache=True`` (the moving breakpoint on the newest block), ``anthropic_cache_instructions``
and ``anthropic_cache_tool_definitions``. The session is run for each current model family's minimum
(Sonnet 5.5: 1,024 tokens; Haiku 5.5: 4,096).

Figure: the session's effective input cost, input + 1.25 x cache writes + 0.1 x cache reads over every
request, in input tokens (what the session's input costs, in units of the price of an uncached input
token). Target: qloop <= pydantic-ai at each model. Beside it, that cost over all the input tokens the
client sent: the share of the full price paid. The share alone favours a client whose requests are
larger, since tokens read from the cache lower it while they add to the cost (pydantic-ai wraps each
tool result in a list of text blocks and sends ``tool_choice``, a few tokens a request).
Run: ``python bench/cache_cost.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from qloop_kernel.conversation import SYSTEM_PROMPT
from qloop_kernel.loop import Limits, QueryLoop
from qloop_kernel.model import AnthropicModel
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.tools.runtime import Tool, ToolRuntime

CALLS = 50
MODELS = ("claude-sonnet-5-5", "claude-haiku-5-5")
PROMPT = "Profile the sales frame df: its columns, their summaries and the sales by region."
COLUMNS = ("region", "store", "sales", "units", "price", "discount", "returned", "day", "channel")
SUMMARY = (
    "DataFrame df: 20,000 rows x 10 columns, 1.9 MB\n"
    + "".join(
        f"  {c:<9} float64  nulls 0   mean 151.2  std 104.9  min 0.4  25% 71.3  50% 126.8  "
        f"75% 203.5  max 1,204.3\n"
        for c in COLUMNS
    )
    * 4
)
DESCRIBE = (
    "stdout:\n"
    + "\n".join(
        f"{stat:<6}" + "".join(f"{v:>12.2f}" for v in range(9)) for stat in ("count", "mean", "std")
    )
    * 6
)


def list_variables() -> str:
    """List the user's variables in the live kernel: name, type, shape or length, dtypes and
    approximate memory. Modules, IPython internals and names starting with _ are left out."""
    return "df  DataFrame  20000 x 10  1.9 MB\nregions  list  4\n"


def inspect_variable(
    name: str, columns: list[str] | None = None, offset: int = 0, rows: int | None = None
) -> str:
    """Describe one variable of the user's namespace by type: for a DataFrame its shape,
    dtypes, nulls, head and a numeric summary; for arrays, containers, strings, functions
    (signature, docstring, source), modules and other objects a bounded summary.

    Args:
        name: the variable name, or a dotted attribute path such as model.coef_
        columns: DataFrame columns to show (default: all, bounded)
        offset: first row to show
        rows: number of rows to show
    """
    return SUMMARY


def run_code(code: str) -> str:
    """Run Python code in the user's live Jupyter kernel namespace (variables persist between
    calls and are visible to the user). IPython magics and display() work and matplotlib
    figures are shown inline and returned as images. The last expression's value is returned.

    Args:
        code: Python source to run, as it would be typed in a notebook cell.
    """
    return DESCRIBE


def notebook_history(last: int = 10) -> str:
    """The cells the user ran most recently in this kernel: source and short output.

    Args:
        last: how many recent cells to show
    """
    return "In [1]: df = load_sales()\n"


TOOLS = (list_variables, inspect_variable, run_code, notebook_history)
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("inspect_variable", {"name": "df"}),
    ("run_code", {"code": "print(df.describe())"}),
    ("list_variables", {}),
    ("run_code", {"code": "df.groupby('region')['sales'].sum()"}),
]


def script() -> list[Reply]:
    replies = [
        Reply([text(f"Step {i + 1}."), tool_use(*STEPS[i % len(STEPS)])]) for i in range(CALLS - 1)
    ]
    return [*replies, Reply([text("## Sales profile\n\nAll columns are clean.")])]


def run_qloop(model: str) -> list[dict[str, int]]:
    with StandInAPI(script()) as api:
        os.environ.update(api.environment())
        runtime = ToolRuntime.of(
            [Tool.from_function(f, requires_approval=False) for f in TOOLS], AutoApprover()
        )
        loop = QueryLoop(AnthropicModel(model), runtime, system=SYSTEM_PROMPT,
                         limits=Limits(max_turns=CALLS))  # fmt: skip
        result = loop.run([{"role": "user", "content": [{"type": "text", "text": PROMPT}]}])
        assert result.status == "completed", result.stop
        return [dict(r.usage) for r in api.requests]


def run_pydantic_ai(model: str) -> list[dict[str, int]]:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel as PaiModel
    from pydantic_ai.models.anthropic import AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.usage import UsageLimits

    with StandInAPI(script()) as api:
        provider = AnthropicProvider(api_key="bench", base_url=api.base_url)
        settings = AnthropicModelSettings(
            anthropic_cache=True,
            anthropic_cache_instructions=True,
            anthropic_cache_tool_definitions=True,
            max_tokens=8192,
        )
        agent = Agent(PaiModel(model, provider=provider), instructions=SYSTEM_PROMPT,
                      tools=list(TOOLS), model_settings=settings)  # fmt: skip
        agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=CALLS + 1))
        return [dict(r.usage) for r in api.requests]


def effective_cost(usages: list[dict[str, int]]) -> tuple[float, int]:
    """The session's effective input cost in input tokens, and all the input tokens it sent."""
    fresh = sum(u["input_tokens"] for u in usages)
    writes = sum(u["cache_creation_input_tokens"] for u in usages)
    reads = sum(u["cache_read_input_tokens"] for u in usages)
    return fresh + 1.25 * writes + 0.1 * reads, fresh + writes + reads


def main() -> int:
    met = True
    print(f"{'model':<20}{'requests':>9}{'qloop cost':>12}{'share':>8}"
          f"{'pydantic-ai cost':>18}{'share':>8}")  # fmt: skip
    lines = []
    for model in MODELS:
        ours, theirs = run_qloop(model), run_pydantic_ai(model)
        (a, a_all), (b, b_all) = effective_cost(ours), effective_cost(theirs)
        met = met and a <= b
        print(f"{model:<20}{len(ours):>9}{a:>12,.0f}{a / a_all:>8.4f}{b:>18,.0f}{b / b_all:>8.4f}")
        lines.append(f"effective input cost, {model}: qloop {a:,.0f} tokens ({a / a_all:.4f} of its "
                     f"{a_all:,} input tokens), pydantic-ai {b:,.0f} ({b / b_all:.4f} of {b_all:,}) "
                     f"(target: qloop <= pydantic-ai)")  # fmt: skip
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
