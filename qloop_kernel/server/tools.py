"""The MCP tools outside agents see: the open notebooks, their variables and cells, and run_code.

Read tools answer from the kernel (``list_variables``, ``inspect_variable``) or the saved notebook
(``read_notebook``) without running user code. ``run_code`` goes through :class:`~.gate.Gate`:
policy, grant, or the approval card in the notebook's page, naming the client. Every call that
could change anything is recorded in the notebook (:mod:`.record`), whatever was decided.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations

from ..notebook_view import notebook_view, render
from ..policy.risk import Assessment, Reason, classify
from ..redact import redact_text, redacted_truncate
from ..telemetry import OutsideCall, trace_outside
from . import record
from .acp_agents import CLIENT_HEADER
from .broker import OutsideBroker, notebook_key
from .config import QloopMCP
from .gate import Gate, Step, Verdict
from .kernels import PROBE, Kernels, OutsideError, RunResult
from .notebook_file import apply_change, maybe_await

INSTRUCTIONS = (
    "Live Jupyter notebooks of this user, through qloop. list_notebooks names the open notebooks "
    "and their kernels; list_variables, inspect_variable and read_notebook read without running "
    "anything. run_code runs Python in a notebook's kernel, in the user's namespace: unless the "
    "user's policy allows it, the user approves each call on a card in the notebook's page (the "
    "call waits for the click) and may deny it with a reason or edit the code; the result says "
    "what was decided and what really ran. The user's data stays in the kernel: inspect it, do "
    "not print whole tables."
)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def client_name(ctx: Context[Any, Any]) -> str:
    """The name the outside client announced itself with (shown on the card, unverified): the
    ``X-Qloop-Client`` header qloop hands a hosted agent ("ACP agent <name>"), else its MCP name."""
    headers = getattr(ctx.request_context.request, "headers", None)
    given = str((headers.get(CLIENT_HEADER) if headers is not None else None) or "").strip()
    if given:
        return given[:80]
    params = ctx.session.client_params
    info = getattr(params, "client_info", None)
    name = str(getattr(info, "name", "") or "").strip()
    return name[:80] or "an MCP client"


def mcp_session(ctx: Context[Any, Any]) -> str | None:
    """The id of the MCP session the server issued this client at its ``initialize``; None for a
    request outside any session. The SDK routes each request by this header to the transport of
    that session, which refuses any other id, so it is never a name the client made up."""
    headers = getattr(ctx.request_context.request, "headers", None)
    found = headers.get(MCP_SESSION_ID_HEADER) if headers is not None else None
    return str(found) if found else None


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


class OutsideTools:
    """The tools, over the Jupyter server's kernels, contents and the outside broker."""

    def __init__(self, serverapp: Any, config: QloopMCP, broker: OutsideBroker) -> None:
        self.serverapp = serverapp
        self.config = config
        self.broker = broker
        self.kernels = Kernels(serverapp)
        self.gate = Gate(broker, lambda: self.config.policy, self._write_file)

    async def _write_file(self, step: Step) -> dict[str, Any]:
        """A cell change applied to the saved notebook (no page shows it)."""
        contents = self.serverapp.contents_manager
        return await apply_change(contents, step.path, step.cell or {}, step.code, step.client)

    async def list_notebooks(self) -> CallToolResult:
        rows = []
        for session in await self.kernels.sessions():
            kernel = session.get("kernel") or {}
            path = notebook_key(str(session.get("path", "")))
            rows.append(
                {
                    "path": path,
                    "kernel_id": kernel.get("id"),
                    "kernel_name": kernel.get("name"),
                    "execution_state": kernel.get("execution_state"),
                    "shown_in_a_page": self.broker.shown(path),
                }
            )
        if not rows:
            return _text("No notebook has a running kernel: the user opens one in JupyterLab.")
        return _text(json.dumps({"notebooks": rows}, indent=1))

    async def list_variables(self, path: str) -> CallToolResult:
        kernel_id = await self.kernels.kernel_for(path)
        answer = await self.kernels.evaluate(kernel_id, f"{PROBE}.variables(get_ipython())")
        return _text(str(answer["text"]))

    async def inspect_variable(
        self, path: str, name: str, columns: list[str] | None, offset: int, rows: int | None
    ) -> CallToolResult:
        kernel_id = await self.kernels.kernel_for(path)
        call = f"{PROBE}.inspect(get_ipython(), {name!r}, {columns!r}, {int(offset)!r}, {rows!r})"
        answer = await self.kernels.evaluate(kernel_id, call)
        if not answer.get("ok"):
            return _error(str(answer.get("error")))
        return _text(str(answer["text"]))

    async def read_notebook(self, path: str, cell_ids: list[str] | None) -> CallToolResult:
        key = notebook_key(path)
        try:
            model = await maybe_await(self.serverapp.contents_manager.get(key, content=True))
        except Exception as exc:  # tornado's HTTPError for a missing file, or an unreadable one
            return _error(f"cannot read {key!r}: {getattr(exc, 'log_message', None) or exc}")
        if model.get("type") != "notebook":
            return _error(f"{key!r} is not a notebook")
        cells = (model.get("content") or {}).get("cells") or []
        view = notebook_view(cells, cell_ids, path=key)
        head = f"{key} as last saved ({model.get('last_modified')}):\n"
        return _text(redact_text(head + render(view)))

    def _caller(self, ctx: Context[Any, Any]) -> tuple[str, str | None]:
        """Who calls: the name to show (the one the user confirmed for its session, else the one
        it announced), and the MCP session the server issued it."""
        session = mcp_session(ctx)
        return self.broker.confirmed(session) or client_name(ctx), session

    async def run_code(self, path: str, code: str, ctx: Context[Any, Any]) -> CallToolResult:
        client, session = self._caller(ctx)
        kernel_id = await self.kernels.kernel_for(path)
        source, names = await self.kernels.prepared(kernel_id, code)
        assessment = classify(source, names)
        step = Step(client, notebook_key(path), "run_code", code, assessment, session=session)

        async def progress(waited: float, message: str) -> None:
            await ctx.report_progress(waited, None, message)

        verdict = await self.gate.decide(step, progress)
        if not verdict.run:
            self._record(step, verdict, None)
            return _error(verdict.message)
        request_id = uuid.uuid4().hex
        try:
            if verdict.approval_id is not None:
                self.broker.running(
                    verdict.approval_id, lambda: self.kernels.stop(kernel_id, request_id)
                )
            ran = await self.kernels.run(
                kernel_id, verdict.code, self.config.call_timeout_s, step.client, request_id
            )
        finally:
            if verdict.approval_id is not None:
                self.broker.drop(verdict.approval_id)
        result = self._result(step, verdict, ran)
        self._record(step, verdict, ran)
        return result

    async def change_cell(
        self, path: str, source: str, cell: dict[str, Any], ctx: Context[Any, Any]
    ) -> CallToolResult:
        """Propose a cell change (``cell["op"]``: add, edit) that the notebook's page applies once
        the user accepts it (or the policy or a grant allows it)."""
        key = notebook_key(path)
        tool = f"{cell['op']}_cell"
        stop = None
        if cell["op"] == "add":
            where = (
                f"after cell {cell['after_cell_id']}" if cell.get("after_cell_id") else "at the end"
            )
            what = f"adds a {cell['cell_type']} cell {where}"
            assessment = Assessment("write", (Reason(1, "write", what),), frozenset())
        elif cell["op"] == "edit":
            what = f"replaces the source of cell {cell['cell_id']}"
            assessment = Assessment("write", (Reason(1, "write", what),), frozenset())
        else:  # run: the page runs the cell's source as it is then; the card shows it
            kernel_id = await self.kernels.kernel_for(key)
            what = f"runs cell {cell['cell_id']} as it is when approved (its source is shown)"
            assessment = Assessment("unknown", (Reason(1, "unknown", what),), None)
            stop = lambda: _later(self.kernels.interrupt(kernel_id))  # noqa: E731
        client, session = self._caller(ctx)
        step = Step(client, key, tool, source, assessment, cell, stop, session)

        async def progress(waited: float, message: str) -> None:
            await ctx.report_progress(waited, None, message)

        verdict = await self.gate.decide(step, progress)
        applied = verdict.applied or {}
        failed = verdict.run and not isinstance(applied.get("cell_id"), str)
        if failed:
            error = applied.get("error") or "the page did not apply it"
            verdict = replace(verdict, run=False, message=f"not applied: {error}")
        if cell["op"] == "run" and verdict.run:
            verdict = replace(verdict, code=str(applied.get("source", "")))
        self._record(step, verdict, None, applied=applied if verdict.run else None)
        if not verdict.run:
            return _error(verdict.message)
        if cell["op"] == "run":
            return self._ran_cell(verdict, applied)
        return _text(self._cell_summary(step, verdict, str(applied["cell_id"])))

    def _ran_cell(self, verdict: Verdict, applied: dict[str, Any]) -> CallToolResult:
        """What running a cell did: its source as it ran, its outputs (bounded), its status."""
        lines = [f"{verdict.how}: ran cell {applied['cell_id']} in the page.", "Its source:"]
        lines.append(f"```python\n{applied.get('source', '')}\n```")
        if verdict.reason:
            lines.append(f"The user's note: {verdict.reason}")
        output = redacted_truncate(str(applied.get("outputs") or ""), self.config.result_chars)
        lines.append(f"Output:\n{output}" if output.strip() else "It printed nothing.")
        failed = applied.get("status") == "error"
        if failed:
            lines.append("It raised an error.")
        return CallToolResult(
            content=[TextContent(type="text", text=redact_text("\n".join(lines)))], is_error=failed
        )

    def _cell_summary(self, step: Step, verdict: Verdict, cell_id: str) -> str:
        done = "added as cell" if (step.cell or {}).get("op") == "add" else "applied to cell"
        lines = [f"{verdict.how}: {done} {cell_id}."]
        if verdict.reason:
            lines.append(f"The user's note: {verdict.reason}")
        if verdict.code != step.code:
            lines.append(f"The user edited it; the cell's source now:\n```\n{verdict.code}\n```")
        return redact_text("\n".join(lines))

    def _summary(self, step: Step, verdict: Verdict, ran: RunResult) -> str:
        lines = [f"{verdict.how} (class '{step.assessment.risk}')."]
        if verdict.reason:
            lines.append(f"The user's note: {verdict.reason}")
        if verdict.code != step.code:
            lines.append(f"The user edited the code; what ran:\n```python\n{verdict.code}\n```")
        if ran.status == "timeout":
            lines.append("It was interrupted after the time limit.")
        elif ran.status == "gone":
            lines.append("Its kernel died or was restarted while it ran: the namespace is gone.")
        elif ran.status == "refused":
            lines.append("The kernel's session refused it; the output says why.")
        elif ran.status != "ok":
            lines.append("It raised an error (interrupted by the user, if a KeyboardInterrupt).")
        output = redacted_truncate(ran.text(), self.config.result_chars)
        lines.append(f"Output:\n{output}" if output.strip() else "It printed nothing.")
        return redact_text("\n".join(lines))

    def _result(self, step: Step, verdict: Verdict, ran: RunResult) -> CallToolResult:
        content: list[ContentBlock] = [
            TextContent(type="text", text=self._summary(step, verdict, ran))
        ]
        for mime, data in ran.images[:4]:
            content.append(ImageContent(type="image", data=data, mime_type=mime))
        return CallToolResult(content=content, is_error=ran.status != "ok")

    def _record(
        self,
        step: Step,
        verdict: Verdict,
        ran: RunResult | None,
        applied: dict[str, Any] | None = None,
    ) -> None:
        given: dict[str, Any] = {"code": redact_text(step.code)}
        if step.cell is not None:
            given = {"source": redact_text(step.code), **step.cell}
        if applied is not None:
            ran_text: str | None = redact_text(verdict.code)
        else:
            ran_text = redact_text(verdict.code) if ran is not None else None
        entry = record.entry(
            client=step.client,
            tool=step.tool,
            input=given,
            decision=verdict.how,
            reason=redact_text(verdict.reason or verdict.message),
            ran=ran_text,
            risk=step.assessment.risk,
            result=redact_text(ran.text()) if ran is not None else _applied_text(applied),
            is_error=ran_text is None or (ran is not None and ran.status != "ok"),
            ran_redacted=ran_text is not None and ran_text != verdict.code,
        )
        self.broker.add_record(step.path, entry)
        call = OutsideCall(entry, step.path, step.session, verdict.kind, verdict.by, step.started)
        trace_outside(call)


def _applied_text(applied: dict[str, Any] | None) -> str:
    if not applied or "cell_id" not in applied:
        return ""
    outputs = applied.get("outputs")
    return f"cell {applied['cell_id']}" + (f"\n{outputs}" if isinstance(outputs, str) else "")


def _later(work: Any) -> None:
    asyncio.ensure_future(work)


def build_server(tools: OutsideTools) -> MCPServer:
    """The MCP server with the outside tools; errors of :class:`OutsideError` reach the client."""
    server: MCPServer = MCPServer("qloop", instructions=INSTRUCTIONS)
    _read_tools(server, tools)
    _change_tools(server, tools)
    return server


async def guarded(work: Any) -> CallToolResult:
    """The tool's result, or an ``is_error`` result saying why it could not be served."""
    try:
        result: CallToolResult = await work
    except OutsideError as exc:
        return _error(str(exc))
    return result


def _read_tools(server: MCPServer, tools: OutsideTools) -> None:
    @server.tool(annotations=READ, structured_output=False)
    async def list_notebooks() -> CallToolResult:
        """The notebooks with a running kernel: path, kernel, its state, and whether a page shows it
        (a page is needed to approve run_code)."""
        return await guarded(tools.list_notebooks())

    @server.tool(annotations=READ, structured_output=False)
    async def list_variables(path: str) -> CallToolResult:
        """The user's variables in the kernel of the notebook at ``path`` (server-relative, as
        list_notebooks gives it): name, type, shape, memory. Runs no user code."""
        return await guarded(tools.list_variables(path))

    @server.tool(annotations=READ, structured_output=False)
    async def inspect_variable(
        path: str,
        name: str,
        columns: list[str] | None = None,
        offset: int = 0,
        rows: int | None = None,
    ) -> CallToolResult:
        """A type-aware summary of one variable (or attribute path such as ``model.coef_``) in the
        notebook's kernel: for frames their shape, dtypes, some rows from ``offset`` and column
        statistics; lazy, distributed and GPU data described from metadata."""
        return await guarded(tools.inspect_variable(path, name, columns, offset, rows))

    @server.tool(annotations=READ, structured_output=False)
    async def read_notebook(path: str, cell_ids: list[str] | None = None) -> CallToolResult:
        """The notebook's cells as last saved, in order: id, type, execution count, bounded source
        and outputs. ``cell_ids`` picks some."""
        return await guarded(tools.read_notebook(path, cell_ids))


def _change_tools(server: MCPServer, tools: OutsideTools) -> None:
    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=True
        ),
        structured_output=False,
    )
    async def run_code(path: str, code: str, ctx: Context[Any, Any]) -> CallToolResult:
        """Run Python ``code`` in the kernel of the notebook at ``path``, in the user's namespace.
        Unless the user's policy allows it, the user approves the call on a card in the notebook
        (the call waits); the result says what was decided, what ran and its output."""
        return await guarded(tools.run_code(path, code, ctx))

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
        structured_output=False,
    )
    async def add_cell(
        path: str,
        source: str,
        ctx: Context[Any, Any],
        cell_type: Literal["code", "markdown"] = "code",
        after_cell_id: str | None = None,
    ) -> CallToolResult:
        """Propose a new cell in the notebook at ``path``, after the cell ``after_cell_id`` (ids
        from read_notebook; none: at the end). The user accepts it (possibly edited) or rejects it
        in the notebook's page; nothing runs. The result gives the new cell's id."""
        cell = {"op": "add", "cell_type": cell_type, "after_cell_id": after_cell_id}
        return await guarded(tools.change_cell(path, source, cell, ctx))

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
        structured_output=False,
    )
    async def edit_cell(
        path: str, cell_id: str, source: str, ctx: Context[Any, Any]
    ) -> CallToolResult:
        """Propose new source for the cell ``cell_id`` of the notebook at ``path``; the user
        accepts it (possibly edited) or rejects it in the notebook's page. Nothing runs."""
        cell = {"op": "edit", "cell_id": cell_id}
        return await guarded(tools.change_cell(path, source, cell, ctx))

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
        structured_output=False,
    )
    async def run_cell(path: str, cell_id: str, ctx: Context[Any, Any]) -> CallToolResult:
        """Run the cell ``cell_id`` of the notebook at ``path`` as it is in the notebook, in its
        page: its outputs land in that cell, and the result gives them. The user approves it on a
        card showing the cell's source (unless the policy allows it); a page must show the
        notebook."""
        cell = {"op": "run", "cell_id": cell_id}
        return await guarded(tools.change_cell(path, "", cell, ctx))
