"""``qloop``: run notebooks headless, list their agent cells, install the kernel spec."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ..eval.cli import add_eval_parser
from ..policy.permissions import POLICIES
from ..redact import redact_text
from .files import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_KERNEL,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    check_output,
    read_notebook,
    write_atomic,
    write_notebook,
)
from .teams_cli import add_parsers as add_team_parsers


def _say(text: str, file: TextIO | None = None) -> None:
    """Print one line, redacted: a notebook's prompts and errors may quote secrets."""
    print(redact_text(text), file=file)


def _run(args: argparse.Namespace) -> int:
    source = Path(args.notebook)
    nb = read_notebook(source)
    out = check_output(args.output or source.with_suffix(".executed.ipynb"))
    _check_kernel(args.kernel)
    from .runner import AgentNotebookClient

    client = AgentNotebookClient(
        nb,
        progress=not args.quiet,
        timeout=args.timeout,
        kernel_name=args.kernel,
        resources={"metadata": {"path": str(source.parent)}},
    )
    client.notebook_path = str(source)
    status = _execute(client, args, kernel_env(args))
    client.apply_proposals()
    if status in (EXIT_KERNEL, EXIT_INTERRUPTED) and client.cell_index is None:
        return status  # the kernel never started: nothing ran, nothing is written
    target = out if status == EXIT_OK or not out.exists() else _failed_path(out)
    write_notebook(nb, target)
    if args.quiet:  # the failure's one line, if any, was said; nothing more
        return status
    if status != EXIT_OK:
        kept = f" ({out} is left as it was)" if target != out else ""
        _say(
            f"qloop run: the run did not finish; wrote what ran to {target}{kept}", file=sys.stderr
        )
    else:
        _say(f"qloop run: wrote {out}", file=sys.stderr)
    return status


def kernel_env(args: argparse.Namespace) -> dict[str, str]:
    """The kernel's environment: this process's plus what the command line allows (a notebook
    cannot set it). This process's own environment is left as it was, so a caller that runs
    ``main`` in-process does not pass one run's policy on to the next."""
    from ..notebook.replay import CONTINUE_ON_DENIED, RECEIVED_OPT_IN

    env = dict(os.environ)
    if args.approve:
        env["QLOOP_APPROVAL"] = args.approve
    if args.replay_received:
        env[RECEIVED_OPT_IN] = "1"
    if args.continue_on_denied:
        env[CONTINUE_ON_DENIED] = "1"
    return env


def _execute(client: Any, args: argparse.Namespace, env: dict[str, str]) -> int:
    """Run the notebook; the exit code, with one line on stderr when it did not finish."""
    try:
        client.execute(env=env)
    except Exception as exc:
        if client.interrupted:  # nbclient stopped the kernel on SIGINT/SIGTERM
            _fail(client, "interrupted")
            return EXIT_INTERRUPTED
        return _failed(client, exc, args)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C while the kernel started
        _fail(client, "interrupted")
        return EXIT_INTERRUPTED
    return EXIT_OK


def _failed(client: Any, exc: Exception, args: argparse.Namespace) -> int:
    """The exit code and one line for what stopped the run."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    if isinstance(exc, CellExecutionError):
        _fail(client, f"failed: {error_line(exc)}")
        return EXIT_FAILED
    if isinstance(exc, CellTimeoutError):
        _fail(client, f"ran longer than --timeout {args.timeout:g} s and was stopped")
        return EXIT_FAILED
    if isinstance(exc, DeadKernelError):
        _fail(client, "stopped: the kernel died (out of memory, or it crashed)")
        return EXIT_KERNEL
    if client.cell_index is not None:
        raise exc
    # The kernel did not start: nbclient raises what the launch raised.
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    _say(f"qloop run: the kernel '{args.kernel}' did not start ({reason}); check "
         "`jupyter kernelspec list` and the kernel's Python", file=sys.stderr)  # fmt: skip
    return EXIT_KERNEL


def _fail(client: Any, what: str) -> None:
    where = "the run" if client.cell_index is None else f"cell {client.cell_index + 1}"
    _say(f"qloop run: {where} {what}", file=sys.stderr)


def _failed_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".ipynb") + ".failed.ipynb")


def error_line(exc: Any) -> str:
    """A failed cell's ``Type: message`` line (the error, not a line of its traceback)."""
    from ..tools.runtime import strip_ansi

    value = [line for line in strip_ansi(str(getattr(exc, "evalue", ""))).splitlines() if line]
    name = getattr(exc, "ename", None) or type(exc).__name__
    return f"{name}: {value[0].strip()}" if value else str(name)


def _check_kernel(name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    specs = KernelSpecManager()
    try:
        specs.get_kernel_spec(name)
    except NoSuchKernel:
        known = ", ".join(sorted(specs.find_kernel_specs())) or "none"
        raise CliError(
            f"--kernel {name}: no such kernel (installed: {known}); `qloop install-kernel --user` "
            "installs 'qloop'"
        ) from None


def _show(args: argparse.Namespace) -> int:
    from .show import show, show_log

    if str(args.notebook).endswith(".jsonl"):  # a hosted agent's chat session log
        log = Path(args.notebook)
        if not log.is_file():
            raise CliError(f"{log}: no such session log (they are under .qloop/acp/)")
        return show_log(log, full=args.full, as_json=args.json)
    return show(read_notebook(args.notebook), full=args.full, as_json=args.json)


def _export(args: argparse.Namespace) -> int:
    from ..notebook.export import to_notebook, to_script

    source = Path(args.notebook)
    nb = read_notebook(source)
    suffix = ".exported.ipynb" if args.to == "cells" else ".py"
    out = check_output(args.output or source.with_name(source.stem + suffix))
    if args.to == "cells":
        write_notebook(to_notebook(nb), out)
    else:
        script = to_script(nb)
        write_atomic(out, lambda handle: handle.write(script))
    _say(f"qloop export: wrote {out}", file=sys.stderr)
    return 0


def _install_kernel(args: argparse.Namespace) -> int:
    from .kernelspec import install

    try:
        where = install(user=args.user, prefix=args.prefix, name=args.name)
    except ValueError:  # jupyter_client's check of the name
        raise CliError(
            f"--name {args.name!r} is not a valid kernel name; use only ASCII letters, digits "
            "and '-', '.', '_'"
        ) from None
    except PermissionError as exc:
        raise CliError(
            f"cannot write the kernel spec ({exc.filename or exc}); use --user, or --prefix "
            "with a folder you can write"
        ) from None
    _say(f"installed kernel spec '{args.name}' in {where}")
    return 0


EXIT_CODES = """\
exit codes:
  0    every cell ran (and every saved agent step replayed)
  1    a cell failed, or a saved agent step was denied, blocked by the policy or failed
       (the line says which cell and step and why); `qloop show`: a record is invalid
  2    a mistake on the command line or in an input file (nothing was written)
  3    the kernel did not start or died
  130  interrupted (Ctrl-C)
"""


class CommandLineError(CliError):
    """A mistake on the command line, found by the parser of ``prog`` (``qloop run``)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse with one line per mistake (no usage block), a close match offered as "did you
    mean"; subcommands' parsers are of this class too (argparse makes them of the parent's)."""

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(self.prog, message)

    # argparse's own check of ``choices`` (a private method, overridden on purpose): the same
    # refusal with the nearest choice offered.
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(choice) for choice in choices]
        near = _nearest(str(value), names)
        offer = f"did you mean {near!r}? " if near else ""
        raise argparse.ArgumentError(
            action, f"invalid choice {str(value)!r} ({offer}choose from {', '.join(names)})"
        )


def _nearest(given: str, known: list[str]) -> str | None:
    """The close match of ``given`` among ``known`` (options compared without their dashes)."""
    bare = {name.lstrip("-"): name for name in known}
    found = difflib.get_close_matches(given.split("=")[0].lstrip("-"), bare, n=1, cutoff=0.6)
    return bare[found[0]] if found else None


def parser() -> argparse.ArgumentParser:
    main = _Parser(
        prog="qloop",
        description="qloop-kernel notebook agent tools",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    main.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = main.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    show = sub.add_parser(
        "show", help="read the agent cells of a notebook: prompt, provenance, steps and their code",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    show.add_argument("notebook", help="a notebook, or a chat session log (.qloop/acp/*.jsonl)")
    show.add_argument("--full", action="store_true", help="every line of every step's code")
    show.add_argument("--json", action="store_true", help="one JSON document, for scripts")
    show.set_defaults(func=_show)
    export = sub.add_parser(
        "export", help="turn approved agent steps into ordinary cells (runs without qloop)"
    )
    export.add_argument("notebook")
    export.add_argument(
        "--to", choices=("cells", "script"), default="cells",
        help="a notebook of plain cells (default) or a Python script in the percent format",
    )  # fmt: skip
    export.add_argument(
        "-o", "--output", help="where to write (default: NAME.exported.ipynb or NAME.py)"
    )
    export.set_defaults(func=_export)
    kernel = sub.add_parser("install-kernel", help='install the "Python 3 (qloop)" kernel spec')
    kernel.add_argument("--user", action="store_true", help="install for this user only")
    kernel.add_argument("--prefix", help="install under this prefix (e.g. sys.prefix of a venv)")
    kernel.add_argument("--name", default="qloop")
    kernel.set_defaults(func=_install_kernel)
    add_eval_parser(sub)
    _mcp_parser(sub)
    add_team_parsers(sub)
    return main


def _run_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run", help="execute a notebook headless, saving agent records",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    run.add_argument("notebook")
    run.add_argument("-o", "--output", help="where to write (default: NAME.executed.ipynb)")
    run.add_argument("--approve", choices=POLICIES, help="approval policy (default: readonly)")
    run.add_argument(
        "--replay-received",
        action="store_true",
        help="replay saved agent steps that were not written by your kernel (a notebook you "
        "received), under the approval policy; read them first with `qloop show`",
    )
    run.add_argument(
        "--continue-on-denied",
        action="store_true",
        help="go on when a saved agent step is denied or blocked (by default the run stops there: "
        "later cells would run on state the replay never produced)",
    )
    run.add_argument("--timeout", type=float, default=600, help="seconds per cell (default 600)")
    run.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    run.set_defaults(func=_run)


def _mcp_parser(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve the live notebooks to a stdio MCP client (Claude Code, Cursor, VS Code)",
        description="A stdio MCP server that forwards to the qloop MCP endpoint of a running "
        "Jupyter server ({URL}qloop/mcp), with the Jupyter server's token. Only this machine is "
        "reached unless --allow-remote is given with an https URL. Exit codes: 0 when the client "
        "closes stdin, 2 for a mistake on the command line.",
    )
    mcp.add_argument(
        "--url",
        help="the Jupyter server's URL, e.g. http://127.0.0.1:8888/ (default: QLOOP_JUPYTER_URL, "
        "else the one running Jupyter server)",
    )
    mcp.add_argument(
        "--token",
        help="the Jupyter server's token (default: a ?token= in --url, else JUPYTER_TOKEN, else "
        "the token of the running server at the URL)",
    )
    mcp.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a Jupyter server on another machine (https URLs only)",
    )
    mcp.set_defaults(func=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        raise CliError("the MCP bridge needs the mcp package: pip install 'qloop-kernel[mcp]'")
    from ..server.stdio import BridgeError, run

    try:
        return run(args.url, args.token, allow_remote=args.allow_remote, environ=os.environ)
    except BridgeError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("qloop-kernel")
    except PackageNotFoundError:
        return "unknown (not installed)"


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line's arguments; :class:`CommandLineError` for a mistake, unknown options
    included (with the close match among the options of their command)."""
    main = parser()
    args, unknown = main.parse_known_args(argv)
    if unknown:
        command = _command_parser(main, args)
        near = _nearest(unknown[0], _options(command)) if unknown[0].startswith("-") else None
        offer = f" (did you mean {near}?)" if near else ""
        raise CommandLineError(command.prog, f"unrecognized arguments: {' '.join(unknown)}{offer}")
    return args


# argparse keeps a parser's arguments and subcommands in private attributes, read on purpose: the
# parser of the (sub)command given, and its options, for "did you mean".
def _command_parser(
    main: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the innermost subcommand ``args`` name (``qloop run``), else ``main``."""
    command = main
    while True:
        found = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, found[0].dest, None) if found else None
        if not found or name not in found[0].choices:
            return command
        command = found[0].choices[name]


def _options(command: argparse.ArgumentParser) -> list[str]:
    """Every option string ``command`` takes (``--approve``, ``-o``, ...)."""
    return [name for action in command._actions for name in action.option_strings]


def main(argv: list[str] | None = None) -> int:
    """The ``qloop`` command; returns its exit code (a mistake: one line on stderr)."""
    try:
        args = parse(argv)
    except CommandLineError as exc:
        _say(f"{exc.prog}: {exc}; see `{exc.prog} --help`", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except CliError as exc:
        _say(f"qloop {args.command}: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
