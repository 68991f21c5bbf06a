"""One formatted, safe rendering of an agent cell in every viewer without the qloop extension.

nbconvert's HTML (what GitHub, nbviewer and VS Code render too) of the executed demo shows each step's
code once, the answer formatted and nothing of the transcript as raw Markdown; hostile Markdown in a
prompt, an answer or code never leaves anything that can run, load or cover the page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

from qloop_kernel.markup import code_html, markdown_html
from qloop_kernel.records import load_record
from qloop_kernel.records.html import to_html
from tests.test_security import PAYLOAD, record

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

HOSTILE = [
    PAYLOAD,
    "<script>alert(1)</script>",
    "<SCRIPT SRC=https://evil.example/x.js></SCRIPT>",
    "<img src=x onerror=alert(1)>",
    "<img src='https://evil.example/pixel.png'>",
    "<svg onload=alert(1)><circle r=9></circle></svg>",
    "<iframe src='https://evil.example'></iframe>",
    "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    "<object data='https://evil.example/x.swf'></object><embed src='x.swf'>",
    "<style>body { display: none }</style>",
    "<link rel=stylesheet href='https://evil.example/x.css'>",
    "<meta http-equiv=refresh content='0;url=https://evil.example'>",
    "<base href='https://evil.example/'>",
    "<form action='https://evil.example'><input name=p><button>go</button></form>",
    "<div style='position:fixed;inset:0;z-index:9999'>cover</div>",
    "<p class='jp-Dialog'>borrowed page style</p>",
    "<a href='javascript:alert(1)'>x</a>",
    "<a href='JaVaScRiPt:alert(1)'>x</a>",
    "<a href='jav&#x09;ascript:alert(1)'>x</a>",
    "<a href='data:text/html,<script>alert(1)</script>'>x</a>",
    "<a href='vbscript:msgbox(1)'>x</a>",
    "[click](javascript:alert(1))",
    "[click](<javascript:alert(1)>)",
    "![pixel](https://evil.example/pixel.png)",
    "<details open ontoggle=alert(1)><summary>s</summary></details>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<noscript><p title='</noscript><img src=x onerror=alert(1)>'>",
    "<!--><img src=x onerror=alert(1)>-->",
    "```\n</code></pre><script>alert(1)</script>\n```",
    "<table><tr><td background='javascript:alert(1)'>t</td></tr></table>",
]

LOADING_TAGS = {
    "script", "iframe", "frame", "object", "embed", "img", "svg", "math", "style", "link",
    "meta", "base", "form", "input", "button", "audio", "video", "source", "template",
}  # fmt: skip


class Page(HTMLParser):
    """The elements, attributes and text of an HTML fragment as a browser's parser sees them."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._open: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def joined(self) -> str:
        return "".join(self.text)


def assert_inert(markup: str) -> None:
    """Nothing in ``markup`` can run, load a resource or cover the page."""
    for tag, attrs in Page(markup).tags:
        assert tag not in LOADING_TAGS, (tag, markup)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, markup)
            assert name not in ("style", "src", "srcdoc", "background", "action"), (tag, name)
            if name == "class":  # only the project's own classes, never the page's
                assert all(c.startswith("qloop-") for c in (value or "").split()), (tag, value)
            if name == "href":
                assert (value or "").startswith(("http:", "https:", "mailto:")), markup


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_markdown_is_inert_after_rendering(payload: str) -> None:
    rendered = markdown_html(payload)
    assert_inert(rendered)
    assert "__qloopPwned" not in rendered  # a script's text is dropped with it


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_text_in_every_part_of_a_saved_turn_is_inert(payload: str) -> None:
    made = record(payload, codes=[payload], answer=payload, error=payload)
    assert_inert(to_html(made, received=True))


def test_markdown_is_formatted_headings_bold_lists_tables_code() -> None:
    source = (
        "## Result\n\n**East** grew *most*.\n\n- one\n- two\n\n1. first\n\n"
        "| region | growth |\n|---|---|\n| East | 20.2 |\n\n```python\nx = 1 < 2\n```\n\n"
        "`inline` and [docs](https://example.com/a?b=1)"
    )
    page = Page(markdown_html(source))
    tags = [tag for tag, _ in page.tags]
    for tag in ("h2", "strong", "em", "ul", "ol", "li", "table", "th", "td", "pre", "code", "a"):
        assert tag in tags, tag
    assert "**" not in page.joined() and "x = 1 < 2" in page.joined()
    [link] = [attrs for tag, attrs in page.tags if tag == "a"]
    assert link["href"] == "https://example.com/a?b=1" and link["rel"] == "noopener noreferrer"


def test_code_is_escaped_once_and_its_invisible_characters_are_marked() -> None:
    page = Page(code_html("if a < b:\u200b\n    s = '<b>'" + " " * 12 + "# hidden"))
    assert [tag for tag, _ in page.tags] == ["pre", "code", "span", "span"]
    assert page.joined() == ("if a < b:⟨U+200B ZERO WIDTH SPACE⟩\n    s = '<b>'⟨12 spaces⟩# hidden")


def test_the_transcript_html_shows_prompt_each_call_and_decision_but_not_the_answer() -> None:
    made = record("Set **a**.", codes=["a = 1", "b = a + 1"], answer="the **answer**")
    page = Page(to_html(made))
    text = page.joined()
    assert "a = 1" in text and "b = a + 1" in text and text.count("run_code — approved") == 2
    assert "Set a." in text and "**" not in text
    assert "answer" not in text  # shown once, by the cell's answer output


# -- the executed demo through nbconvert ---------------------------------------------------------


class Outputs(HTMLParser):
    """The text and elements of every output area of an nbconvert HTML page, per cell."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[Page] = []
        self._depth = 0  # inside an output area: nesting depth of its divs
        self._chunk: list[str] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if self._depth == 0 and tag == "div" and "jp-Cell-outputWrapper" in classes:
            self._depth, self._chunk = 1, []
            return
        if self._depth:
            self._chunk.append(self.get_starttag_text() or "")
            self._depth += tag == "div"

    def handle_endtag(self, tag: str) -> None:
        if not self._depth:
            return
        self._depth -= tag == "div"
        if self._depth == 0:
            self.cells.append(Page("".join(self._chunk)))
        else:
            self._chunk.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if self._depth:
            self._chunk.append(escape(data))


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, nbformat.NotebookNode]:
    """notebooks/demo.ipynb replayed by ``qloop run`` as scripts/demo.sh does, then nbconvert's HTML."""
    out = tmp_path_factory.mktemp("demo") / "demo.executed.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    command = [
        str(BIN / "qloop"), "run", str(ROOT / "notebooks" / "demo.ipynb"), "--approve", "auto",
        "--replay-received", "-o", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    nb = nbformat.read(out, as_version=4)
    body, _ = HTMLExporter().from_notebook_node(nb)
    return body, nb


def test_the_executed_demo_reads_as_one_transcript_in_nbconvert_html(
    demo_html: tuple[str, nbformat.NotebookNode],
) -> None:
    body, nb = demo_html
    agent = [i for i, c in enumerate(nb.cells) if c.source.startswith("%%agent")]
    with_outputs = [i for i, c in enumerate(nb.cells) if c.get("outputs")]
    outputs = dict(zip(with_outputs, Outputs(body).cells, strict=True))
    assert len(agent) == 2
    whole = "".join(page.joined() for page in outputs.values())
    for index in agent:
        made = load_record(nb.cells[index].metadata["qloop"])
        shown = outputs[index]
        for tag, attrs in shown.tags:
            assert tag not in ("script", "iframe"), tag
            assert not any(name.startswith("on") for name in attrs), (tag, attrs)
            assert not any("javascript:" in (v or "").lower() for v in attrs.values())
        text = shown.joined()
        assert "**" not in text, text
        assert made.prompt in text
        for step in made.replay_steps():
            assert whole.count(str(step.input["code"]).rstrip()) == 1, step.input["code"]
        assert whole.count(made.answer.replace("**", "").replace("`", "")[:60]) == 1
    assert "<strong>East</strong>" in body  # the second answer's bold, formatted


def test_a_live_headless_turn_reads_as_one_transcript_in_nbconvert_html(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new turn run by ``qloop run``'s client against the stand-in: the step's code once, its
    output, the answer formatted after it."""
    import io

    from qloop_kernel.headless.runner import AgentNotebookClient
    from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

    code = "y = 6 * 7\nprint('y is', y)"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel"),
        nbformat.v4.new_code_cell("%%agent\nSet y."),
    ]
    script = [
        Reply([tool_use("run_code", {"code": code})]),
        Reply([text("## Done\n\ny is now **42**:\n\n| name | value |\n|---|---|\n| y | 42 |")]),
    ]
    with StandInAPI(script) as api:
        for name, value in {**api.environment(), "QLOOP_APPROVAL": "auto"}.items():
            monkeypatch.setenv(name, value)
        AgentNotebookClient(nb, progress=io.StringIO(), timeout=120).execute()
    body, _ = HTMLExporter().from_notebook_node(nb)
    [shown] = Outputs(body).cells
    text_shown = shown.joined()
    assert text_shown.count(code) == 1 and "y is 42" in text_shown
    tags = [tag for tag, _ in shown.tags]
    assert {"h2", "strong", "table", "td"} <= set(tags)
    assert "**" not in text_shown and "|---|" not in text_shown
    assert text_shown.index(code) < text_shown.index("y is 42") < text_shown.index("y is now 42")
