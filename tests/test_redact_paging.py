"""Redaction that paging, previews and truncations cannot sidestep.

A second key of the provider whose key is in the environment is redacted whole, though the two share
a prefix that piece redaction finds; and every bounded view of a value (a page of a string or of
bytes, a preview, an item of a container, a truncated tool result) is cut from the redaction of the
whole value, so no page of a secret shows any part of it, at any offset or width. Unit tests, a
property test over random secrets of several providers, and the two-keys case in a real kernel:
the agent's inspect_variable and the MCP server's read tool as the kernel answers it.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import random
import re
import time
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.attachments import attach_cell
from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.tools import builtin_tools
from qloop_kernel.notebook_view import notebook_view, render
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.redact import REDACTED, PrivateVariables, redact_text
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.tools.history import CELL_SOURCE_CHARS, notebook_history
from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolRuntime, to_content
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import LabKernel

# Secret bodies use letters and digits that neither the text around them nor what the tools write
# (headers, markers, "[REDACTED]") can form 4 characters of: a piece found in an output is a leak.
BODY = "BFGHIJKLMNOPQSUVWXYZ0123456789nopqrstuvwxyz"
FILLER = "abcdefghijklm -_.,;:()\n"
PIECE = 4


def body(seed: int, length: int) -> str:
    chosen = random.Random(seed).choices(BODY, k=length)
    return "".join(chosen[:-2]) + "7q"  # letters and digits: token-like


ENV_KEY = "sk-ant-api03-" + body(1, 95)
ENV_PAT = "github_pat_11" + body(2, 80)
ENV_GHP = "ghp_" + body(3, 36)
OTHER_KEY = "sk-ant-api03-" + body(4, 95)  # a colleague's key, held by a variable
OTHER_PAT = "github_pat_11" + body(5, 80)
OTHER_GHP = "ghp_" + body(6, 36)
SERVICE_TOKEN = body(7, 33)  # not shaped like any provider's key


def pieces(secret: str, size: int = PIECE) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaks(shown: str, *secrets: str) -> list[str]:
    """The pieces of ``secrets`` (4 characters or more) that ``shown`` holds."""
    return sorted(p for secret in secrets for p in pieces(secret) if p in shown)


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set meanwhile (for hypothesis, which runs many examples in
    one test function)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- a second key of the same provider ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "in_env", "other"),
    [
        ("ANTHROPIC_API_KEY", ENV_KEY, OTHER_KEY),
        ("GITHUB_TOKEN", ENV_PAT, OTHER_PAT),
        ("GITHUB_TOKEN", ENV_GHP, OTHER_GHP),
    ],
    ids=["anthropic", "github_pat", "ghp"],
)
def test_a_second_key_of_the_provider_in_the_environment_is_redacted_whole(
    name: str, in_env: str, other: str
) -> None:
    said = redact_text(f"k = '{other}'; both: {in_env} {other}", {name: in_env})
    assert said == f"k = '{REDACTED}'; both: {REDACTED} {REDACTED}"


def test_a_piece_of_a_secret_takes_the_rest_of_its_token_with_it() -> None:
    rotated = SERVICE_TOKEN[:14] + "-rotated_" + body(8, 12)  # shares 14 characters, no key shape
    said = redact_text(f"token={rotated}, old {SERVICE_TOKEN}", {"SERVICE_TOKEN": SERVICE_TOKEN})
    assert said == f"token={REDACTED}, old {REDACTED}"


# -- bounded views are cut from the redacted whole --------------------------------------------------


@pytest.fixture
def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    monkeypatch.setenv("SERVICE_TOKEN", SERVICE_TOKEN)


def page_of(summary: str) -> str:
    """What a string's summary shows of the string: the page, without header and marker."""
    page = summary.partition("(page with offset=):\n")[2]
    return re.sub(r"\n\[\.\.\. [\d,]+ characters omitted .*\.\.\.\]\Z", "", page)


def test_no_page_of_a_string_shows_a_piece_of_a_secret(secrets_env: None) -> None:
    value = "ab " * 20 + SERVICE_TOKEN + " ; " + ENV_KEY + "\n" + OTHER_KEY + " m"
    namespace = {"v": value}
    for offset in range(len(value)):
        for max_chars in (500, 530):  # the tool's cut of the summary lands in each secret too
            summary = inspect_variable(namespace, "v", offset=offset, max_chars=max_chars)
            shown = page_of(redact_text(summary))
            assert leaks(shown, SERVICE_TOKEN, ENV_KEY, OTHER_KEY) == [], (offset, shown)


def test_a_page_of_bytes_and_an_item_of_a_container_show_no_piece(secrets_env: None) -> None:
    raw = b"ab " * 9 + SERVICE_TOKEN.encode() + b" " + OTHER_KEY.encode()
    for offset in range(len(raw)):
        shown = redact_text(inspect_variable({"b": raw}, "b", offset=offset))
        shown = shown.partition("Bytes ")[2].partition(": ")[2]
        assert leaks(shown, SERVICE_TOKEN, OTHER_KEY) == [], (offset, shown)
    for pad in range(260, 300):  # an item's repr is cut at 300 characters
        items = {"items": ["c" * pad + SERVICE_TOKEN], "by_key": {"k": "c" * pad + OTHER_KEY}}
        for name in items:
            shown = redact_text(inspect_variable(items, name))
            assert leaks(shown, SERVICE_TOKEN, OTHER_KEY) == [], (pad, shown)


def test_previews_and_truncated_results_show_no_piece(secrets_env: None) -> None:
    for pad in range(20, 40):  # a listing previews 40 characters of a string
        listing = redact_text(list_variables({"v": "c" * pad + SERVICE_TOKEN}))
        assert leaks(listing.partition("\n")[2], SERVICE_TOKEN) == [], (pad, listing)
    for pad in range(len(OTHER_KEY)):  # a tool result keeps its head and tail within its limit
        result = "c" * (1_000 - pad) + OTHER_KEY + " " + SERVICE_TOKEN + "d" * (300 + pad)
        [block] = to_content(result, limit=1_200)
        assert leaks(block["text"], SERVICE_TOKEN, OTHER_KEY) == [], (pad, block["text"])


def test_a_page_of_a_huge_string_redacts_only_around_the_page(secrets_env: None) -> None:
    middle = 40_000_000
    value = "".join(["ab " * (middle // 3), "c" * 5, SERVICE_TOKEN, " ", "ab " * (middle // 3)])
    started = time.perf_counter()
    summary = inspect_variable({"v": value}, "v", offset=middle - 10)
    page = time.perf_counter() - started
    assert REDACTED in summary and leaks(page_of(summary), SERVICE_TOKEN) == []
    started = time.perf_counter()
    redact_text(value)
    whole = time.perf_counter() - started
    assert page * 3 < whole, f"a page took {page:.3f} s, redacting the 80 MB string {whole:.3f} s"


def test_a_table_cell_is_cut_from_the_redacted_string_not_by_pandas(secrets_env: None) -> None:
    pd = pytest.importorskip("pandas")
    padded = [(". " * 20)[:pad] + SERVICE_TOKEN for pad in range(20, 40)]
    frame = pd.DataFrame({"k": padded, "n": 1})
    for name, value in (("frame", frame), ("series", frame["k"])):
        shown = redact_text(inspect_variable({name: value}, name, rows=20))
        assert ". . . . ." in shown and leaks(shown, SERVICE_TOKEN) == [], shown


class HistoryShell:
    """What notebook_history reads of IPython's shell: the typed sources and ``Out``."""

    def __init__(self, sources: list[str]) -> None:
        self.history_manager = types.SimpleNamespace(input_hist_raw=["", *sources])
        self.user_ns: dict[str, Any] = {"Out": {}}


def test_cut_cells_sources_outputs_and_attachments_show_no_piece(secrets_env: None) -> None:
    for pad in range(0, len(SERVICE_TOKEN), 3):
        source = "x = 1  # " + "c" * (CELL_SOURCE_CHARS - 9 - pad) + SERVICE_TOKEN
        shown = [notebook_history(HistoryShell([source]))]
        output = {"output_type": "stream", "name": "stdout", "text": "o" * (490 - pad) + OTHER_KEY}
        cell = {"id": "c1", "cell_type": "code", "source": "s" * (2990 - pad) + OTHER_KEY,
                "outputs": [output]}  # fmt: skip
        shown.append(render(notebook_view([cell])))
        # a 20,000-character cut keeps 13,333 characters of head and 6,667 of tail
        attached = (
            "a" * (13_330 - pad) + SERVICE_TOKEN + "b" * 100 + OTHER_KEY + "d" * (6_579 + pad)
        )
        shown.append(attach_cell("c1", {"c1": attached}.get).blocks[0]["text"])
        for said in shown:
            assert REDACTED in said and leaks(said, SERVICE_TOKEN, OTHER_KEY) == [], (pad, said)


@pytest.fixture(scope="module")
def ipython() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()


def test_a_page_of_a_private_value_shows_no_piece_of_it(ipython: InteractiveShell) -> None:
    phrase = "correct horse 77 battery staple"  # spaces: not token-like, no piece is known
    ipython.user_ns.update(held_pw=phrase, alias="ab " * 10 + phrase + " ;")
    runtime = ToolRuntime.of(
        builtin_tools(ipython, private=PrivateVariables({"held_pw"})), AutoApprover()
    )
    for offset in range(0, 30 + len(phrase)):
        call = ToolCall(f"t{offset}", "inspect_variable", {"name": "alias", "offset": offset})
        shown = runtime.run(call).text.partition("(page with offset=):\n")[2]
        assert leaks(shown, *phrase.split(" ")) == [], (offset, shown)


# -- the property: random secrets, random text, every offset and width -----------------------------

PROVIDERS = {  # key shapes: prefix and body length
    "anthropic": ("sk-ant-api03-", 95),
    "openai": ("sk-proj-", 48),
    "github": ("ghp_", 36),
    "github_pat": ("github_pat_11", 70),
    "slack": ("xoxb-", 40),
    "aws": ("AKIA", 16),
    "google": ("AIza", 35),
    "huggingface": ("hf_", 34),
}
UPPER_BODY = "BFGHIJKLMNOPQSUVWXYZ0123456789"  # an AWS key id's body: capitals and digits


def bodies(length: int, alphabet: str = BODY) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=length, max_size=length)


@st.composite
def secrets_and_text(draw: st.DrawFn) -> tuple[dict[str, str], list[str], str, list[int]]:
    """The environment's secrets, the secrets a variable holds, the variable's text and where each
    secret starts in it."""
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-api03-" + draw(bodies(93)) + "7q",
        "GITHUB_TOKEN": "github_pat_11" + draw(bodies(68)) + "7q",
        "SERVICE_TOKEN": draw(st.integers(14, 38).flatmap(bodies)) + "7q",
        "DB_PASSWORD": draw(bodies(12)),  # shorter than a token: redacted whole, never by pieces
    }
    held = list(env.values())
    for provider in draw(st.lists(st.sampled_from(sorted(PROVIDERS)), min_size=2, max_size=4)):
        prefix, length = PROVIDERS[provider]
        held.append(prefix + draw(bodies(length, UPPER_BODY if provider == "aws" else BODY)))
    held.append("sk-ant-api03-" + draw(bodies(95)))  # always a second key of the env's provider
    held = draw(st.permutations(held))
    gaps = draw(
        st.lists(st.text(FILLER, max_size=12), min_size=len(held) + 1, max_size=len(held) + 1)
    )
    value, starts = gaps[0], []
    for secret, gap in zip(held, gaps[1:], strict=True):
        starts.append(len(value))
        value += secret + gap
    return env, held, value, starts


def previews(listing: str) -> str:
    """The previews of a listing's rows (its details column: a string's quoted start)."""
    rows = redact_text(listing).split("\n")[2:]
    return "\n".join(row[row.find("'") :] for row in rows if "'" in row)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=secrets_and_text(), max_chars=st.integers(500, 700))
def test_property_no_page_preview_or_cut_of_a_random_secret_shows_a_piece(
    case: tuple[dict[str, str], list[str], str, list[int]], max_chars: int
) -> None:
    env, held, value, starts = case
    with environment(env):
        for offset in range(len(value)):
            summary = inspect_variable({"v": value}, "v", offset=offset, max_chars=max_chars)
            shown = page_of(redact_text(summary))
            assert leaks(shown, *held) == [], ("page", offset, shown)
        for limit in range(30, len(value)):  # the head and the tail of a result cut everywhere
            [block] = to_content(value, limit=limit)
            assert leaks(block["text"], *held) == [], ("cut", limit, block["text"])
        for start in starts:  # a preview's cut in each secret at each of its first 40 characters
            padded = {f"v{pad}": "c" * pad + value[start:] for pad in range(41)}
            assert leaks(previews(list_variables(padded)), *held) == [], ("preview", start)


# -- the two-keys case in a real kernel ------------------------------------------------------------

HELD = (
    f"other_key = {OTHER_KEY!r}\nother_pat = {OTHER_PAT!r}\nother_ghp = {OTHER_GHP!r}\n"
    "padded = 'ab ' * 12 + other_key + ' ' + other_pat\n"
)
PROBE = "__import__('qloop_kernel.server.probe', fromlist=['probe'])"


@pytest.fixture(scope="module")
def keyed_api() -> Iterator[StandInAPI]:
    with StandInAPI(api_key=ENV_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def keyed_lab(keyed_api: StandInAPI) -> Iterator[LabKernel]:
    env = {**keyed_api.environment(api_key=ENV_KEY), "GITHUB_TOKEN": ENV_PAT}
    with LabKernel(env) as kernel:
        kernel.run("%load_ext qloop_kernel")
        kernel.run(HELD)
        yield kernel


def inspections() -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = [{"name": n} for n in ("other_key", "other_pat", "other_ghp")]
    calls += [{"name": "other_key", "offset": o} for o in (5, 13, 40, 90, 100)]
    calls += [{"name": "padded", "offset": o} for o in (30, 36, 120, 140, 180)]
    return calls


@pytest.mark.kernel
def test_a_second_key_never_reaches_the_model_or_the_record(
    keyed_lab: LabKernel, keyed_api: StandInAPI
) -> None:
    calls = inspections()
    keyed_api.set_script(
        [
            Reply([tool_use("list_variables", {}), *(tool_use("inspect_variable", c) for c in calls)]),
            Reply([text("Looked.")]),
        ]
    )  # fmt: skip
    agent = keyed_lab.execute("%%agent\nLook at the keys.", cell_id="keys")
    assert keyed_lab.complete(agent, 90)["content"]["status"] == "ok"
    results = [result_text(block) for block in tool_results(keyed_api.requests[1])]
    assert len(results) == len(calls) + 1 and all(REDACTED in r for r in results[1:])
    assert "other_key" in results[0] and "Characters 90-" in results[7]
    sent = json.dumps([r.body for r in keyed_api.requests])
    record = json.dumps(saved_record(keyed_lab, agent))
    for where in (sent, record):
        assert leaks(where, OTHER_KEY[13:], OTHER_PAT[13:], OTHER_GHP[4:], ENV_KEY[13:]) == []


@pytest.mark.kernel
def test_the_mcp_read_tool_answers_without_a_second_key(keyed_lab: LabKernel) -> None:
    answers = []
    for call in [{"name": "other_key", "offset": 0}, *inspections()]:
        expression = (
            f"{PROBE}.inspect(get_ipython(), {call['name']!r}, None, {call.get('offset', 0)}, None)"
        )
        content = {"code": "", "silent": True, "store_history": False, "allow_stdin": False,
                   "user_expressions": {"r": expression}}  # fmt: skip
        reply = keyed_lab.complete(keyed_lab.request("execute_request", content), 30)
        found = reply["content"]["user_expressions"]["r"]
        assert found["status"] == "ok", found
        answers.append(json.loads(ast.literal_eval(found["data"]["text/plain"])))
    assert all(a["ok"] and REDACTED in a["text"] for a in answers)
    shown = "\n".join(a["text"] for a in answers)
    assert leaks(shown, OTHER_KEY[13:], OTHER_PAT[13:], OTHER_GHP[4:]) == []
