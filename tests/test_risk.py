"""The risk classifier for run_code (qloop_kernel/policy/risk/) and the policy decisions by class
(qloop_kernel/policy/permissions.py): the corpus of snippets, the rules table in docs/approval.md, arbitrary
input, and the verdict of every policy for every class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.inputtransformer2 import TransformerManager

from qloop_kernel.policy import risk
from qloop_kernel.policy.permissions import (
    HEADLESS_HINT,
    POLICIES,
    AutoApprover,
    PolicyDenier,
    policy_approver,
    policy_denial,
    policy_verdict,
)
from qloop_kernel.policy.risk import (
    RISKS,
    Assessment,
    Reason,
    classify,
    most_severe,
    rules_markdown,
)
from tests.fixtures.risk_corpus import CASES, EXISTING, Case

ROOT = Path(__file__).resolve().parent.parent
TRANSFORM = TransformerManager()


def assess(code: str, existing: frozenset[str] = EXISTING) -> Assessment:
    """Classify code as IPython would run it (magics and ! transformed)."""
    return classify(TRANSFORM.transform_cell(code), existing)


def shown(assessment: Assessment) -> list[str]:
    return [str(reason) for reason in assessment.reasons]


# -- the corpus --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[f"{c.risk}:{c.code[:40]!r}" for c in CASES])
def test_corpus_snippet_gets_its_class_and_reasons(case: Case):
    assessment = assess(case.code, case.existing)
    assert assessment.risk == case.risk, shown(assessment)
    for expected in case.reasons:
        assert any(expected in text for text in shown(assessment)), (expected, shown(assessment))


def test_corpus_is_large_and_covers_every_class_and_the_adversarial_snippets():
    assert len(CASES) >= 200
    counts = {r: sum(c.risk == r for c in CASES) for r in RISKS}
    assert min(counts.values()) >= 15, counts
    codes = {c.code for c in CASES}
    adversarial = [
        "import os as o\no.system('ls')",
        "__import__('os').system('ls')",
        "getattr(__builtins__, 'exec')('print(1)')",
        "df.eval('a + @b')",
        "open(p, 'w')",
        "globals()[n] = v",
        "pd.read_sql('SELECT * FROM sales', con)",
        "import subprocess as sp\nsp.check_output('ls', shell=True)",
        "import qloop_kernel",
        "%pip install requests",
        "!ls -la",
        "%reset -f",
    ]
    assert set(adversarial) <= codes
    assert sum(bool(c.reasons) for c in CASES) >= 60  # many cases pin their reason text too


def test_reasons_name_their_lines_and_the_class_is_the_most_severe():
    code = "import pandas as pd\nsummary = df.describe()\ndf['a'] = 1\nimport requests\ndel df\n"
    assessment = assess(code)
    assert shown(assessment) == [  # allow-listed imports are read: requests's calls are external
        "line 2: creates summary",
        "line 3: changes df, which exists",
        "line 5: deletes df, which exists",
    ]
    assert assessment.risk == "destructive" == most_severe(r.risk for r in assessment.reasons)
    assert assessment.may_change == frozenset({"pd", "summary", "df", "requests"})


def test_reason_renders_with_its_line():
    assert str(Reason(3, "write", "changes df, which exists")) == "line 3: changes df, which exists"
    assert most_severe([]) == "read" and most_severe(["write", "external", "unknown"]) == "external"
    assert list(RISKS) == ["read", "write", "compute", "unknown", "destructive", "external"]


def test_magic_lines_map_to_the_lines_of_the_cell():
    assessment = assess("x = 1\n%time y = 2\n!ls\n", frozenset())
    assert shown(assessment) == [
        "line 1: creates x",
        "line 2: creates y",
        "line 3: runs the shell command `ls`",
    ]
    cell = assess("%%time\nimport os\n\nos.remove('f')\n")
    assert shown(cell) == ["line 4: removes files (os.remove)"]


def test_may_change_bounds_the_names_or_says_it_cannot():
    assert assess("df.describe()").may_change == frozenset()
    assert assess("x = 1\ndf['a'] = x\nlst.append(1)").may_change == {"x", "df", "lst"}
    assert assess("alias = lst\nalias.clear()").may_change == {"alias", "lst"}
    assert assess("def add(a):\n    a.append(1)\nadd(lst)").may_change == {"add", "lst"}
    assert assess("for row in lst:\n    row.append(0)").may_change == {"row", "lst"}
    for unbounded in (
        "helper(df)",
        "exec('x = 1')",
        "%reset -f",
        "from math import *",
        "import torch",
    ):
        assert assess(unbounded).may_change is None, unbounded
    assert assess("import os\nos.system('ls')").may_change == {"os"}  # shell: no names change


def test_existing_decides_between_a_new_name_and_an_overwrite():
    assert shown(assess("df = 1", frozenset())) == ["line 1: creates df"]
    assert shown(assess("df = 1", frozenset({"df"}))) == ["line 1: overwrites df, which exists"]
    namespace = {"df": object(), "In": [], "_": None, "get_ipython": None}  # a dict is a Container
    assert classify("df = 2", namespace).risk == "destructive"
    assert classify("_ = 2\nIn = []", namespace).risk == "write"  # IPython's history names
    assert classify("get_ipython().run_line_magic('who', '')", namespace).risk == "read"


def test_syntax_errors_are_unknown_with_their_line():
    assessment = classify("a = 1\nb = (\n", frozenset())
    assert assessment.risk == "unknown" and assessment.may_change is None
    assert len(assessment.reasons) == 1 and assessment.reasons[0].text.startswith("does not parse")
    assert classify("x = 1\n\0", frozenset()).risk == "unknown"  # null byte
    deep = "(" * 300 + ")" * 300
    assert classify(deep, frozenset()).risk == "unknown"
    nested = "x = " + "-" * 5000 + "1"
    assert classify(nested, frozenset()).risk in {"unknown", "write"}


def test_reasons_do_not_quote_literal_values():
    token = "sk-ant-api03-" + "a" * 30
    code = f"import requests\nrequests.post('https://x.example', headers={{'k': '{token}'}})\n"
    code += f"open('{token}.txt', 'w')\ncur.execute('DROP TABLE t -- {token}')"
    assessment = assess(code)
    assert assessment.risk == "external"
    assert not any(token in text for text in shown(assessment))


def test_classify_executes_nothing(tmp_path: Path):
    marker = tmp_path / "ran"
    code = (
        f"open({str(marker)!r}, 'w').write('x')\n"
        f"import os\nos.system('touch {marker}')\n"
        f"exec(\"open({str(marker)!r}, 'w')\")\n"
        f"get_ipython().system('touch {marker}')\n"
    )
    assert classify(code, frozenset()).risk == "external"
    assert not marker.exists()


def test_the_classifier_imports_only_the_standard_library():
    imported: set[str] = set()
    for path in Path(risk.__file__).parent.glob("*.py"):  # its own modules import each other
        tree = ast.parse(path.read_text("utf-8"))
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {
            n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level
        }
    assert imported <= {
        "__future__",
        "ast",
        "builtins",
        "contextlib",
        "re",
        "collections.abc",
        "dataclasses",
        "typing",
    }


# -- arbitrary input ---------------------------------------------------------------------------------

_FRAGMENTS = [c.code for c in CASES] + ["", "\n", "    ", "(", "'", "%", "!", "%%", "\\"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_classify_never_raises_on_arbitrary_text(text: str):
    assessment = classify(text, EXISTING)
    assert assessment.risk in RISKS
    assert assessment.risk == most_severe(r.risk for r in assessment.reasons)
    assert all(r.line >= 1 for r in assessment.reasons)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=6), st.sampled_from(["\n", "; ", "\n    "]))
def test_classify_never_raises_on_combined_snippets(parts: list[str], joiner: str):
    cell = joiner.join(parts)
    assessment = classify(TRANSFORM.transform_cell(cell), EXISTING)
    assert assessment.risk == most_severe(r.risk for r in assessment.reasons)
    lines = cell.count("\n") + 1  # reasons count the lines of the cell as typed
    assert all(1 <= r.line <= lines for r in assessment.reasons), (cell, assessment)
    if any(r.risk == "unknown" for r in assessment.reasons):
        assert assessment.may_change is None


_DANGEROUS = [c for c in CASES if c.risk in {"external", "destructive"}]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_DANGEROUS), st.sampled_from(["if n:", "while n:", "with lock:", "try:"]))
def test_dangerous_code_stays_dangerous_inside_a_block(case: Case, header: str):
    body = TRANSFORM.transform_cell(case.code).rstrip("\n").replace("\n", "\n    ")
    tail = "\nexcept Exception:\n    pass\n" if header == "try:" else "\n"
    assessment = classify(f"{header}\n    {body}{tail}", case.existing)
    # a binding in a block may not happen, so what it binds can become unknown, never safer
    assert assessment.risk in {case.risk, "unknown"}, (case.code, shown(assessment))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([c for c in CASES if c.risk == "external"]))
def test_external_code_stays_dangerous_inside_a_function_it_defines(case: Case):
    """A function body is classified as if it ran: defining it does not hide what it does."""
    body = TRANSFORM.transform_cell(case.code).rstrip("\n").replace("\n", "\n    ")
    assessment = classify(f"def step():\n    {body}\n", case.existing)
    assert assessment.risk in {"external", "unknown"}, (case.code, shown(assessment))


# -- the rules table in the docs ----------------------------------------------------------------------


def test_docs_rules_table_is_the_one_the_code_renders():
    text = (ROOT / "docs" / "approval.md").read_text("utf-8")
    documented = text.split("<!-- rules:start -->\n")[1].split("<!-- rules:end -->")[0]
    assert documented == rules_markdown(), "re-render with qloop_kernel.policy.risk.rules_markdown()"


def test_rules_table_lists_every_name_of_every_table():
    table = rules_markdown()
    named = set(re.findall(r"`([^`]+)`", table))
    tables: list[object] = [
        risk.MODULES,
        risk.FUNCTIONS,
        risk.READ_METHODS,
        risk.MUTATING_METHODS,
        risk.COMPUTE_METHODS,
        risk.EXTERNAL_METHODS,
        risk.OPTIONAL_PATH_WRITERS,
        risk.ARGUMENT_MUTATORS,
        risk.SQL_FUNCTIONS,
        risk.SQL_METHODS,
        risk.CALLABLE_FIRST,
        risk.CALLABLE_KEY,
    ]
    for names in tables:
        assert set(names) <= named, set(names) - named  # type: ignore[call-overload]
    assert {f"%{m}" for m in risk.LINE_MAGICS} <= named
    assert {f"%%{m}" for m in risk.CELL_MAGICS} <= named
    assert {n for n in risk.BUILTINS if not n[0].isupper()} <= named
    for rule in risk.rules():
        assert rule.risk in RISKS


def test_method_tables_do_not_overlap():
    """A method name has one class: the tables are tried in order, so an overlap would hide one."""
    tables = {
        "read": risk.READ_METHODS,
        "write": risk.MUTATING_METHODS,
        "compute": set(risk.COMPUTE_METHODS),
        "external": set(risk.EXTERNAL_METHODS) | risk.OPTIONAL_PATH_WRITERS,
    }
    for first, names in tables.items():
        for second, others in tables.items():
            assert first == second or not (names & others), (first, second, names & others)


# -- policies ------------------------------------------------------------------------------------------


def _documented_verdicts() -> dict[str, dict[str, tuple[str, str]]]:
    """The policy table of docs/approval.md: policy row -> class -> (interactive, headless)."""
    text = (ROOT / "docs" / "approval.md").read_text("utf-8")
    section = text.split("## Policies")[1].split("## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, dict[str, tuple[str, str]]] = {}
    for row in rows:
        policy, *cells = [cell.strip() for cell in row.strip("|").split("|")]
        verdicts = {}
        for klass, cell in zip(RISKS, cells, strict=True):
            headless = re.search(r"\(headless: (\w+)\)", cell)
            first = cell.split()[0]
            verdicts[klass] = (first, headless.group(1) if headless else first)
        table[policy] = verdicts
    return table


def test_policy_verdicts_match_the_documented_table():
    table = _documented_verdicts()
    assert set(table) == {f"`{p}`" for p in POLICIES} | {"`ask`, read steps without asking"}
    for row, verdicts in table.items():
        policy = row.split("`")[1]
        ask_read = "without asking" not in row
        for klass, (interactive, headless) in verdicts.items():
            assert policy_verdict(policy, klass, ask_read=ask_read) == interactive, (row, klass)
            got = policy_verdict(policy, klass, ask_read=ask_read, interactive=False)
            assert got == headless, (row, klass)


def test_policy_verdicts_by_class():
    assert [policy_verdict("readonly", r) for r in RISKS] == ["run"] + ["deny"] * 5
    assert [policy_verdict("write", r) for r in RISKS] == ["run", "run"] + ["ask"] * 4
    headless_write = [policy_verdict("write", r, interactive=False) for r in RISKS]
    assert headless_write == ["run", "run"] + ["deny"] * 4
    assert {policy_verdict("ask", r) for r in RISKS} == {"ask"}
    assert policy_verdict("ask", "read", ask_read=False) == "run"
    assert policy_verdict("ask", "write", ask_read=False) == "ask"
    assert policy_verdict("ask", "read", interactive=False) == "run"  # headless ask = readonly
    assert {policy_verdict("auto", r, interactive=False) for r in RISKS} == {"run"}
    assert {policy_verdict("deny", r) for r in RISKS} == {"deny"}


def test_a_policy_denial_is_worded_as_the_policy_with_reasons_and_how_to_allow():
    assessment = assess("df['a'] = 1\nx = 2")
    text = policy_denial("readonly", assessment.risk, assessment.reasons)
    assert text.startswith("denied by the approval policy 'readonly': this step is classed 'write'")
    assert "(line 1: changes df, which exists; line 2: creates x)" in text
    assert HEADLESS_HINT in text and "`--approve write` also runs 'write' steps" in text
    assert "user" not in text
    many = assess("import os\n" + "\n".join(f"os.remove('f{i}')" for i in range(5)))
    text = policy_denial("write", many.risk, many.reasons)
    assert (
        "classed 'destructive'" in text and "and 2 more" in text and "--approve write" not in text
    )
    assert "nobody can approve here" in text
    assert policy_denial("deny", "read").startswith(
        "denied by the approval policy 'deny': this step is classed 'read', and 'deny' runs no step"
    )


def test_write_is_a_policy_and_existing_approvers_keep_working():
    assert POLICIES == ("ask", "auto", "readonly", "write", "deny")
    assert isinstance(policy_approver("auto", None), AutoApprover)
    interactive = AutoApprover()
    assert policy_approver("write", interactive) is interactive
    headless = policy_approver("write", None)
    assert isinstance(headless, PolicyDenier) and headless.policy == "write"
    ask_headless = policy_approver("ask", None)
    assert isinstance(ask_headless, PolicyDenier) and ask_headless.policy == "readonly"
