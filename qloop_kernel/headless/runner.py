"""The headless runner: executes a notebook like JupyterLab does for the kernel.

Each execute request carries the cell's metadata plus ``cellId`` (so saved records arrive with the re-run)
and ``qloopHeadless`` (nobody can click: never block, apply the approval policy). After each cell the
record is copied from the output mirror into ``cell.metadata["qloop"]`` (``records.history.merged``:
an earlier record is never dropped). ``SendsCellMetadata`` does this for any nbclient: ``qloop run``,
the papermill engine and the nbconvert preprocessor use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from nbclient import NotebookClient
from nbclient.util import ensure_async, run_sync

from ..notebook_view import (
    CELL_RUN_MIME,
    CELLS_KEY,
    NOTEBOOK_VIEW_KEY,
    PROVENANCE_KEY,
    notebook_view,
    proposed_cell_id,
    provenance,
)
from ..policy.permissions import POLICY_DENIAL_PREFIX
from ..records import METADATA_KEY, RecordError, load_record, mirrored_record
from ..records.history import merged
from ..records.text import usage_line
from ..redact import redact_text
from ..text import clip, counted

if TYPE_CHECKING:
    from jupyter_client.client import KernelClient
    from jupyter_client.manager import KernelManager
    from nbformat import NotebookNode


class SendsCellMetadata:
    """For an nbclient subclass: send each cell's metadata and id, keep its record in metadata.

    Call ``send_cell_metadata()`` at the end of ``__init__``.
    """

    nb: Any
    kc: Any
    progress: TextIO | None = None
    _metadata: dict[str, Any]
    _saved_digest: str | None = None
    _last_step: str | None = None
    cell_index: int | None = None  # the cell running or last run (None: none has started)
    notebook_path: str = ""  # named in read_notebook's answer

    def send_cell_metadata(self) -> None:
        self._metadata = {}
        self._proposed: list[tuple[str, Any]] = []  # (agent cell id, its new turn's record)
        self._added_runs: dict[str, dict[str, Any]] = {}  # outputs of cells added with run
        self.on_cell_execute = self._before_cell
        self.on_cell_executed = self._after_cell

    async def async_start_new_kernel_client(self) -> KernelClient:
        # A mixin: super() is the nbclient client it is mixed into.
        client: KernelClient = await super().async_start_new_kernel_client()  # type: ignore[misc]
        # Replaced on this client only: its execute requests carry the cell's metadata.
        client.execute = self._execute_with_metadata  # type: ignore[method-assign]
        return client

    # nbclient binds the synchronous form to its own coroutine: papermill and nbconvert call it.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _execute_with_metadata(
        self, code: str, silent: bool = False, store_history: bool = True,
        user_expressions: dict[str, Any] | None = None, allow_stdin: bool | None = None,
        stop_on_error: bool = True,
    ) -> str:  # fmt: skip
        content = {
            "code": code, "silent": silent, "store_history": store_history,
            "user_expressions": user_expressions or {}, "allow_stdin": False,
            "stop_on_error": stop_on_error,
        }  # fmt: skip
        kc = self.kc
        assert kc is not None  # started by async_start_new_kernel_client
        msg = kc.session.msg("execute_request", content, metadata=self._metadata)
        kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def process_message(
        self, msg: dict[str, Any], cell: Any, cell_index: int
    ) -> NotebookNode | None:
        """nbclient's handling of each IOPub message, and an agent cell's steps as they happen."""
        # A mixin: super() is the nbclient client it is mixed into.
        output: NotebookNode | None = super().process_message(msg, cell, cell_index)  # type: ignore[misc]
        if self.progress is not None and is_agent_source(cell.source):
            step = step_line(msg)
            if step is not None and step != self._last_step:
                self._last_step = step
                self.progress.write(f"[{cell_index + 1}/{len(self.nb.cells)}]   {step}\n")
                self.progress.flush()
        return output

    def _before_cell(self, cell: Any, cell_index: int) -> None:
        self.cell_index, self._last_step = cell_index, None
        self._metadata = {**dict(cell.metadata), "cellId": cell.get("id"), "qloopHeadless": True}
        if is_agent_source(cell.source) or shows_context(cell.source):
            # what read_notebook answers: the notebook as it is now (`%agent context` counts
            # the tools an agent cell gets from it)
            view = notebook_view(self.nb.cells, path=self.notebook_path)
            self._metadata[NOTEBOOK_VIEW_KEY] = view
            # what run_cell runs: each cell's type and whole source
            self._metadata[CELLS_KEY] = {
                str(c.get("id")): [c.cell_type, c.source] for c in self.nb.cells if c.get("id")
            }
        saved = cell.metadata.get(METADATA_KEY)
        self._saved_digest = saved.get("digest") if isinstance(saved, dict) else None

    def _after_cell(self, cell: Any, cell_index: int, execute_reply: Any) -> None:
        keep_record(cell)
        self._note_proposals(cell)
        moved = (
            move_cell_runs(self.nb, cell, self._added_runs) if is_agent_source(cell.source) else []
        )
        for line in moved:
            if self.progress is not None:
                self.progress.write(f"qloop run: {redact_text(line)}\n")
        if self.progress is not None:
            line = _progress_line(
                cell, cell_index, len(self.nb.cells), execute_reply, self._saved_digest
            )
            self.progress.write(line)
            self.progress.flush()

    def _note_proposals(self, cell: Any) -> None:
        """Keep a new turn's record for its proposals (a replayed one's were applied before)."""
        saved = cell.metadata.get(METADATA_KEY)
        if not is_agent_source(cell.source) or not isinstance(saved, dict):
            return
        if saved.get("digest") == self._saved_digest:
            return  # the saved record replayed, or kept
        try:
            record = load_record(saved)
        except RecordError:
            return
        if any(c.name in ("add_cell", "edit_cell") for c in record.tool_calls):
            self._proposed.append((str(cell.get("id") or ""), record))

    def apply_proposals(self) -> None:
        """Write the accepted proposals of the turns that ran into the notebook, once every cell
        has run (a cell added now is not run by this run); one progress line each."""
        lines = []
        for agent_cell, record in self._proposed:
            lines += apply_proposals(self.nb, agent_cell, record, self._added_runs)
        lines += [f"run_cell: no code cell {target} for its outputs" for target in self._added_runs]
        for line in lines:
            if self.progress is not None:
                self.progress.write(f"qloop run: {redact_text(line)}\n")
        if self.progress is not None:
            self.progress.flush()
        self._proposed, self._added_runs = [], {}


def move_cell_runs(
    nb: Any, agent: Any, added_runs: dict[str, dict[str, Any]] | None = None
) -> list[str]:
    """Move what the agent cell's run_cell calls produced into the cells that ran (their
    outputs, as a run of the cell gives them); a line each. A cell after the agent cell is run
    again by this run, in its turn, as any cell is. The outputs of a cell the turn added (with
    add_cell's run) wait in ``added_runs`` until ``apply_proposals`` adds the cell."""
    kept, done = [], []
    for output in agent.get("outputs", []):
        shown = (output.get("data") or {}).get(CELL_RUN_MIME)
        if not isinstance(shown, dict):
            kept.append(output)
            continue
        target = str(shown.get("target", ""))
        where = _index_of(nb, target)
        if where is None and added_runs is not None:
            added_runs[target] = shown
            continue
        done += _put_outputs(nb, where, target, shown)
    agent["outputs"] = kept
    return done


def _put_outputs(nb: Any, where: int | None, target: str, shown: dict[str, Any]) -> list[str]:
    """Make ``shown``'s outputs those of the cell at ``where``; what was done, in a line."""
    import nbformat

    outputs = shown.get("outputs")
    if where is None or nb.cells[where].cell_type != "code" or not isinstance(outputs, list):
        return [f"run_cell: no code cell {target} for its outputs"]
    try:
        nb.cells[where].outputs = [nbformat.from_dict(o) for o in outputs]
    except Exception as exc:  # a malformed output: the cell keeps what it had
        return [f"run_cell: the outputs of cell {target} are not nbformat ({exc})"]
    nb.cells[where].execution_count = None
    effect = str(shown.get("effect") or "")
    return [f"ran cell {target}" + (f": {effect}" if effect else "")]


def apply_proposals(
    nb: Any, agent_cell: str, record: Any, added_runs: dict[str, dict[str, Any]] | None = None
) -> list[str]:
    """Apply a turn's accepted add_cell and edit_cell calls to ``nb``: what each did, in a line.
    A cell added with run gets its outputs from ``added_runs`` (taken out of it)."""
    done: list[str] = []
    added: list[str] = []
    for call in record.tool_calls:
        if call.name not in ("add_cell", "edit_cell"):
            continue
        if call.decision.kind == "denied":
            why = clip(" ".join(str(call.decision.reason or "denied").split()), 120)
            done.append(f"{call.name} not applied: {why}")
        elif call.name == "add_cell" and (not call.is_error or _added_then_failed(call)):
            done += _add_cell(nb, agent_cell, call, added)
            ran = (added_runs or {}).pop(added[-1], None)
            if ran is not None:
                done += _put_outputs(nb, _index_of(nb, added[-1]), added[-1], ran)
        elif not call.is_error and call.name == "edit_cell":
            done += _edit_cell(nb, agent_cell, call)
    return done


def _added_then_failed(call: Any) -> bool:
    """An add_cell with run whose cell was added, and raised when it ran: it is added, with the
    error in its outputs."""
    return bool(call.input.get("run")) and str(call.output_summary).startswith("accepted: added")


def _index_of(nb: Any, cell_id: str) -> int | None:
    return next((i for i, c in enumerate(nb.cells) if c.get("id") == cell_id), None)


def _add_cell(nb: Any, agent_cell: str, call: Any, added: list[str]) -> list[str]:
    import nbformat

    source = str(call.input.get("source", ""))
    cell_id = proposed_cell_id(agent_cell, len(added) + 1, source)
    after = str(call.input.get("after") or (added[-1] if added else agent_cell))
    added.append(cell_id)
    if _index_of(nb, cell_id) is not None:
        return []  # already in the notebook
    where = _index_of(nb, after)
    if where is None:
        return [f"not added: the notebook has no cell {after} to put cell {cell_id} after"]
    markdown = call.input.get("cell_type") == "markdown"
    make: Callable[..., NotebookNode] = (
        nbformat.v4.new_markdown_cell if markdown else nbformat.v4.new_code_cell
    )
    mark = {PROVENANCE_KEY: provenance(agent_cell, call.id, source)}
    nb.cells.insert(where + 1, make(source, id=cell_id, metadata=mark))
    return [f"added cell {cell_id} after {after}"]


def _edit_cell(nb: Any, agent_cell: str, call: Any) -> list[str]:
    source = str(call.input.get("source", ""))
    target = str(call.input.get("cell_id", ""))
    found = _index_of(nb, target)
    if found is None:
        return [f"not changed: the notebook has no cell {target}"]
    if nb.cells[found].source == source:
        return []
    nb.cells[found].source = source
    nb.cells[found].metadata[PROVENANCE_KEY] = provenance(agent_cell, call.id, source)
    return [f"changed cell {target}"]


class AgentNotebookClient(SendsCellMetadata, NotebookClient):
    """An nbclient that sends cell ids and metadata and keeps agent records in cell metadata."""

    def __init__(self, nb: Any, progress: TextIO | None | bool = True, **kwargs: Any) -> None:
        """``progress``: a stream for one line per cell, True for stderr, None/False for none."""
        super().__init__(nb, **kwargs)
        self.progress = sys.stderr if progress is True else (progress or None)
        self.interrupted = False  # Ctrl-C (SIGINT) or SIGTERM while the notebook ran
        self.send_cell_metadata()
        self.on_notebook_start = self._note_interrupts

    def _note_interrupts(self, notebook: Any) -> None:
        """On SIGINT or SIGTERM, interrupt the running cell (it ends with KeyboardInterrupt, the
        kernel shuts down cleanly); a second one shuts the kernel down at once, as nbclient does.
        Either way the run reads as interrupted, not as a failed cell or a kernel that died."""
        loop = asyncio.get_event_loop()

        def interrupted() -> None:
            first, self.interrupted = not self.interrupted, True
            stop = self.km.interrupt_kernel() if first and self.km else self._async_cleanup_kernel()
            self._signal_future = asyncio.ensure_future(ensure_async(stop))

        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows, or not main thread
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(number, interrupted)

    async def _async_cleanup_kernel(self) -> None:
        if self.km is not None:  # once: after a signal, nbclient's own exit cleans up again
            await super()._async_cleanup_kernel()

    def create_kernel_manager(self) -> KernelManager:
        """The kernel talks over IPC sockets in the user's runtime directory: nothing on a port."""
        from jupyter_core.paths import jupyter_runtime_dir

        km = super().create_kernel_manager()
        runtime = jupyter_runtime_dir()
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        km.transport = "ipc"
        km.ip = os.path.join(runtime, f"qloop-run-{uuid.uuid4().hex[:12]}-ipc")
        return km


def is_agent_source(source: str) -> bool:
    """An agent cell, or a cell that starts a turn about another cell (``%agent fix``,
    ``explain``, ``edit``)."""
    start = source.lstrip()
    return start.startswith("%%agent") or start.split()[:2] in (
        ["%agent", "fix"],
        ["%agent", "explain"],
        ["%agent", "edit"],
    )


def shows_context(source: str) -> bool:
    """A cell with ``%agent context``: it shows what an agent cell's request would hold."""
    return any(line.split()[:2] == ["%agent", "context"] for line in source.splitlines())


def step_line(msg: dict[str, Any]) -> str | None:
    """The text of an agent cell's one-line note (a model call's status, a tool call, a decision,
    a replay step) in an IOPub message, redacted; None for any other message."""
    kind = msg.get("msg_type")
    data = (msg.get("content") or {}).get("data") or {}
    plain = data.get("text/plain")
    if not isinstance(plain, str) or not plain.strip() or "\n" in plain.strip():
        return None
    if kind == "display_data" and "qloop-line" in str(data.get("text/html", "")):
        return redact_text(plain.strip())  # a note: tool call, decision, replay step
    if kind == "update_display_data" and set(data) == {"text/plain"}:
        return redact_text(plain.strip())  # the turn's status: model calls, tokens, cost
    return None


def denied_note(record: Any) -> str:
    """ ", 2 steps denied (by the approval policy 'readonly')" for a turn with denied steps."""
    denied = [call for call in record.tool_calls if call.decision.kind == "denied"]
    if not denied:
        return ""

    reasons = {str(call.decision.reason or "") for call in denied}
    policies = sorted(
        r.split("'")[1] for r in reasons if r.startswith(POLICY_DENIAL_PREFIX) and "'" in r
    )
    by = f" (by the approval policy '{policies[0]}')" if len(set(policies)) == 1 else ""
    return (
        f", {counted(len(denied), 'step')} denied{by}: what the notebook says may not have happened"
    )


def keep_record(cell: Any) -> None:
    """Copy the record of a cell's output mirror into its metadata; never lose the saved one."""
    kept = merged(cell.metadata.get(METADATA_KEY), mirrored_record(cell))
    if kept is not None:
        cell.metadata[METADATA_KEY] = kept


def _progress_line(
    cell: Any, index: int, total: int, reply: Any, saved_digest: str | None = None
) -> str:
    """One line per cell: its number (from 1, as `qloop show` numbers it), status and first line;
    for an agent cell what its record says — a replay says that no model was called now and
    what the original turn cost."""
    status = (reply or {}).get("content", {}).get("status", "?")
    lines = cell.source.strip().splitlines() or [""]
    agent = lines[0].startswith("%%agent") and len(lines) > 1
    # Redacted before the cut, so that no piece of a secret is left to show.
    first = redact_text(f"%%agent {lines[1]}" if agent else lines[0])[:60]
    line = f"[{index + 1}/{total}] {status:<7} {first}"
    saved = cell.metadata.get(METADATA_KEY)
    if saved is not None and cell.source.lstrip().startswith("%%agent"):
        try:
            record = load_record(saved)
            steps = counted(len(record.replay_steps()), "code step")
            original = f"the original turn: {record.status}, {usage_line(record)}"
            if saved_digest is not None and record.digest == saved_digest and status == "ok":
                line += f"  → replayed {steps}, no model call now ({original})"
            elif saved_digest is not None and record.digest == saved_digest:
                line += f"  → not replayed, the saved record is kept ({original})"
            else:
                line += f"  → agent {record.status}, {steps}, {usage_line(record)}"
                line += denied_note(record)
        except RecordError as exc:
            line += f"  → {exc}"
    return redact_text(line) + "\n"
