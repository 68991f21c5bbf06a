"""``qloop eval SUITE`` and ``qloop eval compare A.json B.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..names import POLICIES, PROVIDERS
from ..redact import redact_text

EXIT_OK, EXIT_BUDGET, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXIT_CODES = """\
exit codes:
  0    every trial ran (the pass rates are in the report, whatever they are)
  1    stopped at --max-cost: the report covers the trials that ran (--resume with a larger
       budget runs the rest)
  2    a mistake on the command line, in the suite or in a task notebook (one line says which)
  130  interrupted (Ctrl-C): the finished trials are kept; --resume runs the rest
"""


def add_eval_parser(sub: Any) -> None:
    """Register ``qloop eval`` on the ``qloop`` command's sub-parsers."""
    run = sub.add_parser(
        "eval",
        help="measure the agent on a suite of task notebooks; `qloop eval compare A.json B.json`",
        description="Run each task notebook of SUITE in a fresh kernel and report pass rates, model "
        "calls, tokens, cost and time (docs/eval.md). `qloop eval compare A.json B.json` compares "
        "two reports task by task.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("suite", help="a folder of task notebooks, a .toml/.yaml list, or 'starter'")
    run.add_argument("reports", nargs="*", help=argparse.SUPPRESS)  # for `compare A.json B.json`
    run.add_argument(
        "--provider", type=str.lower, choices=PROVIDERS,
        help="model provider (default: QLOOP_PROVIDER or anthropic)",
    )  # fmt: skip
    run.add_argument("--model", help="model id (default: QLOOP_MODEL or the agent's default)")
    run.add_argument("--trials", type=_positive, default=1, help="runs of each task (default 1)")
    run.add_argument("--max-cost", type=float, help="USD for the whole run; it stops when spent")
    run.add_argument("--approve", choices=POLICIES, help="approval policy (default: readonly)")
    run.add_argument("--max-turns", type=_positive, help="model calls per agent cell")
    run.add_argument("-j", "--jobs", type=_positive, default=1, help="tasks run at once")
    run.add_argument("--timeout", type=float, default=600, help="seconds per cell (default 600)")
    run.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    run.add_argument(
        "-o", "--output", help="folder for results and reports (default qloop-eval-SUITE)"
    )
    run.add_argument("--resume", action="store_true", help="go on with the run in the folder")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.set_defaults(func=main)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return value


def _say(text: str) -> None:
    print(redact_text(text), file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    """Run ``qloop eval``; the exit code (see EXIT_CODES)."""
    from .suite import SuiteError

    try:
        if args.suite == "compare":
            return _compare(args.reports)
        if args.reports:
            raise SuiteError(f"one suite at a time (got also {' '.join(args.reports)})")
        return _evaluate(args)
    except SuiteError as exc:
        _say(f"qloop eval: {exc}")
        return EXIT_USAGE


def _compare(paths: list[str]) -> int:
    from .compare import compare, read_report, table
    from .suite import SuiteError

    if len(paths) != 2:
        raise SuiteError("compare takes two reports: qloop eval compare A.json B.json")
    print(table(compare(read_report(paths[0]), read_report(paths[1]))))
    return EXIT_OK


def _evaluate(args: argparse.Namespace) -> int:
    from . import report
    from .harness import RunOptions
    from .run import Runner, open_results
    from .suite import load_suite

    suite = load_suite(args.suite)
    _check_kernel(args.kernel)
    if args.max_cost is not None and args.max_cost <= 0:
        from .suite import SuiteError

        raise SuiteError(f"--max-cost {args.max_cost:g}: give a budget above 0 USD")
    folder = Path(args.output or f"qloop-eval-{suite.name}")
    config = {"suite": str(suite.source), "provider": args.provider, "model": args.model,
              "approve": args.approve, "trials": args.trials, "max_turns": args.max_turns}  # fmt: skip
    state = open_results(folder, config, args.resume)
    options = RunOptions(approve=args.approve, model=args.model, provider=args.provider,
                         timeout=args.timeout, kernel=args.kernel, max_turns=args.max_turns)  # fmt: skip
    runner = Runner(suite, options, folder, state, trials=args.trials, jobs=args.jobs,
                    max_cost=args.max_cost, progress=None if args.quiet else sys.stderr)  # fmt: skip
    state = runner.run()
    planned = len(suite.tasks) * args.trials
    built = report.build(suite, {**config, "max_cost": args.max_cost}, state.results,
                         state.stopped, planned)  # fmt: skip
    print(report.table(built))
    json_path, html_path = report.write(built, folder)
    _say(f"qloop eval: wrote {json_path} and {html_path}")
    if state.stopped == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_BUDGET if state.stopped == "budget" else EXIT_OK


def _check_kernel(name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    from .suite import SuiteError

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        raise SuiteError(f"--kernel {name}: no such kernel (`jupyter kernelspec list`)") from None
