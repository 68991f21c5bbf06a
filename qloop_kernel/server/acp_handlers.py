"""The routes of the agent chat panel, ``qloop/acp/*``, behind the Jupyter server's authentication.

``GET agents`` lists the agents; ``POST chats`` starts a chat with one (``{"agent": name}``);
under ``chats/<id>``: ``POST prompt`` (``{"text"}``) starts a turn, ``GET events?after=N`` streams
the chat's events as server-sent events from the N-th on, ``POST cancel`` stops the turn
(``session/cancel``), ``POST mode`` (``{"mode"}``) and ``POST option`` (``{"id", "value"}``) set
the pickers the agent offers, ``DELETE`` ends the chat and its agent. The cards of a chat are the
outside broker's items under the chat's key (``qloop/outside/pending?path=acp/<id>``), decided
through ``qloop/outside/decide`` as a notebook's are.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.iostream import StreamClosedError

from .acp_agents import ConfigError, QloopACP, available
from .acp_chat import ChatError, Chats
from .handlers import AUTH_RESOURCE, outside_refusal

EVENTS_WAIT_S = 15.0  # a comment line keeps the stream open this often


class ACPHandler(APIHandler):
    """JSON in and out; a refusal of the admin floor or a chat error is a clear 4xx message."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, chats: Chats, config: QloopACP) -> None:
        self.chats = chats
        self.acp_config = config

    async def prepare(self) -> None:  # type: ignore[override]  # APIHandler's own signature
        await super().prepare()
        refusal = outside_refusal()
        if refusal is not None:
            raise web.HTTPError(403, refusal)

    def body(self) -> dict[str, Any]:
        try:
            found = json.loads(self.request.body or b"{}")
        except ValueError as exc:
            raise web.HTTPError(400, "the body is not JSON") from exc
        if not isinstance(found, dict):
            raise web.HTTPError(400, "the body is a JSON object")
        return found

    def text(self, found: dict[str, Any], key: str) -> str:
        value = found.get(key)
        if not isinstance(value, str) or not value.strip():
            raise web.HTTPError(400, f'"{key}" is a non-empty string')
        return value

    async def served(self, work: Any) -> None:
        try:
            answer = await work
        except ChatError as exc:
            raise web.HTTPError(409, str(exc)) from exc
        self.finish(json.dumps(answer if answer is not None else {"ok": True}))


class AgentsHandler(ACPHandler):
    """``GET qloop/acp/agents``: the agents offered, and the chats open now."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        try:
            agents = [a.listing() for a in available(self.acp_config)]
        except ConfigError as exc:
            raise web.HTTPError(500, str(exc)) from exc
        chats = [c.state() for c in self.chats.chats.values()]
        self.finish(json.dumps({"agents": agents, "chats": chats}))


class ChatsHandler(ACPHandler):
    """``POST qloop/acp/chats``: start a chat with the agent named."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        name = self.text(self.body(), "agent")
        try:
            spec = next((a for a in available(self.acp_config) if a.name == name), None)
        except ConfigError as exc:
            raise web.HTTPError(500, str(exc)) from exc
        if spec is None:
            raise web.HTTPError(404, f"no agent {name!r} is offered here")

        async def opened() -> dict[str, Any]:
            return (await self.chats.open(spec)).state()

        await self.served(opened())


class ChatHandler(ACPHandler):
    """``POST qloop/acp/chats/<id>/<action>`` and ``DELETE qloop/acp/chats/<id>``."""

    @web.authenticated
    @authorized
    async def post(self, chat_id: str, action: str) -> None:
        found = self.body()
        try:
            chat = self.chats.get(chat_id)
        except ChatError as exc:
            raise web.HTTPError(404, str(exc)) from exc
        if action == "prompt":
            await self.served(chat.prompt(self.text(found, "text")))
        elif action == "cancel":
            await self.served(chat.cancel())
        elif action == "mode":
            await self.served(chat.set_mode(self.text(found, "mode")))
        elif action == "option":
            await self.served(chat.set_option(self.text(found, "id"), self.text(found, "value")))
        else:
            raise web.HTTPError(404, f"no action {action!r}")

    @web.authenticated
    @authorized
    async def delete(self, chat_id: str, action: str = "") -> None:
        chat = self.chats.chats.pop(chat_id, None)
        if chat is None:
            raise web.HTTPError(404, f"no chat {chat_id!r}")
        await self.served(chat.close())


class EventsHandler(ACPHandler):
    """``GET qloop/acp/chats/<id>/events?after=N``: the chat's events as server-sent events."""

    @web.authenticated
    @authorized
    async def get(self, chat_id: str) -> None:
        try:
            chat = self.chats.get(chat_id)
            after = int(self.get_query_argument("after", "0"))
        except ChatError as exc:
            raise web.HTTPError(404, str(exc)) from exc
        except ValueError as exc:
            raise web.HTTPError(400, "after is a number") from exc
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        try:
            while True:
                events = await chat.after(after, EVENTS_WAIT_S)
                for event in events:
                    self.write(f"id: {event['n']}\ndata: {json.dumps(event)}\n\n")
                if not events:
                    self.write(": waiting\n\n")
                after += len(events)
                await self.flush()
        except (StreamClosedError, asyncio.CancelledError):
            return


def routes(base: str, chats: Chats, config: QloopACP) -> list[tuple[str, Any, dict[str, Any]]]:
    """The panel's routes under ``base``."""
    given = {"chats": chats, "config": config}
    chat = url_path_join(base, "qloop/acp/chats", "([0-9a-f]+)")
    return [
        (url_path_join(base, "qloop/acp/agents"), AgentsHandler, given),
        (url_path_join(base, "qloop/acp/chats"), ChatsHandler, given),
        (chat + "/events", EventsHandler, given),
        (chat + "/([a-z]+)", ChatHandler, given),
        (chat, ChatHandler, given),
    ]
