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
the runs), qloop / SDK. IOPub bytes are whole messages as they arrive from the socket: every ZMQ frame
of each message the cell's request is the parent of (topic, delimiter, signature, header,
parent_header, metadata, content and buffers), counted before they are decoded. ``--breakdown``
prints where the last 200-call cell's bytes went, by message type and by what each message shows. That ratio has no target: the agent cell also renders the turn, shows each
step, checks approval and risk, fingerprints what the turn reads and saves its record, none of which
the bare SDK loop does (``bench/loop_overhead.py`` compares the loops themselves).
Run: ``python bench/agent_cell.py [--runs 3] [--sizes 200] [--breakdown]`` (Linux: reads /proc).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zmq  # noqa: E402

from qloop_kernel.notebook.display import ANSWER_MIME  # noqa: E402
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


class WireSizes:
    """The size on the wire of every message the kernel client receives, by message id.

    LabKernel's reader thread receives through its client's ``Session.recv``; this one, put in
    its place on that session, keeps the size of the raw frames before decoding them as it does.
    """

    def __init__(self, kernel: LabKernel) -> None:
        self.sizes: dict[str, int] = {}
        session = kernel._client.session  # the raw frames are not kept by LabKernel itself
        feed, deserialize = session.feed_identities, session.deserialize

        def recv(socket: Any, mode: int = zmq.NOBLOCK, content: bool = True,
                 copy: bool = True) -> tuple[Any, Any]:  # fmt: skip
            try:
                frames = socket.recv_multipart(mode, copy=True)
            except zmq.Again:
                return None, None
            idents, rest = feed(frames, True)
            message = deserialize(rest, content=content, copy=True)
            self.sizes[message["header"]["msg_id"]] = sum(len(frame) for frame in frames)
            return idents, message

        session.recv = recv

    def of(self, message: dict[str, Any]) -> int:
        return self.sizes[message["header"]["msg_id"]]


def what_it_shows(message: dict[str, Any]) -> str:
    """A message's type and what it carries (which display, which comm), for the breakdown."""
    kind, content = message["msg_type"], message["content"]
    if kind in ("display_data", "update_display_data"):
        data = content.get("data", {})
        shown = next((name for mime, name in SHOWN if mime in data), None)
        if shown is None and "qloop-line" in str(data.get("text/html", "")):
            shown = "tool or note line"
        if shown is None and list(data) == ["text/plain"]:
            shown = "status line (text)"
        return f"{kind}: {shown or ', '.join(sorted(data))}"
    if kind in ("comm_open", "comm_msg", "comm_close"):
        data = content.get("data", {})
        what = data.get("op") or data.get("method") or content.get("target_name") or "?"
        if data.get("method") in ("update", "echo_update"):
            what = f"widget {data['method']} ({', '.join(sorted(data.get('state', {})))})"
        return f"{kind}: {what}"
    if kind == "stream":
        return f"stream: {content.get('name')}"
    return str(kind)


SHOWN = [
    (MIME_TYPE, "record mirror"),
    (ANSWER_MIME, "answer"),
    ("application/vnd.jupyter.widget-view+json", "widget view"),
]


def breakdown(messages: list[dict[str, Any]], wire: WireSizes, calls: int) -> None:
    by_kind: dict[str, list[int]] = {}
    for message in messages:
        by_kind.setdefault(what_it_shows(message), []).append(wire.of(message))
    total = sum(sum(sizes) for sizes in by_kind.values())
    print(f"\nIOPub of the last {calls}-call cell: {len(messages):,} messages, "
          f"{total / 1e6:.3f} MB")  # fmt: skip
    print(f"{'message: what it shows':<64}{'count':>7}{'MB':>9}{'mean B':>9}")
    for kind, sizes in sorted(by_kind.items(), key=lambda item: -sum(item[1])):
        print(f"{kind[:63]:<64}{len(sizes):>7}{sum(sizes) / 1e6:>9.3f}"
              f"{sum(sizes) / len(sizes):>9,.0f}")  # fmt: skip


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


def running_record_bytes(messages: list[dict[str, Any]], wire: WireSizes) -> int:
    """The wire bytes of the running (unfinished) records a cell sent, by comm or mirror."""
    sent = 0
    for message in messages:
        data = message["content"].get("data", {})
        record = data.get("value") if data.get("op") == "set_metadata" else data.get(MIME_TYPE)
        if isinstance(record, dict) and record.get("status") == "running":
            sent += wire.of(message)
    return sent


@dataclass
class AgentRun:
    cpu: float
    traffic: int  # IOPub bytes
    record: int  # the final record's JSON bytes
    running: int  # IOPub bytes of the running records
    msg_id: str


def agent_run(kernel: LabKernel, wire: WireSizes, base_url: str, calls: int) -> AgentRun:
    load(base_url, calls)
    cell = f"%%agent --new --approve auto --max-turns {calls}\n{PROMPT}"  # its own conversation
    msg_id, cpu = timed_cell(kernel, cell)
    messages = kernel.messages(msg_id)
    traffic = sum(wire.of(m) for m in messages)
    running = running_record_bytes(messages, wire)
    return AgentRun(cpu, traffic, final_record_bytes(kernel, msg_id), running, msg_id)


def sdk_run(kernel: LabKernel, base_url: str, calls: int) -> float:
    load(base_url, calls)
    return timed_cell(kernel, f"sdk_turn({calls})")[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="paired runs at each size")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="model calls per cell")
    parser.add_argument("--breakdown", action="store_true", help="where the IOPub bytes go")
    args = parser.parse_args(argv)
    sizes = tuple(sorted(args.sizes))
    rows, met, running = [], True, []
    with stand_in() as base_url, tempfile.TemporaryDirectory() as home:
        env = {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "bench",
            "NO_PROXY": "127.0.0.1,localhost",
            "QLOOP_SIGNING_KEY_FILE": os.path.join(home, "key"),
        }
        with LabKernel(env) as kernel:
            wire = WireSizes(kernel)
            kernel.run("%load_ext qloop_kernel\n" + SETUP + SDK_SETUP, timeout=120)
            agent_run(kernel, wire, base_url, 3), sdk_run(kernel, base_url, 3)  # warm-up
            for calls in sizes:
                ours, theirs, traffic, record = [], [], [], []
                for _ in range(args.runs):
                    run = agent_run(kernel, wire, base_url, calls)
                    ours.append(run.cpu), traffic.append(run.traffic), record.append(run.record)
                    running.append(run.running)
                    theirs.append(sdk_run(kernel, base_url, calls))
                rows.append((calls, ours, theirs, traffic, record))
            if args.breakdown:
                breakdown(kernel.messages(run.msg_id), wire, sizes[-1])
    print(f"{'calls':>5}{'qloop ms/call':>15}{'SDK ms/call':>13}{'ratio':>7}"
          f"{'IOPub MB':>10}{'record MB':>11}{'IOPub limit MB':>16}")  # fmt: skip
    for calls, ours, theirs, traffic, record in rows:
        ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
        sent, size = statistics.median(traffic), statistics.median(record)
        limit = 2 * size + IOPUB_SLACK
        met = met and (calls != max(sizes) or sent <= limit)
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
    print(f"of which running records of the {calls}-call cells (saved as they run, more as a "
          f"cell takes longer): {', '.join(f'{b / 1e6:.2f}' for b in running[-args.runs:])} MB")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
