"""The one rule for showing code: every character that will run is on screen, or a mark for it."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from pathlib import Path

import pytest

from qloop_kernel.visible import (
    FILLERS,
    WHITESPACE_RUN,
    as_shown,
    bounded,
    char_mark,
    has_marks,
    mark_names_module,
    mark_table,
    mixed_script_names,
    pieces,
)

HIDDEN_TAIL = "harmless = 1" + " " * 400 + "; import os; HIDDEN_TAIL = 1"
MARK_NAMES_TS = Path(__file__).parents[1] / "labextension" / "src" / "marknames.ts"
VECTORS_JSON = Path(__file__).parents[1] / "labextension" / "test" / "visible-vectors.json"

# One character of each marked class, with the category the rule reads.
MARKED = {
    "\u200b": "Cf",  # zero width space
    "\u061c": "Cf",  # Arabic letter mark
    "\u2060": "Cf",  # word joiner
    "\u00ad": "Cf",  # soft hyphen
    "\u202e": "Cf",  # right-to-left override
    "\U000e0041": "Cf",  # tag latin capital letter A
    "\u2028": "Zl",
    "\u2029": "Zp",
    "\ue000": "Co",
    "\u0378": "Cn",
}


@pytest.mark.parametrize("char", sorted(MARKED))
def test_each_category_is_marked_with_code_point_and_name(char: str) -> None:
    assert unicodedata.category(char) == MARKED[char]
    shown = as_shown(f"x = 'a{char}b'")
    assert char not in shown
    assert f"⟨U+{ord(char):04X} " in shown
    name = unicodedata.name(char, "")
    assert (name or {"Co": "private use", "Cn": "unassigned"}[MARKED[char]]) in shown


@pytest.mark.parametrize("point", sorted(FILLERS))
def test_fillers_in_an_identifier_are_marked(point: int) -> None:
    code = f"a{chr(point)} = 1\nprint(a{chr(point)})"
    shown = as_shown(code)
    assert chr(point) not in shown
    assert shown.count(f"⟨U+{point:04X} {unicodedata.name(chr(point))}⟩") == 2


def test_ordinary_code_is_shown_as_it_is() -> None:
    code = "def f(x):\n\tif x:\r\n        return 'é ü 日本'  # note\n"
    assert as_shown(code) == code
    assert not has_marks(code)


def test_a_run_of_spaces_inside_a_line_is_one_mark() -> None:
    assert as_shown(HIDDEN_TAIL) == "harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1"
    short = "x = 1" + " " * (WHITESPACE_RUN - 1) + "# c"
    assert as_shown(short) == short
    assert as_shown("x" + " " * WHITESPACE_RUN + "y") == f"x⟨{WHITESPACE_RUN} spaces⟩y"
    assert as_shown("x\t\t\t\t\t\t\t\t\ty") == "x⟨9 tabs⟩y"
    assert as_shown("x" + " \t" * 6 + "y") == "x⟨12 spaces and tabs⟩y"
    assert as_shown("x = 1" + " " * 20 + "\n") == "x = 1⟨20 spaces⟩\n"  # trailing too


def test_indentation_is_not_a_run() -> None:
    code = "if x:\n" + " " * 16 + "y = 1\n\t\t\t\t\t\t\t\t\tz = 2"
    assert as_shown(code) == code


def test_the_marks_own_brackets_in_code_are_marked() -> None:
    shown = as_shown("s = '⟨400 spaces⟩'")
    assert "⟨U+27E8 MATHEMATICAL LEFT ANGLE BRACKET⟩400 spaces" in shown
    assert shown.endswith("⟨U+27E9 MATHEMATICAL RIGHT ANGLE BRACKET⟩'")


def test_controls_and_other_spaces_are_marked() -> None:
    assert as_shown("a = 1\rb = 2") == "a = 1⟨U+000D control⟩b = 2"
    assert as_shown("s = '\x1b[2J'") == "s = '⟨U+001B control⟩[2J'"
    assert as_shown("s = 'a\u00a0b'") == "s = 'a⟨U+00A0 NO-BREAK SPACE⟩b'"


def test_the_pieces_are_the_code_and_a_long_line_is_kept_whole() -> None:
    line = "x = '" + "ab\u200bcd" * 1000 + "'"
    assert len(line) > 5000
    found = pieces(line)
    assert "".join(p.text for p in found) == line
    shown = as_shown(line)
    assert shown.count("⟨U+200B ZERO WIDTH SPACE⟩") == 1000
    assert shown.replace("⟨U+200B ZERO WIDTH SPACE⟩", "") == line.replace("\u200b", "")


def test_mixed_script_identifiers_are_flagged_with_the_odd_letters() -> None:
    code = "pаssword = 1\nимя = 2\nvalue_2 = имя\nх_total = 3\n"  # Cyrillic а and х
    found = mixed_script_names(code)
    assert [(m.name, m.line) for m in found] == [("pаssword", 1), ("х_total", 4)]
    assert found[0].scripts == ("LATIN", "CYRILLIC")
    assert str(found[0]) == (
        "line 1: the name 'pаssword' mixes Latin and Cyrillic letters: "
        "U+0430 CYRILLIC SMALL LETTER A"
    )


def test_mixed_scripts_are_found_in_code_that_does_not_parse() -> None:
    assert [m.name for m in mixed_script_names("def (:\n  pаss = ")] == ["pаss"]


def test_strings_and_comments_are_not_identifiers() -> None:
    assert mixed_script_names("s = 'pаss'  # pаss") == []


def test_bounded_says_how_much_more_there_is() -> None:
    assert bounded("abc", 5) == "abc"
    assert bounded("a" * 1500, 100) == "a" * 100 + "… 1,400 more characters"


def test_the_extension_reads_the_same_marks() -> None:
    """labextension/src/marknames.ts is the table this rule makes (regenerate it with
    ``python -m qloop_kernel.visible``), and the vectors the jest test checks are this module's
    output."""
    assert MARK_NAMES_TS.read_text(encoding="utf-8") == mark_names_module()
    assert len(mark_table()) > 200
    for case in json.loads(VECTORS_JSON.read_text(encoding="utf-8")):
        assert as_shown(case["code"]) == case["shown"], case["code"]


def test_char_mark_names_a_character() -> None:
    assert char_mark("\u3164") == "⟨U+3164 HANGUL FILLER⟩"


def test_card_html_shows_the_hidden_tail_and_wraps() -> None:
    from qloop_kernel.notebook.approval import highlight

    shown = html.unescape(re.sub(r"<[^>]+>", "", highlight(HIDDEN_TAIL)))
    assert shown == "harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1"


def test_the_mirrors_text_fallback_shows_code_as_the_card_does() -> None:
    from qloop_kernel.records import CellRecord, DecisionRecord, Timings, ToolCallRecord
    from qloop_kernel.records.text import to_markdown

    call = ToolCallRecord(
        id="toolu_1", name="run_code", input={"code": HIDDEN_TAIL + "\nx\u200b = 1"},
        decision=DecisionRecord(kind="approved"),
    )  # fmt: skip
    record = CellRecord(
        session_id="s", prompt="p", model="m", status="completed", tool_calls=[call],
        timings=Timings(started_at="2026-01-01T00:00:00.000+00:00"),
    )  # fmt: skip
    text = to_markdown(record)
    assert "harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1" in text
    assert "x⟨U+200B ZERO WIDTH SPACE⟩ = 1" in text
