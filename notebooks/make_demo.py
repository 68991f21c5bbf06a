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
CLEAN_CODE = """\
df["date"] = pd.to_datetime(df["date"], format="mixed", dayfirst=False, errors="coerce")
print(df["date"].isna().sum(), "unparsed dates;", df["date"].min().date(), "to", df["date"].max().date())"""
PLOT_CODE = """\
import matplotlib.pyplot as plt
monthly = df.set_index("date")["revenue"].resample("MS").sum()
ax = monthly.plot(kind="bar", figsize=(8, 3), title="Monthly revenue")
ax.set_xticks(range(len(monthly)), [d.strftime("%b") for d in monthly.index], rotation=0)
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


def script() -> list[Reply]:
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
                    "Done. `df['date']` is now a datetime column (all 600 rows parsed, three "
                    "input formats). Monthly revenue is plotted above; it stays within a narrow "
                    "band through the year with no missing months."
                )
            ]
        ),  # fmt: skip
        Reply([tool_use("run_code", {"code": GROWTH_CODE})]),
        Reply(
            [
                text(
                    "Comparing the second half of the year with the first, the table above ranks "
                    "the regions by growth; the top row grew the most. The differences are "
                    "modest, as expected for this simulated data."
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
