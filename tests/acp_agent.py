"""A scripted ACP agent on the official SDK, for the tests: no model, no network.

Each prompt's first word picks what it does, and it reports every answer it got back as agent
message text, so a test reads the whole outcome from the chat:

- ``write PATH TEXT``: asks permission for a file write, then writes the file (``fs/write_text_file``)
- ``read PATH``: reads a file (``fs/read_text_file``)
- ``run COMMAND...``: runs a terminal command (``terminal/create``, waits, reads its output)
- ``edit NOTEBOOK CELL_ID SOURCE``: proposes a cell edit through the MCP server handed at
  ``session/new`` (qloop's ``edit_cell``) and says what came back
- ``pid``: says its process id; ``session``: the session it serves, and whether it loaded it
  (``session/load`` is offered when the environment sets ``SCRIPTED_AGENT_LOADS``)
- ``slow``: streams a chunk, then waits until cancelled
- ``die``: streams a chunk and exits mid-turn
- anything else: a plan of two steps, then the text echoed back
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import acp
from acp import schema

MODES = [
    schema.SessionMode(id="default", name="Ask first"),
    schema.SessionMode(id="bypassPermissions", name="Bypass permissions"),
]


def model_option(current: str) -> schema.SessionConfigOptionSelect:
    values = [
        schema.SessionConfigSelectOption(value="small", name="Small model"),
        schema.SessionConfigSelectOption(value="large", name="Large model"),
    ]
    return schema.SessionConfigOptionSelect(
        id="model", name="Model", category="model", type="select", current_value=current,
        options=values,
    )  # fmt: skip


class ScriptedAgent:
    """The agent side; ``conn`` is the client it talks to."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.mcp: list[Any] = []
        self.cancelled = asyncio.Event()
        self.mode = "default"
        self.model = "small"
        self.session = ""
        self.loaded = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=schema.AgentCapabilities(
                load_session=bool(os.environ.get("SCRIPTED_AGENT_LOADS"))
            ),
            agent_info=schema.Implementation(name="scripted-agent", version="1.0"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.NewSessionResponse:
        self.mcp = list(mcp_servers or [])
        self.session = f"scripted-{os.getpid()}"
        modes = schema.SessionModeState(current_mode_id=self.mode, available_modes=MODES)
        return schema.NewSessionResponse(
            session_id=self.session, modes=modes,
            config_options=[model_option(self.model)],
        )  # fmt: skip

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        self.mcp, self.session, self.loaded = list(mcp_servers or []), session_id, True
        modes = schema.SessionModeState(current_mode_id=self.mode, available_modes=MODES)
        return schema.LoadSessionResponse(modes=modes)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self.mode = mode_id
        await self.say(session_id, f"mode is now {mode_id}")

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        self.model = str(value)
        await self.say(session_id, f"{config_id} is now {value}")
        return schema.SetSessionConfigOptionResponse(config_options=[model_option(self.model)])

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.set()

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))

    async def prompt(
        self, session_id: str, prompt: list[Any], **kwargs: Any
    ) -> schema.PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        word, _, rest = text.partition(" ")
        self.cancelled.clear()
        act = getattr(self, f"do_{word}", None)
        try:
            stop = (
                await act(session_id, rest)
                if act is not None
                else await self.echo(session_id, text)
            )
        except acp.RequestError as exc:
            await self.say(session_id, f"refused: {exc}")
            stop = "end_turn"
        return schema.PromptResponse(stop_reason=stop)

    async def echo(self, session_id: str, text: str) -> str:
        steps = [acp.plan_entry("read the question"), acp.plan_entry("answer it")]
        await self.conn.session_update(session_id, acp.update_plan(steps))
        await self.say(session_id, f"You said: **{text}**")
        return "end_turn"

    async def do_write(self, session_id: str, rest: str) -> str:
        path, _, content = rest.partition(" ")
        call = acp.start_tool_call("w1", f"Write {path}", kind="edit", raw_input={"path": path})
        await self.conn.session_update(session_id, call)
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        update = schema.ToolCallUpdate(tool_call_id="w1", title=f"Write {path}", kind="edit")
        answer = await self.conn.request_permission(session_id, update, options)
        outcome = answer.outcome
        chosen = getattr(outcome, "option_id", outcome.outcome)
        await self.say(session_id, f"permission: {chosen}")
        if chosen != "yes":
            return "end_turn"
        await self.conn.write_text_file(session_id, path, content)
        await self.say(session_id, f"wrote {path}")
        return "end_turn"

    async def do_read(self, session_id: str, rest: str) -> str:
        found = await self.conn.read_text_file(session_id, rest.strip())
        await self.say(session_id, f"read: {found.content}")
        return "end_turn"

    async def do_run(self, session_id: str, rest: str) -> str:
        command, *args = rest.split()
        made = await self.conn.create_terminal(session_id, command, args=args)
        done = await self.conn.wait_for_terminal_exit(session_id, made.terminal_id)
        output = await self.conn.terminal_output(session_id, made.terminal_id)
        await self.conn.release_terminal(session_id, made.terminal_id)
        await self.say(session_id, f"exit {done.exit_code}: {output.output.strip()}")
        return "end_turn"

    async def do_edit(self, session_id: str, rest: str) -> str:
        notebook, cell_id, source = rest.split(" ", 2)
        answer = await call_mcp(
            self.mcp[0], "edit_cell", path=notebook, cell_id=cell_id, source=source
        )
        await self.say(session_id, f"edit_cell answered: {answer}")
        return "end_turn"

    async def do_pid(self, session_id: str, rest: str) -> str:
        await self.say(session_id, f"pid {os.getpid()}")
        return "end_turn"

    async def do_session(self, session_id: str, rest: str) -> str:
        await self.say(session_id, f"session {self.session} loaded {self.loaded}")
        return "end_turn"

    async def do_slow(self, session_id: str, rest: str) -> str:
        await self.say(session_id, "working slowly")
        await self.cancelled.wait()
        return "cancelled"

    async def do_die(self, session_id: str, rest: str) -> str:
        await self.say(session_id, "about to stop")
        await asyncio.sleep(0.2)
        os._exit(3)


async def call_mcp(server: Any, tool: str, **arguments: Any) -> str:
    """One call of qloop's MCP server as the agent was told to reach it (URL and headers)."""
    import httpx
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {h.name: h.value for h in server.headers}
    info = types.Implementation(name="scripted-agent", version="1.0")
    async with (
        httpx.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(server.url, http_client=http) as (read, write, *_),
        ClientSession(read, write, client_info=info) as client,
    ):
        await client.initialize()
        result = await client.call_tool(tool, arguments)
    said = " ".join(getattr(c, "text", "") for c in result.content)
    return f"{'error' if result.is_error else 'ok'}: {said}"


if __name__ == "__main__":
    sys.exit(asyncio.run(acp.run_agent(ScriptedAgent())))
