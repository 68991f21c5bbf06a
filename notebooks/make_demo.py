"""Build notebooks/demo.ipynb: a small sales analysis whose agent cells are real runs of qloop-kernel.

The agent's replies come from the loopback Messages API stand-in (scripted below), and the turns run
through the real SDK, loop, tools and headless runner, so the saved records are what a run produces.
Re-run this script after a change to the record format: ``python notebooks/make_demo.py``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import nbformat

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

HERE = Path(__file__).parent

SETUP = """\
%load_ext qloop_kernel
import numpy as np
import pandas as pd

rng = np.random.default_rng(7)
n = 600
days = pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
styles = rng.integers(0, 3, n)
df = pd.DataFrame({
    "date": [d.strftime(["%Y-%m-%d", "%d/%m/%Y", "%b %d %Y"][s]) for d, s in zip(days, styles)],
    "region": rng.choice(["North", "South", "East", "West"], n),
    "units": rng.integers(1, 20, n),
    "price": rng.choice([9.5, 12.0, 19.9], n),
})
df["revenue"] = df["units"] * df["price"]
df.head()"""

CLEAN_PROMPT = "Clean the date column of df and plot monthly revenue."
# Each format parsed on its own: "05/03/2025" is 5 March here, which a mixed-format guess gets wrong.
CLEAN_CODE = """\
formats = ["%Y-%m-%d", "%d/%m/%Y", "%b %d %Y"]
parsed = [pd.to_datetime(df["date"], format=f, errors="coerce") for f in formats]
df["date"] = parsed[0].fillna(parsed[1]).fillna(parsed[2])
print(df["date"].isna().sum(), "unparsed dates;", df["date"].min().date(), "to", df["date"].max().date())"""
# Bars at positions 0..11 drawn by matplotlib itself: pandas 2 and 3 place date-indexed bars differently.
PLOT_CODE = """\
import matplotlib.pyplot as plt
monthly = df.set_index("date")["revenue"].resample("MS").sum()
fig, ax = plt.subplots(figsize=(8, 3))
ax.bar(range(len(monthly)), monthly.to_numpy())
ax.set_xticks(range(len(monthly)), [d.strftime("%b") for d in monthly.index])
ax.set_title("Monthly revenue")
ax.set_ylabel("revenue")
plt.tight_layout()
plt.show()
monthly.round(0)"""

GROWTH_PROMPT = (
    "Now compare the regions: which one grew the most from the first to the second half?"
)
GROWTH_CODE = """\
half = np.where(df["date"].dt.month <= 6, "H1", "H2")
by_region = df.groupby(["region", half])["revenue"].sum().unstack()
by_region["growth_%"] = (by_region["H2"] / by_region["H1"] - 1).mul(100).round(1)
by_region.sort_values("growth_%", ascending=False)"""


def facts() -> dict[str, object]:
    """What the saved code shows, computed by the same code: the answers state these figures."""
    import contextlib

    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(SETUP.replace("%load_ext qloop_kernel\n", ""), namespace)
        exec(CLEAN_CODE, namespace)
        exec(PLOT_CODE.replace("plt.show()", "plt.close(fig)"), namespace)
        exec(GROWTH_CODE, namespace)
    df, monthly, by_region = namespace["df"], namespace["monthly"], namespace["by_region"]
    ranked = by_region.sort_values("growth_%", ascending=False)  # type: ignore[attr-defined]
    return {
        "unparsed": int(df["date"].isna().sum()),  # type: ignore[index]
        "low": (monthly.idxmin().strftime("%B"), monthly.min()),  # type: ignore[attr-defined]
        "high": (monthly.idxmax().strftime("%B"), monthly.max()),  # type: ignore[attr-defined]
        "top": (ranked.index[0], ranked.iloc[0]["H1"], ranked.iloc[0]["H2"], ranked.iloc[0]["growth_%"]),
        "last": (ranked.index[-1], ranked.iloc[-1]["growth_%"]),
    }


def script() -> list[Reply]:
    found = facts()
    (low_month, low), (high_month, high) = found["low"], found["high"]  # type: ignore[misc]
    top, h1, h2, growth = found["top"]  # type: ignore[misc]
    last, last_growth = found["last"]  # type: ignore[misc]
    return [
        Reply([text("Let me look at `df` first."), tool_use("inspect_variable", {"name": "df"})]),
        Reply(
            [
                text("The dates come in three formats. Parsing them:"),
                tool_use("run_code", {"code": CLEAN_CODE}),
            ]
        ),  # fmt: skip
        Reply([tool_use("run_code", {"code": PLOT_CODE})]),
        Reply(
            [
                text(
                    f"Done. `df['date']` is now a datetime column: each of the three input "
                    f"formats was parsed on its own, and {found['unparsed']} of 600 dates could "
                    f"not be parsed. Monthly revenue is plotted above: it ranges from "
                    f"{low:,.0f} in {low_month} to {high:,.0f} in {high_month}."
                )
            ]
        ),  # fmt: skip
        Reply([tool_use("run_code", {"code": GROWTH_CODE})]),
        Reply(
            [
                text(
                    f"**{top}** grew the most from the first to the second half of the year: "
                    f"revenue went from {h1:,.0f} to {h2:,.0f} ({growth:+.1f}%). {last} changed "
                    f"the least ({last_growth:+.1f}%). The table above ranks all four regions."
                )
            ]
        ),  # fmt: skip
    ]


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "# qloop-kernel demo: a small sales analysis\n\nThe agent cells below carry saved "
            "records: re-running the notebook replays their approved steps without calling the model."
        ),
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(f"%%agent\n{CLEAN_PROMPT}"),
        nbformat.v4.new_code_cell(f"%%agent\n{GROWTH_PROMPT}"),
        nbformat.v4.new_code_cell('by_region = df.groupby("region")["revenue"].sum()\nby_region'),
    ]
    return nb


def main() -> None:
    nb = build()
    with StandInAPI(script()) as api:
        os.environ.update(api.environment())
        os.environ["QLOOP_APPROVAL"] = "auto"
        AgentNotebookClient(
            nb, progress=io.StringIO(), timeout=300, kernel_name="python3"
        ).execute()
        assert api.remaining == 0, "the demo script was not fully used"
    for cell in nb.cells:  # keep the file small: outputs are re-made by the replay
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, HERE / "demo.ipynb")
    print(f"wrote {HERE / 'demo.ipynb'}")


if __name__ == "__main__":
    main()
