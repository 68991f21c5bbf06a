"""``--with`` items as the model gets them: each kind, bounded, and one clear line for bad input."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.attachments import (
    IMAGE_BYTES,
    TEXT_CHARS,
    AttachmentError,
    Sources,
    attach,
    attach_all,
    split_items,
)
from qloop_kernel.testing.images import image_problem
from qloop_kernel.tools.namespace import inspect_variable


def sources(folder: Path, namespace: dict[str, Any] | None = None,
            cells: dict[str, str] | None = None) -> Sources:  # fmt: skip
    ns = namespace or {}
    return Sources(folder, ns, lambda name: inspect_variable(ns, name), (cells or {}).get)


def png_bytes() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(1, 1))
    axes.plot([1, 2, 3])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def test_items_repeat_or_come_as_a_comma_list() -> None:
    assert split_items(["a.csv, df", "@c1", " ,"]) == ["a.csv", "df", "@c1"]


def test_a_text_file_is_sent_whole_or_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("Revenue is in EUR.", "utf-8")
    item = attach("notes.md", sources(tmp_path))  # relative to the notebook's folder
    assert item.kind == "file" and item.path == str(tmp_path / "notes.md")
    assert item.blocks == [
        {"type": "text", "text": '<attached file="notes.md">\nRevenue is in EUR.\n</attached>'}
    ]
    (tmp_path / "long.txt").write_text("x" * (TEXT_CHARS * 3), "utf-8")
    long = attach(str(tmp_path / "long.txt"), sources(tmp_path))
    assert long.chars < TEXT_CHARS + 200 and "characters omitted" in long.blocks[0]["text"]
    assert long.note == f"cut to {TEXT_CHARS:,} of {TEXT_CHARS * 3:,} bytes"


def test_a_csv_gives_its_schema_and_head_without_reading_the_rest(tmp_path: Path) -> None:
    rows = ["region,revenue,day"] + [f"north,{i}.5,2026-01-{i % 28 + 1:02d}" for i in range(500)]
    rows.append('broken,"unterminated')  # never reached: only the head is read
    (tmp_path / "sales.csv").write_text("\n".join(rows), "utf-8")
    item = attach("sales.csv", sources(tmp_path))
    body = item.blocks[0]["text"]
    assert item.kind == "table" and item.note == "schema and first 20 rows"
    assert "revenue: float64" in body and ("region: object" in body or "region: str" in body)
    assert "north" in body and "19.5" in body and "20.5" not in body


def test_a_parquet_file_gives_schema_row_count_and_first_batch(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(10_000)), "name": [f"n{i}" for i in range(10_000)]})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=1_000)
    item = attach("big.parquet", sources(tmp_path))
    body = item.blocks[0]["text"]
    assert "10,000 rows in 10 row groups" in body and "id: int64" in body
    assert "n19" in body and "n20" not in body


def test_an_image_becomes_an_image_block_the_api_accepts(tmp_path: Path) -> None:
    raw = png_bytes()
    (tmp_path / "plot.png").write_bytes(raw)
    item = attach("plot.png", sources(tmp_path))
    image = item.blocks[1]
    assert item.kind == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == raw
    assert image_problem("image/png", image["source"]["data"]) is None
    (tmp_path / "plot.dat").write_bytes(raw)  # told by its bytes, not its name
    assert attach("plot.dat", sources(tmp_path)).kind == "image"
    (tmp_path / "huge.png").write_bytes(raw[:16] + b"\0" * IMAGE_BYTES)
    with pytest.raises(AttachmentError, match="up to 5,242,880 bytes"):
        attach("huge.png", sources(tmp_path))


def test_a_variable_gets_the_inspect_variable_summary() -> None:
    import pandas as pd

    frame = pd.DataFrame({"a": [1, 2, 3]})
    item = attach("frame", sources(Path("."), {"frame": frame}))
    assert item.kind == "variable"
    assert inspect_variable({"frame": frame}, "frame") in item.blocks[0]["text"]


def test_a_cell_by_id_and_an_unknown_cell_said_clearly() -> None:
    found = attach("@c1", sources(Path("."), cells={"c1": "df = load()"}))
    assert found.kind == "cell" and "df = load()" in found.blocks[0]["text"]
    with pytest.raises(AttachmentError, match="no cell with id 'c9' has run in this kernel"):
        attach("@c9", sources(Path("."), cells={"c1": "x"}))


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("missing.csv", "--with missing.csv: no such file"),
        ("nothing_here", "no variable and no file is named 'nothing_here'"),
        ("data.bin", "is a binary file; attach text, CSV, Parquet or an image"),
        ("folder", "is a folder; attach files in it one by one"),
        ("bad.parquet", "not a readable Parquet file"),
    ],
)
def test_bad_items_are_one_clear_line(tmp_path: Path, item: str, message: str) -> None:
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "folder").mkdir()
    (tmp_path / "bad.parquet").write_text("not parquet", "utf-8")
    (tmp_path / "notes.md").write_text("fine", "utf-8")
    with pytest.raises(AttachmentError, match=message):
        attach_all(["notes.md", item], sources(tmp_path))  # a good item first, then the bad one


def test_secrets_in_an_attached_file_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_PASSWORD", "s3cret-value-123")
    (tmp_path / "config.txt").write_text("password is s3cret-value-123", "utf-8")
    assert "s3cret" not in attach("config.txt", sources(tmp_path)).blocks[0]["text"]
