"""The JSON Schemas of the saved record and of every message, generated from their types.

``python -m qloop_kernel.records.schema_export`` writes them into ``qloop_kernel/schema/``;
``--check`` only compares. The extension's TypeScript types are generated from these files
(``jlpm schema`` in ``labextension/`` runs both steps); docs/schema.md says more.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

from .outside_schema import OutsidePageMessage, OutsideRoutes, OutsideServerMessage
from .protocol_schema import Answers, HostMessage, ProtocolMessage
from .schema import CellRecord

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
VALIDATION: JsonSchemaMode = "validation"  # what is read: a field with a default may be absent


class _Generator(GenerateJsonSchema):
    """Pydantic's generator without the titles it derives from field names ("Cell Id"): a
    code generator would turn each into a type of its own."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = VALIDATION) -> dict[str, Any]:
        return {"$schema": DIALECT, **super().generate(schema, mode=mode)}


def record_schema() -> dict[str, Any]:
    """The record as a cell's metadata and the transcript output hold it."""
    return CellRecord.model_json_schema(schema_generator=_Generator, mode=VALIDATION)


def protocol_schema() -> dict[str, Any]:
    """Every message of the ``qloop`` and ``qloop.waiting`` comms (the record they carry
    included), and in ``$defs/Answers`` the answer of each request by its ``op``; beside them
    the ``qloop/outside`` routes' messages (``OutsidePageMessage``, ``OutsideServerMessage``,
    ``OutsideRoutes``) and the ``qloop.host`` comm's (``HostMessage``)."""
    types: tuple[Any, ...] = (
        ProtocolMessage, Answers, OutsidePageMessage, OutsideServerMessage, OutsideRoutes,
        HostMessage,
    )  # fmt: skip
    adapters = [(t.__name__, VALIDATION, TypeAdapter[Any](t)) for t in types]
    _, found = TypeAdapter.json_schemas(adapters, schema_generator=_Generator)
    defs = found["$defs"]
    root = defs.pop(ProtocolMessage.__name__)
    return {"$schema": DIALECT, **root, "$defs": defs}


def schemas() -> dict[str, dict[str, Any]]:
    """Each schema file's name and content."""
    return {"record.schema.json": record_schema(), "protocol.schema.json": protocol_schema()}


def render(schema: dict[str, Any]) -> str:
    """A schema as its committed file holds it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def stale(folder: Path = SCHEMA_DIR) -> list[str]:
    """The schema files in ``folder`` that are missing or differ from what the types generate."""
    return [
        name
        for name, schema in schemas().items()
        if not (folder / name).is_file() or (folder / name).read_text("utf-8") != render(schema)
    ]


def write(folder: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = folder / name
        path.write_text(render(schema), "utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qloop_kernel.records.schema_export",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--check", action="store_true", help="only say which files are stale")
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help="the folder to write into")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.out)
        for name in names:
            print(f"{args.out / name} is stale: run python -m qloop_kernel.records.schema_export")
        return 1 if names else 0
    for path in write(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
