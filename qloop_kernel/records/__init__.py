"""The saved record of an agent cell's turn: schema, digest, loading and building.

Pure data: imports neither IPython, ipykernel nor ipywidgets.
"""

from __future__ import annotations

from ..errors import RecordError
from .build import (
    RecordBuilder,
    TurnProgress,
    bounded,
    build_record,
    image_placeholder,
    saved_messages,
    strip_images,
    tool_call_record,
    unsigned_json,
)
from .schema import (
    MAX_RECORD_BYTES,
    METADATA_KEY,
    MIME_TYPE,
    SCHEMA_VERSION,
    CellRecord,
    DecisionRecord,
    EgressRecord,
    ImagePlaceholder,
    Timings,
    ToolCallRecord,
    UsageRecord,
    load_record,
    mirrored_record,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "METADATA_KEY",
    "MIME_TYPE",
    "SCHEMA_VERSION",
    "CellRecord",
    "DecisionRecord",
    "EgressRecord",
    "ImagePlaceholder",
    "RecordBuilder",
    "RecordError",
    "Timings",
    "ToolCallRecord",
    "TurnProgress",
    "UsageRecord",
    "bounded",
    "build_record",
    "image_placeholder",
    "load_record",
    "mirrored_record",
    "saved_messages",
    "strip_images",
    "tool_call_record",
    "unsigned_json",
]
