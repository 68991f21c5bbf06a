"""The command line's files: a notebook read and checked before anything runs, an output path
checked before anything is written, and outputs written whole or not at all."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import QloopError

if TYPE_CHECKING:
    from nbformat import NotebookNode

# The exit codes of `qloop` (docs/clients.md, `qloop --help`).
EXIT_OK = 0
EXIT_FAILED = (
    1  # a cell failed, a saved step was not replayed, or `qloop show` found an invalid record
)
EXIT_USAGE = 2  # a mistake on the command line or in an input file: nothing was written
EXIT_KERNEL = 3  # the kernel did not start or died
EXIT_INTERRUPTED = 130  # Ctrl-C


class CliError(QloopError):
    """A mistake the user can fix: one line saying what and how, and the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def read_notebook(path: str | Path) -> NotebookNode:
    """The notebook at ``path``, validated; a :class:`CliError` naming the mistake otherwise."""
    import nbformat

    source = Path(path)
    if not source.exists():
        raise CliError(f"{source}: no such file; check the path (a notebook is a .ipynb file)")
    if source.is_dir():
        raise CliError(
            f"{source} is a folder, not a notebook; give the path of a .ipynb file in it"
        )
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{source} cannot be read as a notebook ({_reason(exc)})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{source} is not a notebook: not JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}); give a .ipynb file saved by Jupyter"
        ) from None
    shape = _shape_mistake(data)
    if shape is not None:
        raise CliError(
            f"{source} is not a Jupyter notebook: {shape}; give a .ipynb file saved by Jupyter"
        )
    try:
        nb: NotebookNode = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises what the JSON's shape makes it raise
        raise CliError(
            f"{source} is not a valid Jupyter notebook ({_reason(exc)}); open and save it in "
            "Jupyter, or give another file"
        ) from None
    return nb


def check_output(path: str | Path, flag: str = "-o") -> Path:
    """``path`` as a file that can be written, checked before anything runs."""
    out = Path(path)
    folder = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise CliError(f"{flag} {out} is a folder; give a file name (e.g. {out / 'out.ipynb'})")
    if not folder.is_dir():
        raise CliError(
            f"{flag} {out}: the folder {folder} does not exist; create it first or choose another path"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(f"{flag} {out}: the folder {folder} is not writable; choose another path")
    return out


def write_atomic(out: Path, write: Callable[[TextIO], object]) -> None:
    """Write ``out`` through a temporary file in its folder moved into place: an interrupted or
    failed write leaves the earlier file as it was."""
    fd, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            write(handle)
        os.chmod(temporary, _mode_for(out))
        os.replace(temporary, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_notebook(nb: Any, out: Path) -> None:
    import nbformat

    write_atomic(out, lambda handle: nbformat.write(nb, handle))


def _mode_for(out: Path) -> int:
    """The existing file's permissions, else what the umask gives a new file."""
    try:
        return stat.S_IMODE(out.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _shape_mistake(data: object) -> str | None:
    """What is missing from a notebook's top level (nbformat's own errors say it less plainly)."""
    if not isinstance(data, dict):
        return f"its JSON is {type(data).__name__}, not an object with cells"
    if not isinstance(data.get("nbformat"), int):
        return "it has no 'nbformat' version number"
    if not isinstance(data.get("cells", []), list):
        return "its 'cells' is not a list"
    return None


def _reason(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
