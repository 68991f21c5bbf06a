"""Rules files: where they are found, in which order, bounded, approved, cached, and told apart on
replay when they changed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from qloop_kernel.context_rules import (
    MAX_RULES_CHARS,
    RulesApprovals,
    RulesError,
    diff_lines,
    discover,
    project_root,
    read_rules,
    rules_text,
    select,
    use_mode,
    with_rules,
)
from qloop_kernel.conversation import SYSTEM_PROMPT, ConversationManager
from qloop_kernel.model import AnthropicModel
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.records.drift import differences
from qloop_kernel.records.schema import Fingerprint, SourcePrint
from qloop_kernel.settings import Settings
from qloop_kernel.testing import Reply, StandInAPI, text
from qloop_kernel.testing.tokens import prompt_segments
from qloop_kernel.tools.runtime import Tool, ToolRuntime
from qloop_kernel.turn_context import TurnContext


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project tree under a fake home; the user's rules file and approvals in it too."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("QLOOP_USER_RULES", str(tmp_path / "user-rules.md"))
    monkeypatch.setenv("QLOOP_RULES_APPROVALS", str(tmp_path / "state" / "approved.json"))
    monkeypatch.delenv("QLOOP_PROJECT_ROOT", raising=False)
    monkeypatch.delenv("QLOOP_RULES", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return tmp_path


def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, "utf-8")
    return path


def project(home: Path) -> Path:
    """home/repo (.git, AGENTS.md) / analysis (CLAUDE.md, .qloop/rules.md) / notebooks."""
    repo = home / "repo"
    (repo / ".git").mkdir(parents=True)
    write(home / "AGENTS.md", "above the repository: never read")
    write(repo / "AGENTS.md", "Tables in warehouse.* are authoritative.")
    write(repo / "analysis" / "CLAUDE.md", "Plot with seaborn, dark grid.")
    write(repo / "analysis" / ".qloop" / "rules.md", "Never write to prod.")
    (repo / "analysis" / "notebooks").mkdir()
    return repo


def test_found_from_the_notebook_folder_up_to_the_repository_root_user_file_first(
    home: Path,
) -> None:
    repo = project(home)
    write(home / "user-rules.md", "Answer in French.")
    found = discover(repo / "analysis" / "notebooks")
    assert [(Path(f.path).relative_to(home).as_posix(), f.origin) for f in found] == [
        ("user-rules.md", "user"),
        ("repo/AGENTS.md", "project"),
        ("repo/analysis/CLAUDE.md", "project"),
        ("repo/analysis/.qloop/rules.md", "project"),
    ]
    assert (
        found[1].sha256 == hashlib.sha256(b"Tables in warehouse.* are authoritative.").hexdigest()
    )
    # the text goes in that order: the most specific last, so it wins where two disagree
    uses = select(found, RulesApprovals(home / "none.json"), "all")
    section = rules_text(uses)
    order = [section.index(t) for t in ("French", "warehouse", "seaborn", "prod")]
    assert order == sorted(order) and "later (more specific) one wins" in section


def test_without_a_repository_the_search_stops_at_the_project_root_setting_or_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(home / "AGENTS.md", "home rules")
    write(home / "work" / "AGENTS.md", "work rules")
    folder = home / "work" / "deep"
    folder.mkdir(parents=True)
    assert project_root(folder) == home
    assert [Path(f.path).parent for f in discover(folder)] == [home, home / "work"]
    monkeypatch.setenv("QLOOP_PROJECT_ROOT", str(home / "work"))  # the Jupyter root, say
    assert [f.text for f in discover(folder)] == ["work rules"]


def test_the_notebook_folder_comes_from_jupyter_session_name(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = project(home)
    monkeypatch.setenv("JPY_SESSION_NAME", str(repo / "analysis" / "notebooks" / "a.ipynb"))
    monkeypatch.chdir(home)
    assert [Path(f.path).name for f in discover()] == ["AGENTS.md", "CLAUDE.md", "rules.md"]


def test_symlinks_a_linked_folder_finds_its_real_project_and_a_linked_file_counts_once(
    home: Path,
) -> None:
    repo = project(home)
    (repo / "analysis" / "CLAUDE.md").unlink()
    (repo / "analysis" / "CLAUDE.md").symlink_to(repo / "AGENTS.md")  # a common set-up
    link = home / "shortcut"
    link.symlink_to(repo / "analysis" / "notebooks")
    found = discover(link)
    assert [Path(f.path).relative_to(home).as_posix() for f in found] == [
        "repo/AGENTS.md",
        "repo/analysis/.qloop/rules.md",
    ]
    (repo / "analysis" / ".qloop" / "rules.md").unlink()
    (repo / "analysis" / ".qloop" / "rules.md").symlink_to(home / "missing.md")
    broken = discover(link)[-1]
    assert broken.problem == "a broken link (its target does not exist)"
    [use] = [u for u in select(broken and [broken], RulesApprovals(home / "a"), "all")]
    assert use.status == "unreadable" and "broken link" in use.describe()


def test_bad_files_are_named_with_the_reason_and_not_sent(home: Path) -> None:
    binary = write(home / "b.md", "x")
    binary.write_bytes(b"\x00\x01rules")
    latin = home / "l.md"
    latin.write_bytes("règles".encode("latin-1"))
    (home / "folder.md").mkdir()
    problems = [read_rules(p, "project").problem for p in (binary, latin, home / "folder.md")]
    assert problems == ["a binary file, not text", "not UTF-8 text", "it is a folder, not a file"]


def test_secrets_in_a_rules_file_are_redacted(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "hunter2-very-secret")
    rules = read_rules(write(home / "AGENTS.md", "login with hunter2-very-secret"), "project")
    assert "hunter2" not in rules.text and "[REDACTED]" in rules.text


def test_rules_are_bounded_most_specific_kept_and_a_cut_is_said(home: Path) -> None:
    repo = project(home)
    write(repo / "AGENTS.md", "general " * 4000)  # 32,000 characters
    found = discover(repo / "analysis" / "notebooks")
    uses = select(found, RulesApprovals(home / "x"), "all")
    assert [u.status for u in uses] == ["cut", "used", "used"]
    assert sum(len(u.sent) for u in uses) <= MAX_RULES_CHARS
    assert "[rules cut here:" in uses[0].sent and str(repo / "AGENTS.md") in uses[0].sent
    assert "cut to fit" in uses[0].describe()
    write(repo / "analysis" / "CLAUDE.md", "specific " * 3000)
    uses = select(discover(repo / "analysis" / "notebooks"), RulesApprovals(home / "x"), "all")
    assert [u.status for u in uses] == ["no room", "cut", "used"]


def test_a_cut_keeps_the_bound_whatever_the_length_of_the_files_path(home: Path) -> None:
    for depth in (1, 12, 60):
        repo = home / "/".join(["a-rather-long-folder-name"] * depth) / "repo"
        (repo / ".git").mkdir(parents=True)
        write(repo / "AGENTS.md", "general " * 4000)
        uses = select(discover(repo), RulesApprovals(home / "x"), "all")
        assert uses[-1].status == "cut"
        assert sum(len(u.sent) for u in uses) <= MAX_RULES_CHARS
        note = uses[-1].sent.rsplit("[rules cut here: ", 1)[1]
        kept = int(note.split(" of ", 1)[0].replace(",", ""))
        assert uses[-1].sent.startswith("general " * (kept // 8)), "the note says what was kept"


def test_a_project_file_needs_approval_by_hash_and_a_changed_one_shows_its_diff(
    home: Path,
) -> None:
    repo = project(home)
    write(home / "user-rules.md", "Answer briefly.")
    found = discover(repo)
    approvals = RulesApprovals.load()
    assert [u.status for u in select(found, approvals, "approved")] == ["used", "unapproved"]
    approvals.approve(found[1])
    again = RulesApprovals.load()  # from the user's own state file
    assert [u.status for u in select(found, again, "approved")] == ["used", "used"]
    assert oct(Path(again.path).stat().st_mode & 0o777) == "0o600"
    write(repo / "AGENTS.md", "Tables in warehouse.* are authoritative.\nNever drop tables.")
    changed = select(discover(repo), again, "approved")[1]
    assert changed.status == "changed" and changed.sent == ""
    assert changed.previous == "Tables in warehouse.* are authoritative."
    diff = diff_lines(changed.previous, changed.file.text)
    assert "+Never drop tables." in diff and not any(d.startswith("-Tables") for d in diff)
    again.decline(changed.file)
    assert select(discover(repo), again, "approved")[1].status == "declined"


def test_the_use_setting(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = project(home)
    write(home / "user-rules.md", "Answer briefly.")
    found = discover(repo)
    approvals = RulesApprovals(home / "none.json")
    assert [u.status for u in select(found, approvals, "user")] == ["used", "off"]
    assert [u.status for u in select(found, approvals, "none")] == ["off", "off"]
    monkeypatch.setenv("QLOOP_RULES", "everything")
    with pytest.raises(RulesError, match="QLOOP_RULES='everything' is not one of approved, all"):
        use_mode()


def test_drift_says_when_a_rules_file_changed_or_went_away(home: Path) -> None:
    rules = write(home / "AGENTS.md", "v1")
    saved = Fingerprint(sources=[SourcePrint(kind="rules", path=str(rules),
                                             sha256=hashlib.sha256(b"v1").hexdigest())])  # fmt: skip
    assert differences(saved, {}) == []
    rules.write_text("v2", "utf-8")
    assert differences(saved, {}) == [f"rules file {rules}: changed since the turn ran"]
    rules.unlink()
    assert differences(saved, {}) == [f"rules file {rules}: not found now"]


# -- the rules are inside the cached prefix ------------------------------------------------------


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server


def look(name: str) -> str:
    """Look at a variable."""
    return name


def test_a_second_turn_reads_the_rules_from_the_cache(api: StandInAPI, home: Path) -> None:
    repo = project(home)
    style = "".join(f"- Column rule {i}: snake_case names, units in the name.\n" for i in range(80))
    write(repo / "AGENTS.md", style)  # with the rules, the prefix reaches Sonnet's 1,024 tokens
    uses = select(discover(repo / "analysis"), RulesApprovals(home / "x"), "all")
    context = TurnContext(rules=uses)
    manager = ConversationManager()
    runtime = ToolRuntime.of([Tool.from_function(look, requires_approval=False)], AutoApprover())
    api.set_script([Reply([text("First.")]), Reply([text("Second.")])])
    with AnthropicModel("claude-sonnet-5-5") as model:
        for prompt in ("one", "two"):
            manager.run_turn(prompt, model=model, runtime=runtime, settings=Settings(),
                             context=context)  # fmt: skip
    first, second = api.requests
    system = first.body["system"]
    assert system[0]["text"] == with_rules(SYSTEM_PROMPT, uses)
    assert "Never write to prod." in system[0]["text"] and "cache_control" in system[0]
    prefix = sum(s.tokens for s in prompt_segments(first.body)[: len(first.body["tools"]) + 1])
    assert first.usage["cache_creation_input_tokens"] >= prefix
    assert second.usage["cache_read_input_tokens"] >= prefix  # tools, system and rules read


def test_records_written_before_the_context_fields_still_load() -> None:
    """The demo notebook's records were written with fingerprints, before ``sources`` and
    ``context`` existed: their digests still verify."""
    import nbformat

    from qloop_kernel.records import load_record

    demo = Path(__file__).parent.parent / "notebooks" / "demo.ipynb"
    saved = [c.metadata["qloop"] for c in nbformat.read(demo, as_version=4).cells
             if "qloop" in c.metadata]  # fmt: skip
    assert saved and all("sources" not in r["fingerprint"] and "context" not in r for r in saved)
    records = [load_record(r) for r in saved]
    assert all(r.fingerprint is not None and r.context is None for r in records)
