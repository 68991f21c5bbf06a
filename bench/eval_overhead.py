"""The harness's own time per ``qloop eval`` trial, the kernel's start and the cells excluded.

Runs starter tasks through ``qloop eval``'s runner against the Messages API stand-in playing the correct
solver (``--approve auto``, one job). Each trial records ``kernel_s`` (``NotebookClient.async_execute``:
the kernel's start, every cell, the agent's turns, the shutdown) and ``harness_s``: everything else the
harness did for it — preparing the notebook, the client, judging the checks and agent records (risk
classes included), writing the executed notebook and the results line. The reports (JSON and HTML) are
built once per run; their time is shown per task beside it. Target: median ``harness_s`` ≤ 100 ms.

Run: ``python bench/eval_overhead.py [--tasks 6]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qloop_kernel.eval import report, solvers  # noqa: E402
from qloop_kernel.eval.harness import RunOptions  # noqa: E402
from qloop_kernel.eval.run import Runner, open_results  # noqa: E402
from qloop_kernel.eval.suite import Suite, load_suite  # noqa: E402
from qloop_kernel.testing import StandInAPI  # noqa: E402

TARGET_MS = 100.0
# Tasks without dask, so the figure does not depend on an optional library.
TASKS = ("split_name_column", "melt_wide_to_long", "top_n_per_group", "clean_currency_strings",
         "fill_missing_median", "follow_up_by_quarter", "model_fit_heldout", "wide_frame_nulls")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6, help="starter tasks to run (default 6)")
    args = parser.parse_args()
    starter = load_suite("starter")
    chosen = [t for t in starter.tasks if t.id in TASKS[: args.tasks]]
    suite = Suite(name="bench", source=starter.source, tasks=chosen)
    with StandInAPI(responder=solvers.correct(suite)) as api, tempfile.TemporaryDirectory() as out:
        os.environ.update(api.environment())
        config = {"suite": "bench"}
        state = open_results(Path(out), config, resume=False)
        options = RunOptions(approve="auto")
        state = Runner(suite, options, Path(out), state).run()
        started = time.perf_counter()
        built = report.build(suite, config, state.results, state.stopped, len(chosen))
        report.write(built, Path(out))
        reports_ms = (time.perf_counter() - started) * 1000 / len(chosen)
    failed = [r["task"] for r in state.results if r["status"] != "passed"]
    harness = [r["harness_s"] * 1000 for r in state.results]
    kernel = [r["kernel_s"] for r in state.results]
    median = statistics.median(harness)
    print(f"tasks: {len(chosen)}, passed: {len(chosen) - len(failed)}")
    print(f"kernel start, cells and shutdown per trial: median {statistics.median(kernel):.2f} s")
    print(f"reports (JSON and HTML) per task: {reports_ms:.1f} ms")
    print(
        f"harness per trial: median {median:.1f} ms (max {max(harness):.1f} ms), target <= {TARGET_MS:.0f} ms"
    )
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
