"""The kernel session: one per shell, made by ``%load_ext``, and the owner of the per-kernel state."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from qloop_kernel.errors import ToolFailure
from qloop_kernel.notebook.code import CodeRunner, session_output_limit
from qloop_kernel.notebook.ledger import cell_ledger
from qloop_kernel.notebook.session import KernelSession, session_for, undo_log
from qloop_kernel.notebook.tools import session_private_variables


class _Shell:
    """Stands in for a second kernel's shell: sessions are told apart by their shell."""

    def __init__(self) -> None:
        self.user_ns: dict[str, object] = {}


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    monkeypatch.setenv("QLOOP_WARMUP", "0")
    shell = InteractiveShell.instance()
    shell.run_line_magic("reload_ext", "qloop_kernel")
    return shell


def test_each_shell_has_one_session_holding_its_undo_log() -> None:
    first, second = _Shell(), _Shell()
    assert session_for(first) is session_for(first)
    assert session_for(first) is not session_for(second)
    assert undo_log(first) is session_for(first).undo
    assert undo_log(first) is not undo_log(second)
    session_for(first).approved_ahead.add("digest")
    assert session_for(second).approved_ahead == set()


def test_the_load_makes_the_session_the_magics_and_the_ledger_use(shell: InteractiveShell) -> None:
    session = session_for(shell)
    magics = shell.magics_manager.registry["AgentMagics"]
    assert magics.session is session and session.config is magics.config_obj
    shell.run_cell("ledger_value = 1", cell_id="cell-a")
    assert ("cell-a", "ledger_value = 1") in session.cells_run
    assert cell_ledger(session).defined["ledger_value"].cell_id == "cell-a"
    # A reloaded extension keeps the kernel's session: the cells run before are still known, and
    # the hook that notes them is not registered twice.
    shell.run_line_magic("reload_ext", "qloop_kernel")
    assert session_for(shell) is session
    assert shell.magics_manager.registry["AgentMagics"].session is session
    before = len(session.cells_run)
    shell.run_cell("ledger_value = 2", cell_id="cell-b")
    assert len(session.cells_run) == before + 1


def test_the_agent_is_found_through_the_session(shell: InteractiveShell) -> None:
    session: KernelSession = session_for(shell)
    agent = shell.magics_manager.registry["AgentMagics"].agent
    assert session.agent is agent and agent.session is session
    assert agent.undo is session.undo
    assert session.watch is None  # no turn runs
    shell.run_line_magic("agent", "set max_output_chars 2000")
    assert session_output_limit(shell) == 2000
    assert CodeRunner(shell).run_code  # the code runner reads the same session
    shell.user_ns["token_value"] = "s3cret-value"
    shell.run_line_magic("agent", "private token_value")
    assert "token_value" in session_private_variables(shell).names


def test_the_built_in_tools_are_built_once_and_bound_to_each_turn(shell: InteractiveShell) -> None:
    agent = shell.magics_manager.registry["AgentMagics"].agent
    settings = agent.manager.settings
    first = {t.name: t for t in agent.tools(settings)}
    second = {t.name: t for t in agent.tools(settings.updated(code_timeout=1))}
    built_in = ("list_variables", "inspect_variable", "run_code", "notebook_history")
    assert all(first[name] is second[name] for name in built_in)
    assert first["run_code"].schema() is second["run_code"].schema()
    assert "read_notebook" not in second  # nothing shows this console's notebook
    # The turn's own limit reaches the code it runs.
    run_code = second["run_code"]
    with pytest.raises(ToolFailure, match="the 1 s limit"):
        run_code.call(run_code.input_model(code="import time; time.sleep(5)"))


def test_registered_tools_belong_to_the_kernel_session(shell: InteractiveShell) -> None:
    import qloop_kernel

    session = session_for(shell)

    def revenue(region: str) -> str:
        """Revenue of a region."""
        return region

    try:
        qloop_kernel.tool(revenue, read_only=True)
        assert [t.name for t in session.user_tools.tools()] == ["revenue"]
        agent = shell.magics_manager.registry["AgentMagics"].agent
        assert "revenue" in {t.name for t in agent.tools(agent.manager.settings)}
        assert session_for(_Shell()).user_tools.tools() == []  # another kernel's are its own
    finally:
        session.user_tools.clear()


def test_the_shell_holds_its_session_which_makes_the_agent_for_every_caller(
    shell: InteractiveShell,
) -> None:
    session = session_for(shell)
    assert shell.qloop_session is session  # type: ignore[attr-defined]
    agent = session.kernel_agent()
    assert session.kernel_agent() is agent and agent.session is session
    assert shell.magics_manager.registry["AgentMagics"].agent is agent
    # A reloaded extension keeps the session and makes its agent anew from the new configuration.
    shell.run_line_magic("reload_ext", "qloop_kernel")
    assert session_for(shell) is session and session.agent is None
    again = shell.magics_manager.registry["AgentMagics"].agent
    assert again is not agent and session.agent is again


def test_a_session_without_the_extension_makes_no_agent() -> None:
    with pytest.raises(RuntimeError, match="not loaded"):
        session_for(_Shell()).kernel_agent()


def test_the_agents_steps_belong_to_the_session_it_was_given(shell: InteractiveShell) -> None:
    session = session_for(shell)
    agent = shell.magics_manager.registry["AgentMagics"].agent
    run_code = {t.name: t for t in agent.tools(agent.manager.settings)}["run_code"]
    other = KernelSession(shell)
    shell.qloop_session = other  # type: ignore[attr-defined]
    try:  # whatever the shell holds now, the agent's runner keeps the session it was passed
        run_code.call(run_code.input_model(code="given_value = 41"))
    finally:
        shell.qloop_session = session  # type: ignore[attr-defined]
    assert shell.user_ns["given_value"] == 41
    assert session.undo.latest is not None and other.undo.latest is None
