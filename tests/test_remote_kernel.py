"""A kernel started where the API variables did not follow (a kernel gateway, Enterprise Gateway, a
JupyterHub spawner): the agent says which variable is missing and how to pass it on, and works once
the kernel sees it."""

from __future__ import annotations

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text
from tests.kernel_client import CellFailed, LabKernel

pytestmark = pytest.mark.kernel
GATEWAY_SETTINGS = ("KG_ENV_PROCESS_WHITELIST", "EG_ENV_PROCESS_WHITELIST")


def gateway_env() -> dict[str, str | None]:
    """The kernel's environment as a gateway starts it: none of the API variables."""
    env: dict[str, str | None] = dict.fromkeys(
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "QLOOP_PROVIDER")
    )
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def failure(lab: LabKernel, cell: str, cell_id: str) -> str:
    with pytest.raises(CellFailed) as failed:
        lab.run(cell, cell_id=cell_id)
    return str(failed.value)


def test_a_kernel_without_the_key_names_it_the_gateway_settings_and_agent_key(
    api: StandInAPI,
) -> None:
    api.reset()
    with LabKernel(gateway_env()) as lab:
        lab.run("%load_ext qloop_kernel")
        message = failure(lab, "%%agent\nSay hi.", cell_id="cell")
        assert "ANTHROPIC_API_KEY is not set in the kernel's environment" in message
        assert all(name in message for name in GATEWAY_SETTINGS)
        assert "remote kernel" in message and "`%agent key`" in message
        assert api.requests == []  # nothing was sent without a key
        # Once the variables reach the kernel (passed on by the gateway, or typed), it works.
        lab.run(
            "import os\n"
            f"os.environ['ANTHROPIC_BASE_URL'] = {api.base_url!r}\n"
            f"os.environ['ANTHROPIC_API_KEY'] = {api.environment()['ANTHROPIC_API_KEY']!r}"
        )
        api.set_script([Reply([text("hello from the stand-in")])])
        cell = lab.execute("%%agent --approve auto\nSay hi.", cell_id="cell")
        assert lab.complete(cell, 60)["content"]["status"] == "ok"
        assert "hello from the stand-in" in lab.text(cell)
        assert len(api.requests) == 1


def test_a_kernel_without_the_base_url_of_a_compatible_server_says_so(api: StandInAPI) -> None:
    with LabKernel(gateway_env()) as lab:
        lab.run("%load_ext qloop_kernel")
        message = failure(lab, "%%agent --provider compatible\nSay hi.", cell_id="cell")
        assert "ANTHROPIC_BASE_URL is not set in the kernel's environment" in message
        assert all(name in message for name in GATEWAY_SETTINGS)
        assert "%env ANTHROPIC_BASE_URL=" in message and "`%agent key`" in message
