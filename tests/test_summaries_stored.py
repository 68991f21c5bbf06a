"""Arrays stored in files (h5py, zarr) are described from their metadata and one bounded block:
inspecting a big one reads a few chunks, never the file; undo keeps them as live handles."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr

from qloop_kernel.notebook.undo import measure, snapshot_copy
from qloop_kernel.values.fingerprint import record_hash as content_hash
from qloop_kernel.values.summaries import Paging, brief, summarize
from qloop_kernel.values.summaries.stored import STORED_SAMPLE
from qloop_kernel.values.summaries.trust import trusting


class CountingFile(io.FileIO):
    """A file that counts the bytes read from it."""

    read_bytes = 0

    def readinto(self, buffer: Any) -> int:
        got = super().readinto(buffer) or 0
        self.read_bytes += got
        return got


def test_an_hdf5_dataset_is_read_by_one_block_not_across_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.h5"
    values = np.arange(4_000_000, dtype="f8").reshape(400_000, 10)  # 32 MB, uncompressed
    with h5py.File(path, "w") as made:
        made.create_dataset("x", data=values, chunks=(1_000, 10))
    with CountingFile(path, "rb") as counting, h5py.File(counting, "r") as opened:
        counting.read_bytes = 0
        dataset = opened["x"]
        with trusting([f"{__name__}.CountingFile"]):  # h5py reads through its methods
            text = summarize(dataset, "x", Paging(offset=200_000))
            listed = brief(dataset)
        read = counting.read_bytes
    assert 0 < read < 2 * STORED_SAMPLE * 8  # the first block and the rows shown, not 32 MB
    assert "h5py.Dataset, shape (400000, 10), dtype float64, 30.5 MB uncompressed" in text
    assert "Stored: /x in HDF5 file" in text and "chunks (1000, 10)" in text
    assert "Statistics on the first 100,000 of 4,000,000 elements" in text
    assert "min 0, max 99999" in text
    assert "Rows 200,000-200,004 along axis 0 (of 400,000):" in text and "2000000." in text
    assert listed.size == "400,000 x 10" and listed.memory == "30.5 MB in file"


class CountingStore(zarr.storage.MemoryStore):
    """A zarr store that counts the chunks read from it."""

    gets: list[str]

    async def get(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self.gets.append(key)
        return await super().get(key, *args, **kwargs)


def test_a_zarr_array_reads_the_chunks_of_its_first_block_only() -> None:
    store = CountingStore()
    store.gets = []
    array = zarr.create_array(store=store, shape=(200_000, 30), chunks=(100, 30), dtype="i4")
    array[:] = np.arange(6_000_000, dtype="i4").reshape(200_000, 30)  # 2,000 chunks
    store.gets.clear()
    text = summarize(array, "z", Paging())
    chunks = [k for k in store.gets if not k.endswith("zarr.json")]
    # 100,000 elements of rows cut to 20 columns: 5,000 rows, 50 chunks of 100 rows.
    assert 0 < len(chunks) <= 51
    assert "zarr.Array, shape (200000, 30), dtype int32" in text
    assert "Statistics on the first 100,000 of 6,000,000 elements" in text
    assert "the first 20 along the other axes" in text


def test_a_zero_d_dataset_shows_its_value_and_takes_no_paging(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "s.h5", "w") as made:
        scalar = made.create_dataset("s", data=3.5)
        assert "Value: 3.5" in summarize(scalar, "s", Paging())


@pytest.mark.parametrize("kind", ["h5py", "zarr"])
def test_undo_and_fingerprints_never_copy_or_read_a_stored_array(tmp_path: Path, kind: str) -> None:
    if kind == "h5py":
        opened = h5py.File(tmp_path / "u.h5", "w")
        array: Any = opened.create_dataset("u", shape=(1_000_000,), dtype="f8")
    else:
        array = zarr.create_array(store=str(tmp_path / "u.zarr"), shape=(1_000_000,), dtype="f8")
    kept, how = snapshot_copy(array)
    assert kept is array and how == "kept (a live handle)"  # a write goes to the file
    assert measure(array).host == 0 and content_hash(array) == ""
