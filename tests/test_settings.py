"""Settings from traitlets config and the environment, and the %agent option parser."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from traitlets.config import Config

from qloop_kernel.notebook.magic import QloopAgent, _parser, base_settings, split_options


def test_traitlets_config_sets_defaults(monkeypatch):
    monkeypatch.delenv("QLOOP_MODEL", raising=False)
    monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
    config = Config({"QloopAgent": {"model": "claude-haiku-4-5", "max_turns": 7, "max_cost": 0.5}})
    settings = base_settings(QloopAgent(config=config))
    assert (settings.model, settings.max_turns, settings.max_cost) == ("claude-haiku-4-5", 7, 0.5)
    assert settings.approve is None and settings.timeout is None


def test_environment_sets_model_policy_and_price(monkeypatch):
    monkeypatch.setenv("QLOOP_MODEL", "claude-opus-4-6")
    monkeypatch.setenv("QLOOP_APPROVAL", "auto")
    monkeypatch.setenv("QLOOP_PRICE", "2, 10")
    settings = base_settings(QloopAgent())
    assert settings.model == "claude-opus-4-6" and settings.approve == "auto"
    assert settings.price == (2.0, 10.0)


@pytest.mark.parametrize(("name", "value"), [("QLOOP_APPROVAL", "sometimes"), ("QLOOP_PRICE", "3")])
def test_bad_environment_is_a_usage_error(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=name):
        base_settings(QloopAgent())


def test_leading_options_are_split_from_a_verbatim_prompt():
    options, prompt = split_options(
        "--approve auto --new --max-turns 3 what's in df? --not-an-option"
    )
    assert options == ["--approve", "auto", "--new", "--max-turns", "3"]
    assert prompt == "what's in df? --not-an-option"
    args = _parser().parse_args(options)
    assert (args.approve, args.max_turns, args.new) == ("auto", 3, True)
    assert split_options("--timeout=5 plot it") == (["--timeout=5"], "plot it")
    with pytest.raises(UsageError, match="invalid choice"):
        _parser().parse_args(["--approve", "yes"])


def test_settings_updates_are_validated():
    from pydantic import ValidationError

    from qloop_kernel.settings import Settings

    assert Settings().updated(max_turns="5", approve="auto").max_turns == 5
    with pytest.raises(ValidationError):
        Settings().updated(max_cost=-1)


def test_agent_set_price_and_allow_change_the_session(monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("qloop_kernel")
    try:
        shell.run_line_magic("agent", "set max_turns 4")
        shell.run_line_magic("agent", "price 2 8")
        shell.run_line_magic("agent", "allow run_code")
        with pytest.raises(UsageError, match="max_turns"):
            shell.run_line_magic("agent", "set max_turns zero")
        manager = shell.magics_manager.registry["AgentMagics"].agent.manager
        assert manager.settings.max_turns == 4 and manager.settings.price == (2.0, 8.0)
        grants = shell.magics_manager.registry["AgentMagics"].agent.grants
        assert [(g.tool, g.risk, g.scope) for g in grants] == [("run_code", "write", "session")]
        assert "max_turns = 4" in capsys.readouterr().out
    finally:
        shell.extension_manager.unload_extension("qloop_kernel")
        InteractiveShell.clear_instance()
