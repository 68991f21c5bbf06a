"""Starts a stdio MCP server that ends with the kernel: ``python launch.py PID COMMAND [ARGS...]``
(run as a script, standard library only).

On Linux the server process is asked (``PR_SET_PDEATHSIG``, kept across ``exec``) to be killed
when the process that started it dies, so a kernel that crashes or is killed on restart leaves no
server behind; if the kernel ``PID`` is already gone, nothing starts. Elsewhere it only execs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main(argv: list[str]) -> None:
    """Exec ``argv[1:]`` after arranging to die with process ``argv[0]``."""
    if len(argv) < 2:
        sys.exit("usage: python launch.py PID COMMAND [ARGS...]")
    _die_with_parent()
    if os.getppid() != int(argv[0]):  # the starter died before the request took effect
        sys.exit(1)
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as exc:
        sys.exit(f"cannot start {argv[1]!r}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
