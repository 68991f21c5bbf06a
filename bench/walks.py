"""Walks: the package modules a value passes through, and how often its path climbs the layers.

Two walks, in one in-process IPython shell with qloop's extension loaded and the stand-in (its own
process) serving a scripted turn of two ``run_code`` steps and an answer:

- ``run_turn:settings``: an agent turn (``KernelAgent.run_turn``, headless, ``--approve auto``); the
  modules whose functions receive a ``Settings`` object as an argument while the turn runs;
- ``replay:record``: the replay of that turn's saved record (``KernelAgent.run_cell`` with the record
  as the cell's saved metadata); the modules whose functions receive a ``CellRecord`` as an argument,
  from the record's load to the end of the replay.

A function "receives" the value when one of its parameters other than ``self``/``cls`` is it (the
record's own methods are the record's module). Calls are seen with ``sys.setprofile`` and
``threading.setprofile`` (the turn's model calls run on a worker thread). A climb is a call that
passes the value from a module of a lower layer to one of a higher layer, counted once per
(caller module, called function); layers: the top-level core modules < ``policy``, ``values``,
``tools``, ``records``, ``mcp`` < ``notebook`` < ``headless``, ``server``, ``eval``.
Targets: ``replay:record`` <= 6 modules, ``run_turn:settings`` <= 4.
Run: ``python bench/walks.py``.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.loop_overhead import stand_in  # noqa: E402
from qloop_kernel.records import MIME_TYPE, CellRecord  # noqa: E402
from qloop_kernel.settings import Settings  # noqa: E402
from qloop_kernel.testing import Reply, items_to_json, text, tool_use  # noqa: E402

PACKAGE = "qloop_kernel"
LAYERS = {"policy": 1, "values": 1, "tools": 1, "records": 1, "mcp": 1, "notebook": 2,
          "headless": 3, "server": 3, "eval": 3}  # fmt: skip
TARGETS = {"replay:record": 6, "run_turn:settings": 4}
PROMPT = "Make a frame and sum it."
MODEL = "claude-sonnet-4-6"
SCRIPT = [
    Reply([text("Making it."), tool_use("run_code", {"code": "import pandas as pd\n"
                                                             "df = pd.DataFrame({'a': range(5)})"})]),
    Reply([text("Summing it."), tool_use("run_code", {"code": "total = int(df['a'].sum())"})]),
    Reply([text("The total is 10.")]),
]  # fmt: skip


def load(base_url: str) -> None:
    """The stand-in's script: the turn's replies, from the start."""
    body = json.dumps(items_to_json(SCRIPT)).encode()
    for path in ("/_qloop/reset", "/_qloop/script"):
        request = urllib.request.Request(base_url + path, data=body, method="POST")
        urllib.request.urlopen(request, timeout=10).read()


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 2 else 0


@dataclass
class Walk:
    """The package modules whose functions received a value of ``kind``, and the climbs."""

    kind: type
    modules: set[str] = field(default_factory=set)
    climbs: set[tuple[str, str]] = field(default_factory=set)

    def seen(self, frame: FrameType) -> None:
        module = str(frame.f_globals.get("__name__", ""))
        if not module.startswith(PACKAGE + ".") or not self._receives(frame):
            return
        self.modules.add(module)
        caller = frame.f_back
        above = str(caller.f_globals.get("__name__", "")) if caller is not None else ""
        if above.startswith(PACKAGE + ".") and layer(above) < layer(module):
            self.climbs.add((above, f"{module}.{frame.f_code.co_name}"))

    def _receives(self, frame: FrameType) -> bool:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        names = [n for n in code.co_varnames[:count] if n not in ("self", "cls")]
        values = frame.f_locals
        return any(isinstance(values.get(n), self.kind) for n in names)


@contextmanager
def walking(walk: Walk) -> Iterator[None]:
    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            walk.seen(frame)

    sys.setprofile(profile)
    threading.setprofile(profile)  # type: ignore[arg-type]
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def run(base_url: str) -> dict[str, Walk]:
    """The two walks: a turn, then the replay of its saved record."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from qloop_kernel.notebook.agent import CellOptions, KernelAgent
    from qloop_kernel.notebook.cell import CellContext
    from qloop_kernel.notebook.session import session_for

    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension(PACKAGE)
    settings = Settings(model=MODEL, approve="auto")
    agent = KernelAgent(session_for(shell), settings)
    cell = CellContext("walk", None, headless=True)
    load(base_url)
    turn = Walk(Settings)
    with capture_output(display=True) as shown, walking(turn):
        agent.run_turn(PROMPT, settings, cell)
    # the record as the cell's metadata keeps it: the last one the turn showed, sealed
    saved = [o.data[MIME_TYPE] for o in shown.outputs if MIME_TYPE in o.data][-1]
    replayed = Walk(CellRecord)
    replay = CellContext("walk", saved, headless=True)
    with capture_output(display=True) as out, walking(replayed):
        agent._run_cell(PROMPT, CellOptions(settings), replay)  # the cell's replay, as the magic's
    shown = out.stdout + "".join(str(o.data) for o in out.outputs)
    assert "replay complete" in shown and shell.user_ns.get("total") == 10, shown
    return {"replay:record": replayed, "run_turn:settings": turn}


def report(walks: dict[str, Walk], emit: Callable[[str], None] = print) -> bool:
    met = True
    for name, walk in walks.items():
        target = TARGETS[name]
        ok = len(walk.modules) <= target
        met = met and ok
        emit(f"{name}: {len(walk.modules)} modules (target <= {target}: {'met' if ok else 'missed'}), "
             f"{len(walk.climbs)} climbs")  # fmt: skip
        for module in sorted(walk.modules, key=lambda m: (layer(m), m)):
            emit(f"  {module}")
        for caller, called in sorted(walk.climbs):
            emit(f"  climb: {caller} -> {called}")
    return met


def main() -> int:
    with stand_in() as base_url:
        walks = run(base_url)
    return 0 if report(walks) else 1


if __name__ == "__main__":
    sys.exit(main())
