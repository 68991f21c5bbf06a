"""The %%agent options are declared once (notebook/options.py): the parser, %agent help, the Run All
scanner and the prompt readers of qloop show and export, the QloopAgent config traits and the Settings
fields all follow the one table."""

from __future__ import annotations

import pytest
from traitlets import Float
from traitlets.config import Config

from qloop_kernel.notebook import options
from qloop_kernel.notebook.commands import help_text
from qloop_kernel.notebook.magic import QloopAgent, _parser, base_settings
from qloop_kernel.notebook.options import OPTIONS, Option, agent_prompt
from qloop_kernel.settings import SETTABLE, Settings

_NEW = Option("--temperature", "temperature", "sampling temperature", "T", float, config=True)


def test_a_new_option_reaches_the_parser_the_help_the_scanner_and_the_config_traits():
    table = (*OPTIONS, _NEW)
    args = options.parser(table).parse_args(["--temperature", "0.5"])
    assert args.temperature == 0.5
    assert options.split_options("--temperature 0.5 plot df", table) == (
        ["--temperature", "0.5"],
        "plot df",
    )
    assert any(line.lstrip().startswith("--temperature T") for line in options.help_lines(table))
    assert "temperature" in options.setting_names(table)
    agent = options.config_class(table)
    trait = agent.class_traits(config=True)["temperature"]
    assert isinstance(trait, Float)
    assert agent(config=Config({"QloopAgent": {"temperature": 0.2}})).temperature == 0.2  # type: ignore[attr-defined]


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.config], ids=lambda o: o.flag)
def test_every_default_setting_option_is_a_settings_field_and_a_config_trait(option: Option):
    assert option.dest in Settings.model_fields
    assert option.dest in SETTABLE  # `%agent set NAME VALUE` takes it too
    assert option.dest in QloopAgent.class_traits(config=True)


def test_the_config_traits_are_the_options_and_the_mcp_servers():
    assert set(QloopAgent.class_traits(config=True)) == {*options.setting_names(), "mcp_servers"}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flag)
def test_every_option_is_in_help_and_read_by_the_queued_cell_scanner(option: Option):
    assert f"\n  {option.flag}" in help_text()
    value = (
        option.choices[-1] if option.choices else {int: "3", float: "0.5"}.get(option.value, "df")
    )
    typed = [option.flag, value] if option.takes_value else [option.flag]
    source = f"%%agent {' '.join(typed)} --new summarize   the sales\nby month"
    assert agent_prompt(source) == ([*typed, "--new"], "summarize   the sales\nby month")
    _parser().parse_args(typed)  # the magic's parser takes the same words


def test_a_queued_cell_with_a_platform_and_attachments_is_read_as_the_magic_reads_it():
    words, prompt = agent_prompt("%%agent --provider bedrock --with df,@abc plot it\n")
    assert (words, prompt) == (["--provider", "bedrock", "--with", "df,@abc"], "plot it")


def test_config_sets_the_platform_for_every_cell(monkeypatch):
    monkeypatch.delenv("QLOOP_PROVIDER", raising=False)
    settings = base_settings(QloopAgent(config=Config({"QloopAgent": {"provider": "vertex"}})))
    assert settings.provider == "vertex"
