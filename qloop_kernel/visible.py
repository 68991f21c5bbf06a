"""Code as a person sees it: every character that will run is on screen, or a visible mark for it.

One rule, used wherever code is shown (the approval card's HTML and plain text, the transcript
mirror's text fallback, the extension's transcript view through the same table and test vectors):

- a character of Unicode category Cf, Zl, Zp, Co or Cn, a Hangul filler (U+115F, U+1160, U+3164,
  U+FFA0), a control character other than tab and line feed (a carriage return before a line feed
  is a line end), a space other than U+0020, and the marks' own brackets ⟨ ⟩ become
  ``⟨U+200B ZERO WIDTH SPACE⟩``;
- a run of ``WHITESPACE_RUN`` or more spaces or tabs inside a line (not its indentation) becomes
  ``⟨400 spaces⟩``, so a long run cannot push the rest of the line out of sight.

``pieces(code)`` cuts the code into plain text and marks (for renderers that style marks);
``as_shown(code)`` is the same as one string (for plain text). ``mixed_script_names(code)`` lists
identifiers that mix scripts (a Cyrillic ``а`` in a Latin name), for a reason line on the card.
``hidden_characters(text)`` names the characters a text holds that a person cannot see.

The same rule marks every untrusted text a person reads outside the card: tool input in the
transcript's fallbacks, the progress lines, ``qloop show``, an MCP server's tool descriptions and
stderr. Prose (a prompt, an answer) is shown with ``runs=False``: its blanks are its own layout.

Imports neither IPython nor ipywidgets: every viewer can use it.
"""

from __future__ import annotations

import io
import re
import tokenize
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from .text import truncate

WHITESPACE_RUN = 8  # spaces or tabs inside a line from which the run is shown as a mark
MARKED_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Co", "Cn"})
# Letters that draw nothing, valid in Python identifiers: a name can be invisible.
FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})
OPEN, CLOSE = "⟨", "⟩"  # a mark's brackets; the same characters in code are marked themselves
_BLANKS = " \t"
_INDENT = re.compile(r"[ \t]*")
_LINES = re.compile(r"[^\n]*\n|[^\n]+")
_PLAIN = re.compile(r"[\t\n\x20-\x7e]*")
_LONG_RUN = re.compile(f"[{_BLANKS}]{{{WHITESPACE_RUN}}}")


@dataclass(frozen=True)
class Piece:
    """A stretch of code: ``text`` as it runs, ``mark`` what is shown instead (None: the text)."""

    text: str
    mark: str | None = None

    @property
    def shown(self) -> str:
        return self.text if self.mark is None else self.mark


@lru_cache(maxsize=4096)
def is_marked(char: str) -> bool:
    """Whether one character is shown as a mark instead of itself."""
    return _is_marked(char)


def _is_marked(char: str) -> bool:
    point = ord(char)
    category = unicodedata.category(char)
    if category in MARKED_CATEGORIES or point in FILLERS or char in (OPEN, CLOSE):
        return True
    if category == "Cc":
        return char not in "\t\n"
    return category == "Zs" and char != " "


def char_mark(char: str) -> str:
    """The mark of one character: ``⟨U+200B ZERO WIDTH SPACE⟩``, ``⟨U+E000 private use⟩``."""
    name = unicodedata.name(char, "") or _UNNAMED.get(unicodedata.category(char), "no name")
    return f"{OPEN}U+{ord(char):04X} {name}{CLOSE}"


_UNNAMED = {"Cc": "control", "Co": "private use", "Cn": "unassigned", "Cs": "surrogate"}


def run_mark(run: str) -> str:
    """The mark of a run of spaces and tabs: ``⟨400 spaces⟩``, ``⟨9 tabs⟩``, ``⟨12 spaces and tabs⟩``."""
    if run.strip(" ") == "":
        return f"{OPEN}{len(run)} spaces{CLOSE}"
    if run.strip("\t") == "":
        return f"{OPEN}{len(run)} tabs{CLOSE}"
    return f"{OPEN}{len(run)} spaces and tabs{CLOSE}"


def pieces(code: str, *, runs: bool = True) -> list[Piece]:
    """The code cut into plain text and marks; joined, the pieces' texts are the code. With
    ``runs=False`` long runs of blanks stay plain text (only characters are marked)."""
    found: list[Piece] = []
    for line in _LINES.findall(code):  # lines end at "\n" only, as the extension cuts them
        found += _line_pieces(line, runs)
    merged: list[Piece] = []
    for piece in found:  # neighbouring plain text as one piece
        if piece.mark is None and merged and merged[-1].mark is None:
            merged[-1] = Piece(merged[-1].text + piece.text)
        elif piece.text:
            merged.append(piece)
    return merged


def _line_pieces(line: str, runs: bool) -> list[Piece]:
    indent = _INDENT.match(line)
    start = indent.end() if indent else 0
    result = [Piece(line[:start])]
    index, end = start, len(line)
    while index < end:
        char = line[index]
        if char in _BLANKS:
            stop = index
            while stop < end and line[stop] in _BLANKS:
                stop += 1
            run = line[index:stop]
            marked = runs and len(run) >= WHITESPACE_RUN
            result.append(Piece(run, run_mark(run)) if marked else Piece(run))
            index = stop
            continue
        if char == "\r" and line[index + 1 : index + 2] == "\n":
            result.append(Piece(char))
        elif is_marked(char):
            result.append(Piece(char, char_mark(char)))
        else:
            result.append(Piece(char))
        index += 1
    return result


def as_shown(code: str, *, runs: bool = True) -> str:
    """The code (or any untrusted text) as a person reads it: every marked character or run
    replaced by its mark; ``runs=False`` keeps blanks as they are (prose)."""
    if _PLAIN.fullmatch(code) and not (runs and _LONG_RUN.search(code)):
        return code  # printable ASCII, tabs and line feeds: nothing to mark (most text)
    return "".join(piece.shown for piece in pieces(code, runs=runs))


def hidden_characters(text: str) -> list[str]:
    """The characters of ``text`` a person cannot see (invisible, bidirectional controls, other
    spaces), each once as ``U+202E RIGHT-TO-LEFT OVERRIDE``; the marks' own brackets, which are
    visible, are not among them."""
    found = dict.fromkeys(
        piece.mark[1:-1]
        for piece in pieces(text, runs=False)
        if piece.mark is not None and piece.text not in (OPEN, CLOSE)
    )
    return list(found)


def has_marks(code: str) -> bool:
    """Whether anything in the code is shown as a mark."""
    return any(piece.mark is not None for piece in pieces(code))


@dataclass(frozen=True)
class MixedName:
    """An identifier whose letters come from more than one script."""

    name: str
    line: int
    scripts: tuple[str, ...]  # in the order the name uses them

    def __str__(self) -> str:
        """ "line 2: the name 'pаss' mixes Latin and Cyrillic letters: U+0430 CYRILLIC SMALL LETTER A"."""
        counts = {s: sum(script_of(c) == s for c in self.name) for s in self.scripts}
        main = max(self.scripts, key=lambda s: counts[s])
        odd = dict.fromkeys(c for c in self.name if script_of(c) not in (None, main))
        letters = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '')}" for c in list(odd)[:5])
        scripts = " and ".join(x if len(x) <= 3 else x.title() for x in self.scripts)
        name = as_shown(self.name)
        return f"line {self.line}: the name '{name}' mixes {scripts} letters: {letters}"


def script_of(char: str) -> str | None:
    """The script of a letter as its Unicode name starts (LATIN, CYRILLIC, GREEK, CJK, ...), read
    after NFKC as Python reads identifiers; None for a character that is not a letter."""
    if not unicodedata.category(char).startswith("L"):
        return None
    folded = unicodedata.normalize("NFKC", char)[:1] or char
    name = unicodedata.name(folded, "")
    return name.split(" ", 1)[0] if name else None


def mixed_script_names(code: str) -> list[MixedName]:
    """Each identifier (a NAME token) whose letters come from more than one script, once per
    name and line."""
    found: dict[tuple[str, int], MixedName] = {}
    for name, line in _names(code):
        scripts = tuple(dict.fromkeys(s for s in map(script_of, name) if s is not None))
        if len(scripts) > 1 and (name, line) not in found:
            found[(name, line)] = MixedName(name, line, scripts)
    return list(found.values())


def _names(code: str) -> list[tuple[str, int]]:
    """The NAME tokens of Python code with their line; code that does not tokenize is read as words."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        return [(t.string, t.start[0]) for t in tokens if t.type == tokenize.NAME]
    except (tokenize.TokenError, SyntaxError):
        return [(m.group(), code.count("\n", 0, m.start()) + 1) for m in re.finditer(r"\w+", code)]


def bounded(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, then how many more there are (``… 1,204 more
    characters``)."""
    return truncate(text, limit, note=f"… {len(text) - limit:,} more characters")


def mark_table() -> dict[int, str]:
    """Every character the rule marks that has a name (or a kind), as ``{0x200B: "ZERO WIDTH
    SPACE"}``: the extension's transcript view reads it (labextension/src/marknames.ts, written by
    ``python -m qloop_kernel.visible``) so both sides show the same marks."""
    table = {}
    for point in range(0x110000):
        char = chr(point)
        category = unicodedata.category(char)
        if category in ("Co", "Cn", "Cs"):
            continue
        if _is_marked(char):
            table[point] = unicodedata.name(char, "") or _UNNAMED.get(category, "no name")
    return table


def mark_names_module() -> str:
    """The TypeScript module with ``mark_table()``, for the extension."""
    rows = ",\n".join(f"  [{point}, '{name}']" for point, name in sorted(mark_table().items()))
    return (
        "/**\n * The name of each character the rule of `qloop_kernel/visible.py` marks, by code\n"
        " * point. Written by `python -m qloop_kernel.visible`; a Python test checks it.\n */\n"
        "export const MARK_NAMES: ReadonlyArray<readonly [number, string]> = [\n"
        f"{rows}\n];\n"
    )


if __name__ == "__main__":
    print(mark_names_module(), end="")
