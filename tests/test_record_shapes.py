"""The record's closed value sets and the context fields, read by the extension as the kernel
writes them: a kind the kernel adds and the view does not know reads as "other" there."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from qloop_kernel.records.schema import (
    AttachmentRecord,
    ContextRecord,
    DecisionRecord,
    EgressRecord,
    RulesRecord,
    Status,
    ToolSize,
)

RECORD_TS = Path(__file__).resolve().parents[1] / "labextension" / "src" / "record.ts"


def _ts_list(name: str) -> list[str]:
    found = re.search(rf"export const {name} = \[(.*?)\] as const;", RECORD_TS.read_text(), re.S)
    assert found, f"{name} is not declared in record.ts"
    return re.findall(r"'([^']+)'", found.group(1))


def _literal(model: type, field: str) -> list[str]:
    return list(typing.get_args(model.model_fields[field].annotation))


def test_the_view_knows_every_egress_kind_the_kernel_writes() -> None:
    assert sorted(_ts_list("KNOWN_EGRESS_KINDS")) == sorted(_literal(EgressRecord, "kind"))


def test_the_view_knows_every_status_and_decision_the_kernel_writes() -> None:
    assert sorted(_ts_list("KNOWN_STATUSES")) == sorted(typing.get_args(Status))
    assert sorted(_ts_list("KNOWN_DECISIONS")) == sorted(_literal(DecisionRecord, "kind"))


def test_the_view_reads_every_field_of_a_turns_context() -> None:
    source = RECORD_TS.read_text()
    for model in (ContextRecord, RulesRecord, AttachmentRecord, ToolSize):
        for field in model.model_fields:
            assert f"['{field}']" in source, f"record.ts does not read {model.__name__}.{field}"
