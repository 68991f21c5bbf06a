"""The saved record of an agent cell's turn: schema, digest, loading and building.

Pure data: imports neither IPython, ipykernel nor ipywidgets.
"""

from __future__ import annotations

from .schema import (
    MAX_RECORD_BYTES,
    METADATA_KEY,
    MIME_TYPE,
    SCHEMA_VERSION,
    CellRecord,
    DecisionRecord,
    ImagePlaceholder,
    RecordError,
    Timings,
    ToolCallRecord,
    TurnProgress,
    UsageRecord,
    build_record,
    image_placeholder,
    load_record,
    strip_images,
    tool_call_record,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "METADATA_KEY",
    "MIME_TYPE",
    "SCHEMA_VERSION",
    "CellRecord",
    "DecisionRecord",
    "ImagePlaceholder",
    "RecordError",
    "Timings",
    "ToolCallRecord",
    "TurnProgress",
    "UsageRecord",
    "build_record",
    "image_placeholder",
    "load_record",
    "strip_images",
    "tool_call_record",
]
