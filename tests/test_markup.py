"""Plain one-line prose skips the Markdown parser and the sanitizer: what it renders must be what
they would make of it, and anything else still goes through them."""

from __future__ import annotations

import random
import string

from qloop_kernel import markup

PLAIN_CHARS = string.ascii_letters + string.digits + " ,.;:?!'\"()/%@$"


def through_the_parser(text: str) -> str:
    return markup.sanitize(markup._parser().render(text))


def test_plain_lines_render_as_the_parser_and_sanitizer_render_them() -> None:
    rng = random.Random(7)
    samples = ["Let me look at the data.", "Done: df has 3 columns (a, b, c).",
               "It's \"quoted\" 100% $5 @x a/b", "x"]  # fmt: skip
    samples += [
        rng.choice(string.ascii_letters) + "".join(rng.choices(PLAIN_CHARS, k=rng.randint(0, 60)))
        for _ in range(20_000)
    ]
    fast = [s for s in samples if markup._PLAIN_LINE.fullmatch(s)]
    assert len(fast) > 15_000
    assert [markup.markdown_html(s) for s in fast] == [through_the_parser(s) for s in fast]


def test_anything_with_meaning_still_goes_through_the_parser() -> None:
    for text in ["1. first", "- item", "# Title", "> quoted", "a *b*", "a <b>x</b>", "a & b",
                 "a  ", " a", "a\nb", "[x](javascript:alert(1))", "a_b_", "a `c`", "a | b"]:  # fmt: skip
        assert not markup._PLAIN_LINE.fullmatch(text), text
        assert markup.markdown_html(text) == through_the_parser(text)
