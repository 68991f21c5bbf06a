"""An agent cell through a real kernel: IOPub traffic and kernel CPU per model call, qloop vs the SDK runner.

A kernel driven like JupyterLab (cell id and metadata on each request) holds a 20,000-row sales frame.
The same scripted session, served by the stand-in in its own process, is run twice at 10, 50 and 200
model calls: as a ``%%agent --new --approve auto`` cell (its own conversation, as each SDK run has; the
product path: magic, ConversationManager and its
record saves, ThreadedModel, the turn display, the store's mirror and comm), and as a cell that drives
the anthropic SDK's tool runner (``thread=False``) with the very same tool functions (qloop's built-in
tools bound to the shell) and the same system prompt. Tool results are data-sized: the frame's
summary, ``describe()``, a group-by, the variable list.

Figures: the IOPub bytes of the agent cell against its final record (target: the 200-call cell <=
2 x its final record + 1 MB), and the kernel process's CPU time per model call (``/proc``; median of
the runs), qloop / SDK. That ratio has no target: the agent cell also renders the turn, shows each
step, checks approval and risk, fingerprints what the turn reads and saves its record, none of which
the bare SDK loop does (``bench/loop_overhead.py`` compares the loops themselves).
Run: ``python bench/agent_cell.py [--runs 3]`` (Linux: reads /proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qloop_kernel.records import MIME_TYPE  # noqa: E402
from qloop_kernel.testing import Reply, items_to_json, text, tool_use  # noqa: E402
from tests.kernel_client import LabKernel  # noqa: E402

SIZES = (10, 50, 200)
IOPUB_SLACK = 1_000_000
MODEL = "claude-sonnet-4-6"
PROMPT = "Profile the sales frame df: its columns, their summaries and the sales by region."

SETUP = """
import numpy as np, pandas as pd
_rng = np.random.default_rng(3)
df = pd.DataFrame({
    "region": pd.Categorical(_rng.choice(["north", "south", "east", "west"], 20_000)),
    "store": _rng.integers(1, 400, 20_000),
    "sales": _rng.gamma(2.0, 150.0, 20_000).round(2),
    "units": _rng.integers(1, 40, 20_000),
    "price": _rng.normal(25, 6, 20_000).round(2),
    "discount": _rng.choice([0.0, 0.05, 0.1, 0.2], 20_000),
    "returned": _rng.random(20_000) < 0.03,
    "day": pd.date_range("2025-01-01", periods=20_000, freq="h"),
    "channel": _rng.choice(["web", "shop", "phone"], 20_000),
    "note": np.where(_rng.random(20_000) < 0.2, None, "ok"),
})
"""

SDK_SETUP = f"""
MODEL, PROMPT = {MODEL!r}, {PROMPT!r}
import anthropic
from qloop_kernel.conversation import SYSTEM_PROMPT as _SYSTEM
from qloop_kernel.notebook.tools import builtin_tools as _builtin

_sdk = anthropic.Anthropic(max_retries=0)
_sdk_tools = [anthropic.beta_tool(t.func, name=t.name) for t in _builtin(get_ipython())]

def sdk_turn(calls):
    runner = _sdk.beta.messages.tool_runner(
        model=MODEL, max_tokens=8192, system=_SYSTEM, stream=True, max_iterations=calls,
        messages=[{{"role": "user", "content": PROMPT}}], tools=_sdk_tools, thread=False,
    )
    turns = 0
    for stream in runner:
        turns += 1
        for _ in stream:
            pass
    assert turns == calls, turns
"""

STEPS: list[tuple[str, str, dict[str, Any]]] = [
    ("Looking at the frame first.", "inspect_variable", {"name": "df"}),
    ("Summary statistics next.", "run_code", {"code": "print(df.describe(include='all'))"}),
    (
        "Sales by region.",
        "run_code",
        {"code": "df.groupby('region', observed=True)[['sales', 'units']].agg(['mean', 'sum'])"},
    ),
    ("What else is in the namespace?", "list_variables", {}),
    (
        "A closer look at two columns.",
        "inspect_variable",
        {"name": "df", "columns": ["sales", "units"], "rows": 20},
    ),
]
ANSWER = (
    "## Sales profile\n\n"
    + "".join(
        f"- **{name}**: checked its type, nulls and range; nothing unexpected in this column.\n"
        for name in ("region", "store", "sales", "units", "price", "discount", "returned", "day")
    )
    + "\nSales are highest in the north and lowest in the west; returns are about 3 %.\n"
)


def script(calls: int) -> list[Reply]:
    replies = []
    for i in range(calls - 1):
        note, name, arguments = STEPS[i % len(STEPS)]
        replies.append(Reply([text(f"Step {i + 1}: {note}"), tool_use(name, arguments)]))
    return [*replies, Reply([text(ANSWER)])]


@contextlib.contextmanager
def stand_in() -> Iterator[str]:
    """The stand-in as its own process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "qloop_kernel.testing", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def load(base_url: str, calls: int) -> None:
    body = json.dumps(items_to_json(script(calls))).encode()
    for path in ("/_qloop/reset", "/_qloop/script"):
        request = urllib.request.Request(base_url + path, data=body, method="POST")
        urllib.request.urlopen(request, timeout=10).read()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wire_bytes(message: dict[str, Any]) -> int:
    """About what a message weighs on the wire: its four JSON parts."""
    parts = (message["header"], message["parent_header"], message["metadata"], message["content"])
    return sum(len(json.dumps(p, default=str).encode()) for p in parts)


def timed_cell(kernel: LabKernel, code: str) -> tuple[str, float]:
    """Run a cell like JupyterLab; its msg id and the kernel's CPU seconds until the reply."""
    before = cpu_seconds(kernel.pid)
    msg_id = kernel.execute(code, cell_id=f"bench-{uuid.uuid4().hex[:8]}")
    reply = kernel.complete(msg_id, timeout=600)
    spent = cpu_seconds(kernel.pid) - before
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"the cell failed: {kernel.error_text(msg_id)}")
    return msg_id, spent


def final_record_bytes(kernel: LabKernel, msg_id: str) -> int:
    records = [
        m["content"]["data"][MIME_TYPE]
        for m in kernel.messages(msg_id, "display_data", "update_display_data")
        if MIME_TYPE in m["content"]["data"]
    ]
    assert records and records[-1]["status"] == "completed", "no finished record in the mirror"
    return len(json.dumps(records[-1]).encode())


def agent_run(kernel: LabKernel, base_url: str, calls: int) -> tuple[float, int, int]:
    load(base_url, calls)
    cell = f"%%agent --new --approve auto --max-turns {calls}\n{PROMPT}"  # its own conversation
    msg_id, cpu = timed_cell(kernel, cell)
    traffic = sum(wire_bytes(m) for m in kernel.messages(msg_id))
    return cpu, traffic, final_record_bytes(kernel, msg_id)


def sdk_run(kernel: LabKernel, base_url: str, calls: int) -> float:
    load(base_url, calls)
    return timed_cell(kernel, f"sdk_turn({calls})")[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="paired runs at each size")
    args = parser.parse_args(argv)
    rows, met = [], True
    with stand_in() as base_url, tempfile.TemporaryDirectory() as home:
        env = {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "bench",
            "NO_PROXY": "127.0.0.1,localhost",
            "QLOOP_SIGNING_KEY_FILE": os.path.join(home, "key"),
        }
        with LabKernel(env) as kernel:
            kernel.run("%load_ext qloop_kernel\n" + SETUP + SDK_SETUP, timeout=120)
            agent_run(kernel, base_url, 3), sdk_run(kernel, base_url, 3)  # warm-up
            for calls in SIZES:
                ours, theirs, traffic, record = [], [], [], []
                for _ in range(args.runs):
                    cpu, sent, size = agent_run(kernel, base_url, calls)
                    ours.append(cpu), traffic.append(sent), record.append(size)
                    theirs.append(sdk_run(kernel, base_url, calls))
                rows.append((calls, ours, theirs, traffic, record))
    print(f"{'calls':>5}{'qloop ms/call':>15}{'SDK ms/call':>13}{'ratio':>7}"
          f"{'IOPub MB':>10}{'record MB':>11}{'IOPub limit MB':>16}")  # fmt: skip
    for calls, ours, theirs, traffic, record in rows:
        ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
        sent, size = statistics.median(traffic), statistics.median(record)
        limit = 2 * size + IOPUB_SLACK
        met = met and (calls != max(SIZES) or sent <= limit)
        print(f"{calls:>5}{statistics.median(ours) / calls * 1000:>15.2f}"
              f"{statistics.median(theirs) / calls * 1000:>13.2f}{ratio:>7.2f}"
              f"{sent / 1e6:>10.2f}{size / 1e6:>11.2f}{limit / 1e6:>16.2f}")  # fmt: skip
    for calls, ours, theirs, _, _ in rows:
        ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
        print(f"kernel CPU ratio qloop/SDK at {calls} calls: {ratio:.2f}")
    calls, _, _, traffic, record = rows[-1]
    sent, size = statistics.median(traffic), statistics.median(record)
    print(f"IOPub bytes of the {calls}-call cell: {sent / 1e6:.2f} MB, final record "
          f"{size / 1e6:.2f} MB (target <= {(2 * size + IOPUB_SLACK) / 1e6:.2f} MB)")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
