"""Model- or record-written text as HTML that is safe in any viewer (nbconvert, GitHub, VS Code,
JupyterLab without the qloop extension).

Markdown goes through markdown-it-py (CommonMark, with tables and strikethrough) and then the nh3
allowlist sanitizer, with the element and attribute lists of the extension's ``sanitize.ts``: text,
headings, lists, tables, code, quotes and http, https and mailto links stay; scripts, styles, frames,
forms, event handlers, ``style`` and ``class`` attributes and every other URL scheme go. Images go too
(the extension keeps embedded PNG, JPEG and GIF data; a static page has no such check). Nothing that
can run, load a resource or cover the page survives. Code is escaped, never parsed, and shown with
every invisible character marked (``visible.py``); in Markdown, every character a person cannot see
(invisible, bidirectional controls) is shown as its mark too, before it is parsed.

Imports neither IPython nor ipywidgets.
"""

from __future__ import annotations

import functools
import html
import re

import nh3
from markdown_it import MarkdownIt

from .visible import as_shown, pieces

TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "cite",
        "code",
        "col",
        "colgroup",
        "dd",
        "del",
        "details",
        "dfn",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "rp",
        "rt",
        "ruby",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "time",
        "tr",
        "u",
        "ul",
        "var",
        "wbr",
    ]
)
ATTRIBUTES = {
    "*": {"title"},
    "a": {"href"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start", "reversed", "type"},
    "li": {"value"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
    "time": {"datetime"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
# Removed with everything inside them (any other element not allowed is unwrapped, text kept).
DROPPED = frozenset(
    [
        "applet",
        "audio",
        "button",
        "canvas",
        "datalist",
        "dialog",
        "embed",
        "frame",
        "frameset",
        "head",
        "iframe",
        "input",
        "link",
        "map",
        "math",
        "meta",
        "noscript",
        "object",
        "option",
        "output",
        "param",
        "picture",
        "portal",
        "script",
        "select",
        "slot",
        "source",
        "style",
        "svg",
        "template",
        "textarea",
        "title",
        "track",
        "video",
    ]
)
INVISIBLE_CLASS = "qloop-invisible"


@functools.cache
def _parser() -> MarkdownIt:
    # Raw HTML in the Markdown is parsed as the extension's renderer parses it, then sanitized.
    parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    # Every link becomes an anchor: the sanitizer drops a bad URL and keeps the text, instead of
    # leaving the Markdown source (``[x](javascript:...)``) on the page.
    parser.validateLink = lambda url: True  # type: ignore[method-assign]
    return parser


def sanitize(markup: str) -> str:
    """Untrusted HTML cut down to the allowlist (links get ``rel="noopener noreferrer"``)."""
    return nh3.clean(
        markup,
        tags=set(TAGS),
        clean_content_tags=set(DROPPED),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


# One line of plain prose: no character Markdown or HTML gives a meaning to, starting with a letter
# (no list, heading or quote marker) and without edge spaces. It renders as the same paragraph the
# parser and sanitizer make of it (tests/test_markup.py compares them), without running either.
_PLAIN_LINE = re.compile(r"[A-Za-z][A-Za-z0-9 ,.;:?!'\"()/%@$]*(?<! )")


def markdown_html(text: str) -> str:
    """Untrusted Markdown as sanitized HTML, each character a person cannot see as its mark."""
    if not text:
        return ""
    text = as_shown(text, runs=False)  # prose: its blanks are its layout (code blocks included)
    if len(text) <= 2_000 and _PLAIN_LINE.fullmatch(text):
        return f"<p>{text}</p>\n"
    return sanitize(_parser().render(text))


def code_html(code: str) -> str:
    """Code as an escaped ``<pre><code>`` block, each invisible character or long whitespace run
    shown as a visible mark (the approval card's rule)."""
    shown = "".join(
        html.escape(piece.text)
        if piece.mark is None
        else f"<span class='{INVISIBLE_CLASS}'>{html.escape(piece.mark)}</span>"
        for piece in pieces(code)
    )
    return f"<pre><code>{shown}</code></pre>"
