"""A non-default platform through a real kernel: Bedrock's wire format, an approval clicked.

The kernel's environment holds only what a Bedrock user sets (region, a Bedrock API key, the
endpoint), no ANTHROPIC_API_KEY; the answers come in the AWS event-stream framing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qloop_kernel.testing import Reply, text, tool_use
from qloop_kernel.testing.platforms import PlatformStandIn
from tests.agent_outputs import saved_record
from tests.kernel_client import CellFailed, LabKernel

pytestmark = pytest.mark.kernel
TOKEN = "bedrock-key-for-tests"


@pytest.fixture(scope="module")
def bedrock() -> Iterator[PlatformStandIn]:
    with PlatformStandIn(platform="bedrock", token=TOKEN) as server:
        yield server


def bedrock_env(server: PlatformStandIn, **extra: str) -> dict[str, str]:
    env = server.environment()
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AWS_PROFILE"):
        env.pop(name, None)
    env.update(
        AWS_REGION="us-east-1",
        AWS_BEARER_TOKEN_BEDROCK=TOKEN,
        ANTHROPIC_BEDROCK_BASE_URL=server.base_url,
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE="/nonexistent/aws-config",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent/aws-credentials",
        **extra,
    )
    return env


def test_a_bedrock_turn_in_a_kernel_asks_and_runs_the_approved_step(
    bedrock: PlatformStandIn,
) -> None:
    bedrock.reset([
        Reply([text("Setting it."), tool_use("run_code", {"code": "answer = 6 * 7"})]),
        Reply([text("answer is 42.")]),
    ])  # fmt: skip
    with LabKernel(bedrock_env(bedrock)) as lab:
        lab.run("%load_ext qloop_kernel")
        prompt = "%%agent --provider bedrock --model claude-sonnet-4-6\nSet answer."
        cell = lab.execute(prompt, cell_id="bedrock-cell")
        approve = lab.wait_for_button("Approve", parent=cell)
        lab.click(approve)
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
        assert lab.run("print(answer)").strip() == "42"
        record = saved_record(lab, cell)
        lab.run("del answer")
        again = lab.execute(prompt, cell_id="bedrock-cell", metadata={"qloop": record})
        lab.click(lab.wait_for_button("Approve", parent=again))  # the replay's one card
        assert lab.complete(again, 60)["content"]["status"] == "ok"
        assert lab.run("print(answer)").strip() == "42"  # replayed, no model asked
    assert record["tool_calls"][0]["input"]["code"] == "answer = 6 * 7"
    paths = {r.path for r in bedrock.requests}
    assert paths == {"/model/anthropic.claude-sonnet-4-6/invoke-with-response-stream"}
    assert [r.status for r in bedrock.requests] == [200, 200]  # the replay asked no model


def test_a_missing_platform_setting_is_one_line_naming_it(bedrock: PlatformStandIn) -> None:
    env = bedrock_env(bedrock)
    env.pop("CLOUD_ML_REGION", None)
    with LabKernel(env) as lab:
        lab.run("%load_ext qloop_kernel")
        with pytest.raises(CellFailed) as failed:
            lab.run("%%agent --provider vertex --fresh\nSay hi.")
        assert "CLOUD_ML_REGION" in str(failed.value)
        with pytest.raises(CellFailed) as failed:
            lab.run("%%agent --provider azure\nSay hi.")
        assert "--provider" in str(failed.value) and "bedrock" in str(failed.value)
        lab.run("%agent set provider bedrock")
        assert "provider=bedrock" in lab.run("%agent status")
