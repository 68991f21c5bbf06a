"""The signing key is made once, whole, even when kernels start at the same moment."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from qloop_kernel.records import signing

WRITERS = 16


def _keys_made_together(path: Path) -> list[bytes]:
    """Every writer reads or creates the key at ``path`` at the same moment."""
    start = threading.Barrier(WRITERS)
    keys: list[bytes] = []

    def make() -> None:
        start.wait()
        keys.append(signing._read_or_create(path))

    writers = [threading.Thread(target=make) for _ in range(WRITERS)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    return keys


def test_kernels_starting_together_share_one_whole_key(tmp_path: Path) -> None:
    for round_ in range(100):
        path = tmp_path / f"round-{round_}" / "key"
        keys = _keys_made_together(path)
        assert len(keys) == WRITERS
        assert len(set(keys)) == 1, "every kernel uses the key the first one wrote"
        assert len(keys[0]) == 32, "no kernel takes a half-written file for its key"
        assert path.read_text("ascii") == keys[0].hex()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert [p.name for p in path.parent.iterdir()] == ["key"], "nothing left aside"
