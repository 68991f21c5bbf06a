"""Run the Messages API stand-in in the foreground.

    python -m qloop_kernel.testing [--port 8765] [--script FILE.json] [--api-key KEY]
                                   [--model ID ...] [-v]

The first line on stdout is the base URL (``http://127.0.0.1:PORT``), printed once the server
listens. The server runs until SIGTERM or SIGINT. Control endpoints: ``POST /_qloop/script``,
``POST /_qloop/reset``, ``GET /_qloop/requests``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from .jsonform import load_script
from .models import DOCUMENTED_MODELS
from .script import ScriptError
from .server import StandInAPI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m qloop_kernel.testing",
        description="Loopback stand-in for the Anthropic Messages API, answering from a script.",
    )
    parser.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--script", metavar="FILE", help="JSON script of replies and faults")
    parser.add_argument("--api-key", help="require this key (x-api-key or Authorization: Bearer)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID",
        help="also serve this model id (besides the documented ones); repeatable",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each request to stderr")
    return parser


def _port(value: str) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535)")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; return the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(message)s",
        stream=sys.stderr,
    )
    try:
        script = load_script(args.script) if args.script else []
    except (OSError, ScriptError) as error:
        print(f"qloop stand-in: cannot load the script: {error}", file=sys.stderr)
        return 2
    stop = _termination_event()
    models = [*DOCUMENTED_MODELS, *args.model]
    server = StandInAPI(script, api_key=args.api_key, port=args.port, models=models)
    try:
        server.start()
    except OSError as error:
        print(f"qloop stand-in: cannot listen on port {args.port}: {error}", file=sys.stderr)
        return 2
    try:
        print(server.base_url, flush=True)
        stop.wait()
    finally:
        server.stop()
    return 0


def _termination_event() -> threading.Event:
    """Return an event set by SIGTERM or SIGINT (installed before the URL is announced)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


if __name__ == "__main__":
    sys.exit(main())
