"""%agent lines: mistyped sub-commands are refused with a suggestion, tasks still run, and
``%config QloopAgent.*`` reaches the running kernel."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from qloop_kernel.notebook.cell import AgentError


@pytest.fixture
def shell(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    for name in ("QLOOP_MODEL", "QLOOP_APPROVAL", "QLOOP_ASK_WITHOUT_RECORD"):
        monkeypatch.delenv(name, raising=False)
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("qloop_kernel")
    try:
        yield shell
    finally:
        shell.extension_manager.unload_extension("qloop_kernel")
        InteractiveShell.clear_instance()


def _magics(shell):
    return shell.magics_manager.registry["AgentMagics"]


@pytest.mark.parametrize(
    ("line", "suggestion"),
    [
        ("stauts", "did you mean `%agent status`?"),
        ("modles", "did you mean `%agent models`?"),
        ("disallow run_code", "did you mean `%agent revoke run_code`?"),
        ("alow run_code write", "did you mean `%agent allow run_code write`?"),
        ("set max_turns", "%agent set: wrong number of words. Usage: %agent set NAME VALUE"),
        ("allow", "Usage: %agent allow TOOL [CLASS|all] [session|notebook]"),
        ("price 3 15 1", "%agent price: wrong number of words"),
        ("revoke run_code write", "Usage: %agent revoke TOOL|all"),
    ],
)
def test_mistyped_sub_commands_are_refused_with_a_suggestion(shell, line, suggestion):
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("agent", line)
    assert suggestion in str(info.value)
    assert not isinstance(info.value, AgentError)  # refused before anything is sent
    assert _magics(shell).agent.manager.messages == []


@pytest.mark.parametrize(
    "line", ["what's in df?", "reset the index", "status of the merge", "summarize", "help me plot"]
)
def test_one_line_tasks_still_go_to_the_agent(shell, line):
    # A plain shell sends no cell metadata: a line handled as a task stops at that check.
    with pytest.raises(AgentError, match="no cell metadata"):
        shell.run_line_magic("agent", line)


def test_help_lists_every_sub_command_with_examples(shell, capsys):
    from qloop_kernel.notebook.commands import COMMANDS

    shell.run_line_magic("agent", "help")
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"%agent {name}" in out
    examples = out.split("examples:")[1]
    assert "%agent what's in df?" in examples and "%agent revoke run_code" in examples
    assert "%config QloopAgent.model" in out


def test_config_changes_reach_the_running_kernel(shell, capsys):
    agent = _magics(shell).agent  # made before the change: it must follow it
    shell.run_line_magic("config", "QloopAgent.model = 'claude-haiku-4-5'")
    shell.run_line_magic("config", "QloopAgent.max_turns = 3")
    assert agent.manager.settings.model == "claude-haiku-4-5"
    assert agent.manager.settings.max_turns == 3
    assert agent.base_settings.model == "claude-haiku-4-5"
    shell.run_line_magic("agent", "status")
    assert "model=claude-haiku-4-5" in capsys.readouterr().out
    shell.run_line_magic("config", "")
    assert "QloopAgent" in capsys.readouterr().out


def test_config_unset_falls_back_to_the_environment(shell, monkeypatch):
    agent = _magics(shell).agent
    monkeypatch.setenv("QLOOP_MODEL", "claude-opus-4-6")
    shell.run_line_magic("config", "QloopAgent.model = 'claude-haiku-4-5'")
    assert agent.manager.settings.model == "claude-haiku-4-5"  # config wins over QLOOP_MODEL
    shell.run_line_magic("config", "QloopAgent.model = None")
    assert agent.manager.settings.model == "claude-opus-4-6"


def test_status_and_reset_count_in_words(shell, capsys):
    shell.run_line_magic("agent", "status")
    assert ": 0 turns, 0 model calls\n" in capsys.readouterr().out
    shell.run_line_magic("agent", "allow run_code")
    capsys.readouterr()
    shell.run_line_magic("agent", "reset")
    out = capsys.readouterr().out
    assert (
        "cleared 0 messages, 0 replayed turns and the totals of 0 turns from the conversation"
        in out
    )
    assert "and 1 grant (run_code" in out and "(s)" not in out
