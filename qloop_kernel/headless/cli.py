"""``qloop``: run notebooks headless, list their agent cells, install the kernel spec."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from ..permissions import POLICIES
from ..redact import redact_text


def _say(text: str, file: TextIO | None = None) -> None:
    """Print one line, redacted: a notebook's prompts and errors may quote secrets."""
    print(redact_text(text), file=file)


def _run(args: argparse.Namespace) -> int:
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from .runner import AgentNotebookClient

    source = Path(args.notebook)
    out = Path(args.output) if args.output else source.with_suffix(".executed.ipynb")
    nb = nbformat.read(source, as_version=4)
    if args.approve:
        os.environ["QLOOP_APPROVAL"] = args.approve
    if args.replay_received:
        from ..notebook.replay import RECEIVED_OPT_IN

        os.environ[RECEIVED_OPT_IN] = "1"  # the kernel inherits it; a notebook cannot set it
    client = AgentNotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name=args.kernel,
        resources={"metadata": {"path": str(source.parent)}},
    )
    status = 0
    try:
        client.execute()
    except CellExecutionError as exc:
        _say(f"qloop run: a cell failed: {_first_line(exc)}", file=sys.stderr)
        status = 1
    finally:
        nbformat.write(nb, out)
        _say(f"qloop run: wrote {out}", file=sys.stderr)
    return status


def _first_line(exc: BaseException) -> str:
    from ..tools.runtime import strip_ansi

    lines = [line for line in strip_ansi(str(exc)).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _show(args: argparse.Namespace) -> int:
    import nbformat

    from ..records import METADATA_KEY, RecordError, load_record
    from .runner import mirrored_record

    nb = nbformat.read(args.notebook, as_version=4)
    # Cells numbered from 1, as `qloop run` and JupyterLab number them.
    rows = [("cell", "prompt", "status", "steps", "tokens", "cost")]
    for index, cell in enumerate(nb.cells):
        saved = cell.metadata.get(METADATA_KEY) or mirrored_record(cell)
        if saved is None:
            continue
        number = str(index + 1)
        try:
            rec = load_record(saved)
        except RecordError as exc:
            rows.append((number, "", "invalid", "", "", redact_text(str(exc))[:60]))
            continue
        tokens = sum(rec.usage.model_dump().values())
        cost = "" if rec.cost_usd is None else f"${rec.cost_usd:.4f}"
        prompt = redact_text(rec.prompt).replace("\n", " ")  # before the cut: no piece shows
        rows.append(
            (number, prompt[:48], rec.status, str(len(rec.replay_steps())), f"{tokens:,}", cost)
        )
    if len(rows) == 1:
        _say("no agent cells with saved records")
        return 0
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        _say(
            "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def _export(args: argparse.Namespace) -> int:
    import nbformat

    from .export import to_notebook, to_script

    source = Path(args.notebook)
    nb = nbformat.read(source, as_version=4)
    suffix = ".exported.ipynb" if args.to == "cells" else ".py"
    out = Path(args.output) if args.output else source.with_name(source.stem + suffix)
    if args.to == "cells":
        nbformat.write(to_notebook(nb), out)
    else:
        out.write_text(to_script(nb), encoding="utf-8")
    _say(f"qloop export: wrote {out}", file=sys.stderr)
    return 0


def _install_kernel(args: argparse.Namespace) -> int:
    from .kernelspec import install

    where = install(user=args.user, prefix=args.prefix, name=args.name)
    _say(f"installed kernel spec '{args.name}' in {where}")
    return 0


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="qloop", description="qloop-kernel notebook agent tools")
    sub = main.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a notebook headless, saving agent records")
    run.add_argument("notebook")
    run.add_argument("-o", "--output", help="where to write (default: NAME.executed.ipynb)")
    run.add_argument("--approve", choices=POLICIES, help="approval policy (default: readonly)")
    run.add_argument(
        "--replay-received",
        action="store_true",
        help="replay saved agent steps that were not written by your kernel (a notebook you received); "
        "read them first with `qloop show`",
    )
    run.add_argument("--timeout", type=float, default=600, help="seconds per cell (default 600)")
    run.add_argument("--kernel", default="python3", help="kernel name (default python3)")
    run.set_defaults(func=_run)
    show = sub.add_parser("show", help="list the agent cells of a notebook")
    show.add_argument("notebook")
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
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
