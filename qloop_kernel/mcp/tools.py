"""A server's tools as qloop tools: ``mcp__<server>__<tool>``, through the one ToolRuntime.

Each MCP tool becomes a :class:`~qloop_kernel.tools.runtime.Tool`, so its calls take the same path
as a built-in tool's: the input checked against the server's JSON schema before the call, the risk
class, the approval policy, grants, the approval card (naming the server), the log line and the
record. Risk comes from the tool's annotations; a server's hints are its own word, so unless the
user trusts the server they may only raise the approval need: an untrusted server's tool is at
least ``unknown``.

The model reads a tool's description and input schema as instructions. Where they hold characters a
person cannot see (invisible ones, bidirectional controls), the tool is *held to asking*
(``Tool.always_ask``): the permission pipeline puts every call to a person, whatever the policy, no
grant covers it, and nobody to ask means it does not run.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from ..attachments import image_type
from ..errors import ToolFailure
from ..messages import Block
from ..policy.risk import Assessment, Reason, Risk, most_severe
from ..tools.runtime import MAX_RESULT_CHARS, Tool
from ..visible import hidden_characters

PREFIX = "mcp__"
MAX_NAME_CHARS = 128  # the Messages API's tool name: ^[a-zA-Z0-9_-]{1,128}$
MAX_DESCRIPTION_CHARS = 2_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the Messages API's limit for one image
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: ``mcp__<server>__<tool>``, in the characters and length the
    Messages API accepts for a tool name (others, such as a dot, become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{PREFIX}{server}__{tool}")[:MAX_NAME_CHARS]


@dataclass(frozen=True)
class HintReason(Reason):
    """Why an MCP tool has its class: the server's hint, or its absence ("line" does not apply)."""

    def __str__(self) -> str:
        return self.text


def hinted_risk(annotations: Any) -> tuple[Risk, str]:
    """The class the tool's annotations state, and in words which hint said so."""
    read_only = getattr(annotations, "read_only_hint", None) is True
    destructive = getattr(annotations, "destructive_hint", None) is True
    open_world = getattr(annotations, "open_world_hint", None) is True
    found: list[tuple[Risk, str]] = []
    if read_only:
        found.append(("read", "the server marks it read-only"))
    if destructive and not read_only:
        found.append(("destructive", "the server marks it destructive"))
    if open_world:
        found.append(("external", "the server says it reaches outside (open world)"))
    if not found:
        return "unknown", "the server gives no hint of what it does"
    risk = most_severe(r for r, _ in found)
    return risk, "; ".join(text for r, text in found if r == risk)


def hidden_in(description: str, schema: dict[str, Any]) -> list[str]:
    """The characters a person cannot see in what the model reads of a tool: its description and
    every name and text of its input schema."""
    return hidden_characters("\n".join([description, *_texts(schema)]))


def _texts(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [str(key), *_texts(item)]]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def held_reason(server: str, hidden: list[str]) -> str:
    """Why a tool is held to asking: the characters its server hid in what the model reads."""
    named = ", ".join(hidden[:4]) + (f" and {len(hidden) - 4} more" if len(hidden) > 4 else "")
    return (
        f"MCP server '{server}' describes this tool with characters a person cannot see "
        f"({named}): every call is asked about, and no policy or grant runs it"
    )


def assessment_of(
    annotations: Any, trusted: bool, server: str, held: str | None = None
) -> Assessment:
    """The class of every call of the tool: the hinted one, at least ``unknown`` when untrusted;
    ``held`` (why it is held to asking) comes first among the reasons."""
    risk, why = hinted_risk(annotations)
    reasons = [HintReason(1, risk, f"MCP server '{server}': {why}")]
    if held is not None:
        reasons.insert(0, HintReason(1, risk, held))
    if not trusted and risk in ("read", "write", "compute"):
        reasons.append(
            HintReason(1, "unknown", f"'{server}' is not trusted: its hints cannot lower the class")
        )
        risk = "unknown"
    return Assessment(risk, tuple(reasons), None)


def input_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that checks input against the server's JSON schema and keeps it as is."""
    from jsonschema import exceptions as js_exceptions
    from jsonschema import validators

    try:
        checker_type = validators.validator_for(schema)
        checker_type.check_schema(schema)
        checker = checker_type(schema)
    except js_exceptions.SchemaError as exc:
        raise ValueError(f"the server's input schema is invalid: {exc.message}") from None

    class McpInput(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _schema(cls, data: object) -> object:
            errors = sorted(checker.iter_errors(data), key=lambda e: list(e.path))
            if errors:
                lines = "; ".join(
                    f"{'.'.join(map(str, e.path)) or '(input)'}: {e.message}" for e in errors[:10]
                )
                raise PydanticCustomError("json_schema", "{errors}", {"errors": lines})
            return data

    McpInput.__name__ = f"{name}_input"
    return McpInput


@dataclass
class McpTool(Tool):
    """A server tool: its schema is the server's, its class comes from its hints."""

    server: str = ""
    remote_name: str = ""
    input_schema: dict[str, Any] | None = None

    def schema(self) -> dict[str, Any]:
        if self._schema is None:
            self._schema = {
                "name": self.name,
                "description": self.description,
                "input_schema": self.input_schema or {"type": "object", "properties": {}},
            }
        return self._schema


def adapt(
    server: str,
    listed: Any,
    *,
    trusted: bool,
    connected: bool,
    call: Callable[[str, dict[str, Any]], list[Block]],
    shown: str = "",
) -> McpTool:
    """One listed MCP tool as a qloop tool; ``call(remote_name, arguments)`` runs it.

    It replays (``Tool.replayable``) only when it is ``read``, its server is connected and it is
    not held to asking: any other saved call is shown from the record, not repeated.
    """
    name = tool_name(server, listed.name)
    schema = _clean_schema(dict(listed.input_schema or {"type": "object"}))
    model = input_model(name, schema)
    described = (listed.description or listed.title or listed.name).strip()
    description = f"[MCP server '{server}'] {described}"[:MAX_DESCRIPTION_CHARS]
    hidden = hidden_in(description, schema)
    held = held_reason(server, hidden) if hidden else None
    found = assessment_of(listed.annotations, trusted, server, held)

    def run(validated: BaseModel) -> list[Block]:
        return call(listed.name, validated.model_dump(mode="json"))

    made = McpTool(
        name=name,
        description=description,
        input_model=model,
        func=run,
        takes_model=True,
        requires_approval=True,
        classify=lambda _input: found,
        replayable=found.risk == "read" and connected and held is None,
        notices=(
            f"a tool of MCP server '{server}'" + (f": {shown}" if shown else ""),
            *(str(reason) for reason in found.reasons),
        ),
        always_ask=held,
        server=server,
        remote_name=listed.name,
        input_schema=schema,
    )
    return made


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema the model is sent: an object schema, without the title the SDK adds."""
    schema.pop("title", None)
    schema.setdefault("type", "object")
    return schema


def result_blocks(result: Any, server: str, limit: int = MAX_RESULT_CHARS) -> list[Block]:
    """A ``CallToolResult`` as tool_result blocks: text, images (the model sees them), structured
    content as JSON, resource links and embedded resources as text. ``isError`` raises
    :class:`ToolFailure` with the server's text, which the runtime returns as an is_error result."""
    blocks: list[Block] = []
    for item in result.content or []:
        blocks += _block(item)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _said(blocks, structured):
        text = json.dumps(structured, ensure_ascii=False, indent=1, default=repr)
        blocks.append({"type": "text", "text": "structured content:\n" + text})
    if getattr(result, "is_error", False):
        said = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        raise ToolFailure(f"MCP server '{server}' answered with an error: {said or '(no text)'}")
    return blocks or [{"type": "text", "text": "(no output)"}]


def _said(blocks: list[Block], structured: Any) -> bool:
    """The structured content is already one of the text blocks (servers send both), or wraps
    the text as ``{"result": text}`` (the SDK's servers do for a text result)."""
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    if (
        isinstance(structured, dict)
        and list(structured) == ["result"]
        and structured["result"] in texts
    ):
        return True
    for text in texts:
        try:
            if json.loads(text) == structured:
                return True
        except ValueError:
            continue
    return False


def _block(item: Any) -> list[Block]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [{"type": "text", "text": str(item.text)}]
    if kind == "image":
        return [_image(item)]
    if kind == "resource_link":
        what = " — ".join(x for x in (item.name, item.description) if x)
        return [{"type": "text", "text": f"resource link: {item.uri} ({what or 'no name'})"}]
    if kind == "resource":
        resource = item.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return [{"type": "text", "text": f"resource {resource.uri}:\n{text}"}]
        return [{"type": "text", "text": f"resource {resource.uri}: binary ({resource.mime_type})"}]
    return [{"type": "text", "text": f"({kind or 'unknown'} content not shown)"}]


def _image(item: Any) -> Block:
    """An image block the API accepts: its type read from its bytes (a server's label can be
    wrong, and the API refuses data that does not match it), within the size limit."""
    label = str(item.mime_type or "")
    try:
        raw = base64.b64decode(item.data, validate=True)
    except (binascii.Error, ValueError):
        return {"type": "text", "text": f"(an image labelled {label} that is not valid base64)"}
    media = image_type(raw[:16])
    if media not in IMAGE_TYPES:
        return {"type": "text", "text": f"(an image labelled {label}, which the model cannot read)"}
    if len(raw) > MAX_IMAGE_BYTES:
        return {"type": "text", "text": f"(an image of {len(raw)} bytes, over the 5 MB limit)"}
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": item.data}}
