"""Attachments: files, variables and cells a user adds to a turn's context (``%%agent --with``).

Each item becomes content blocks of the turn's first message, before the prompt, bounded:

- a text file: its text, at most ``TEXT_CHARS`` characters (head and tail, the cut marked);
- a CSV or Parquet file: its schema and its first ``TABLE_ROWS`` rows, read without reading the
  whole file (pandas ``nrows``; pyarrow's Parquet footer and first batch);
- an image (PNG, JPEG, GIF, WebP, told by its bytes): an image block, at most ``IMAGE_BYTES``;
- a variable: the same summary ``inspect_variable`` gives the model;
- a cell (``@CELL-ID``): its source as last run in this kernel.

Bad input (a missing file, a binary file, an unknown variable or cell) raises ``AttachmentError``
with one clear line, before anything is sent. Every text is redacted like the rest of the turn.
Each attachment keeps the SHA-256 of what it was made from, for the record and the drift check.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .errors import QloopError
from .messages import Block
from .redact import redacted_truncate

TEXT_CHARS = 20_000
TABLE_ROWS = 20
TABLE_CHARS = 12_000
IMAGE_BYTES = 5 * 1024 * 1024  # the API's limit for one image
MAX_TEXT_FILE_BYTES = 50 * 1024 * 1024  # a larger text file is read from its head only
WHOLE_HASH_BYTES = 256 * 1024 * 1024  # larger files are hashed from their size, head and tail
SAMPLE_BYTES = 1024 * 1024
IMAGE_TYPES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}

Kind = Literal["file", "table", "image", "variable", "cell"]


class AttachmentError(QloopError, ValueError):
    """An item of ``--with`` that cannot be attached; the message says which and why."""


@dataclass(frozen=True)
class Attachment:
    """One attached item: what it is, the blocks it sends and the hash of its source."""

    kind: Kind
    name: str  # the path, variable name or cell id as given
    blocks: list[Block] = field(default_factory=list)
    sha256: str = ""
    note: str = ""  # "cut to 20,000 of 81,233 characters", "first 20 rows"
    path: str = ""  # a file's absolute path (what the drift check reads again)

    @property
    def chars(self) -> int:
        return sum(len(str(b.get("text", ""))) for b in self.blocks if b.get("type") == "text")

    @property
    def image_bytes(self) -> int:
        return sum(len(str(b["source"]["data"])) * 3 // 4 for b in self.blocks
                   if b.get("type") == "image")  # fmt: skip

    def describe(self) -> str:
        size = (
            f"{self.chars:,} characters" if self.kind != "image" else f"{self.image_bytes:,} bytes"
        )
        note = f"; {self.note}" if self.note else ""
        return f"{self.kind} {self.name}: {size}{note}"


def split_items(values: Iterable[str]) -> list[str]:
    """``--with`` values as items: repeated options and comma lists, blanks dropped."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@dataclass(frozen=True)
class Sources:
    """Where items are looked up: the folder paths are relative to, the namespace, the cells."""

    folder: Path
    namespace: Mapping[str, Any]
    summarize: Callable[[str], str]  # a variable's summary, as inspect_variable gives it
    cell_source: Callable[[str], str | None]  # a cell's source as last run, None when not known


def attach(item: str, sources: Sources) -> Attachment:
    """One item: ``@cell-id``, a variable name in the namespace, else a file path."""
    if item.startswith("@"):
        return attach_cell(item[1:], sources.cell_source)
    if item.isidentifier() and item in sources.namespace:
        return attach_variable(item, sources.summarize)
    path = Path(item).expanduser()
    path = path if path.is_absolute() else sources.folder / path
    if not path.exists() and item.isidentifier():
        raise AttachmentError(
            f"--with {item}: no variable and no file is named {item!r} (a variable must be "
            "defined in the kernel; a file path is relative to the notebook's folder)"
        )
    return replace(attach_file(path, item), path=str(path.absolute()))


def attach_all(items: Iterable[str], sources: Sources) -> list[Attachment]:
    """Every item, in order, each once; the first bad one raises."""
    return [attach(item, sources) for item in dict.fromkeys(items)]


def attach_variable(name: str, summarize: Callable[[str], str]) -> Attachment:
    summary = summarize(name)
    text = f'<attached variable="{name}">\n{summary}\n</attached>'
    digest = hashlib.sha256(summary.encode("utf-8")).hexdigest()
    return Attachment("variable", name, [_text(text)], digest)


def attach_cell(cell_id: str, cell_source: Callable[[str], str | None]) -> Attachment:
    source = cell_source(cell_id) if cell_id else None
    if source is None:
        raise AttachmentError(
            f"--with @{cell_id}: no cell with id {cell_id!r} has run in this kernel (a cell is "
            'known once it ran; its id is in the notebook file\'s cell "id")'
        )
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    shown = redacted_truncate(source, TEXT_CHARS)
    note = (
        f"cut to {TEXT_CHARS:,} of {len(source):,} characters" if len(source) > TEXT_CHARS else ""
    )
    text = f'<attached cell="{cell_id}">\n{shown}\n</attached>'
    return Attachment("cell", cell_id, [_text(text)], digest, note)


def attach_file(path: Path, name: str) -> Attachment:
    """A file by its kind: table (CSV, Parquet), image, else text."""
    _check_file(path, name)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return _parquet(path, name)
    with path.open("rb") as handle:
        head = handle.read(16)
    media = image_type(head)
    if media is not None:
        return _image(path, name, media)
    if suffix in (".csv", ".tsv"):
        return _csv(path, name, "\t" if suffix == ".tsv" else ",")
    return _text_file(path, name)


def _check_file(path: Path, name: str) -> None:
    if not path.exists():
        broken = " (a broken link)" if path.is_symlink() else ""
        raise AttachmentError(f"--with {name}: no such file{broken}: {path}")
    if path.is_dir():
        raise AttachmentError(f"--with {name}: {path} is a folder; attach files in it one by one")
    if not os.access(path, os.R_OK):
        raise AttachmentError(f"--with {name}: {path} cannot be read (permission denied)")


def image_type(head: bytes) -> str | None:
    """The media type of image bytes by their signature, or None."""
    for signature, media in IMAGE_TYPES.items():
        if head.startswith(signature):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def file_hash(path: Path) -> str:
    """SHA-256 of the file; of its size, head and tail for a file over ``WHOLE_HASH_BYTES``
    (prefixed ``sample:``), so a huge file is never read whole."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if size <= WHOLE_HASH_BYTES:
            for chunk in iter(lambda: handle.read(SAMPLE_BYTES), b""):
                digest.update(chunk)
            return digest.hexdigest()
        digest.update(str(size).encode() + handle.read(SAMPLE_BYTES))
        handle.seek(size - SAMPLE_BYTES)
        digest.update(handle.read(SAMPLE_BYTES))
    return "sample:" + digest.hexdigest()


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _text_file(path: Path, name: str) -> Attachment:
    with path.open("rb") as handle:
        raw = handle.read(MAX_TEXT_FILE_BYTES)
    if b"\x00" in raw[:8192]:
        raise AttachmentError(
            f"--with {name}: {path} is a binary file; attach text, CSV, Parquet or an image "
            "(PNG, JPEG, GIF, WebP), or load it into a variable and attach that"
        )
    text = raw.decode("utf-8", errors="replace")
    whole = len(text) <= TEXT_CHARS and path.stat().st_size <= MAX_TEXT_FILE_BYTES
    shown = redacted_truncate(text, TEXT_CHARS)
    note = "" if whole else f"cut to {TEXT_CHARS:,} of {path.stat().st_size:,} bytes"
    block = _text(f'<attached file="{name}">\n{shown}\n</attached>')
    return Attachment("file", name, [block], file_hash(path), note)


def _image(path: Path, name: str, media: str) -> Attachment:
    size = path.stat().st_size
    if size > IMAGE_BYTES:
        raise AttachmentError(
            f"--with {name}: the image is {size:,} bytes; the model takes images up to "
            f"{IMAGE_BYTES:,} bytes: make it smaller first"
        )
    raw = path.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    blocks: list[Block] = [
        _text(f'<attached image="{name}" type="{media}" bytes="{size}"/>'),
        {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}},
    ]
    return Attachment("image", name, blocks, hashlib.sha256(raw).hexdigest())


def _csv(path: Path, name: str, sep: str) -> Attachment:
    try:
        import pandas as pd
    except ImportError:  # without pandas: the head lines as text
        return _head_lines(path, name)
    try:
        frame = pd.read_csv(path, sep=sep, nrows=TABLE_ROWS)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AttachmentError(f"--with {name}: not a readable CSV file ({exc})") from None
    schema = "\n".join(f"  {column}: {dtype}" for column, dtype in frame.dtypes.items())
    table = frame.to_string(max_colwidth=60)
    size = path.stat().st_size
    body = (f"CSV file, {size:,} bytes; columns (types from the first {len(frame)} rows):\n"
            f"{schema}\nfirst {len(frame)} rows:\n{table}")  # fmt: skip
    return _table(name, body, file_hash(path), len(frame))


def _head_lines(path: Path, name: str) -> Attachment:
    with path.open(encoding="utf-8", errors="replace") as handle:
        lines = [line.rstrip("\n") for _, line in zip(range(TABLE_ROWS + 1), handle, strict=False)]
    body = "CSV file, first lines:\n" + "\n".join(lines)
    return _table(name, body, file_hash(path), len(lines) - 1)


def _parquet(path: Path, name: str) -> Attachment:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise AttachmentError(f"--with {name}: reading Parquet needs pyarrow "
                              "(pip install pyarrow)") from None  # fmt: skip
    try:
        parquet = pq.ParquetFile(path)
        batch = next(parquet.iter_batches(batch_size=TABLE_ROWS), None)
    except Exception as exc:  # pyarrow raises its own error types for a damaged file
        raise AttachmentError(f"--with {name}: not a readable Parquet file ({exc})") from None
    meta = parquet.metadata
    rows = 0 if batch is None else batch.num_rows
    head = "" if batch is None else batch.to_pandas().head(TABLE_ROWS).to_string(max_colwidth=60)
    body = (f"Parquet file, {meta.num_rows:,} rows in {meta.num_row_groups} row groups; "
            f"schema:\n{parquet.schema_arrow}\nfirst {rows} rows:\n{head}")  # fmt: skip
    return _table(name, body, file_hash(path), rows)


def _table(name: str, body: str, digest: str, rows: int) -> Attachment:
    shown = redacted_truncate(body, TABLE_CHARS)
    block = _text(f'<attached table="{name}">\n{shown}\n</attached>')
    return Attachment("table", name, [block], digest, f"schema and first {rows} rows")


def first_message(attachments: list[Attachment], prompt: str) -> list[Block]:
    """The turn's first user content: each attachment's blocks, then the prompt."""
    blocks = [b for a in attachments for b in a.blocks]
    return [*blocks, _text(prompt)]
