"""The content hashes saved records hold are fixed: a notebook saved earlier replays without a false
drift warning only while the same value gives the same hash."""

from __future__ import annotations

import pytest

from qloop_kernel.values.fingerprint import record_hash

SAVED = [
    (42, "73475cb40a568e8d"),
    (2.5, "b8736b9999090496"),
    ("revenue by month", "d70e6b2150663696"),
    ("x" * 1_500_000, "97deff0a05a2013a"),  # the head is hashed, with the length
    (b"\x00\x01abc", "b57f4da6e008a36d"),
    ([1, 2, "three"], "1804bf843cc4bda5"),
    ({"a": 1, "b": [2, 3]}, "a150ff8bbf065237"),
]


@pytest.mark.parametrize(("value", "saved"), SAVED, ids=[type(v).__name__ for v, _ in SAVED])
def test_a_value_hashes_as_records_saved_it(value: object, saved: str) -> None:
    assert record_hash(value) == saved
