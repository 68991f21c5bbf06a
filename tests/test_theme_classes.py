"""Colours come from the theme: card code and status lines carry classes, never inline colours,
and every class the highlighter emits for Python has a rule in the extension's stylesheet."""

from __future__ import annotations

import re
from pathlib import Path

from qloop_kernel.notebook.approval import highlight

CSS = (Path(__file__).resolve().parents[1] / "labextension" / "style" / "base.css").read_text()
SAMPLE = '''import os
@cache
def load(path="data.csv", *, rows=10_000, scale=2.5):
    """Read it."""  # a comment
    if path is not None and rows > 0x10:
        return {"p": f"{path!r}", "n": len(os.listdir("."))}
    raise ValueError('no') from None
'''


def test_card_code_is_coloured_by_classes_not_inline_styles() -> None:
    shown = highlight(SAMPLE)
    assert shown.startswith('<div class="qloop-code"><pre>')
    assert "style=" not in shown and "#" not in re.sub(r"<[^>]*>", "", shown).replace("# a", "")
    assert '<span class="qloop-tok-k">def</span>' in shown


def test_every_token_class_the_card_uses_has_a_theme_rule() -> None:
    used = set(re.findall(r'class="(qloop-tok-[a-z0-9]+)"', highlight(SAMPLE)))
    styled = set(re.findall(r"\.qloop-code \.(qloop-tok-[a-z0-9]+)", CSS))
    plain = {"qloop-tok-n", "qloop-tok-nn", "qloop-tok-nf", "qloop-tok-nd", "qloop-tok-nb",
             "qloop-tok-w", "qloop-tok-bp", "qloop-tok-ne"}  # fmt: skip  # the editor's text colour
    assert used - plain <= styled, used - plain - styled
    for rule in re.findall(r"\.qloop-code[^{]*\{([^}]*)\}", CSS):
        for colour in re.findall(r"(?:^|;|\s)color:\s*([^;]+)", rule):
            assert colour.strip().startswith(("var(--", "inherit")), colour  # never a fixed colour


def test_status_line_and_badge_colours_are_theme_variables() -> None:
    for kind in ("info", "ok", "warn", "error"):
        assert re.search(
            rf"\.qloop-line\.qloop-{kind} \{{\s*(?:[^}}]*\s)?color: var\(--qloop-", CSS
        )
    variables = dict(re.findall(r"(--qloop-[a-z-]+):\s*([^;]+);", CSS))
    assert variables and all("#" not in value for value in variables.values())
    assert "opacity" not in CSS.split("qloop-agent-cell .jp-Cell-inputWrapper::after")[1][:600]
