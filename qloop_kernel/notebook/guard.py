"""Approval cannot be raised from inside a step.

While an approved step runs, qloop's own commands, settings changes, nested agent cells and tool
registration are refused. After the step, the guard checks that what decides approval — the approver and
its class's ``decide``, the policy and settings, the grants and the tool table — is what it was before;
if anything changed, it is put back and the turn ends with a clear message (the user can still change
these between cells).
"""

from __future__ import annotations

from typing import Any

from ..policy import permissions, pipeline
from ..policy.grants import Grants
from ..policy.permissions import ApprovalPolicy, AutoApprover, PolicyDenier
from ..tools.runtime import ToolRuntime
from .approval import ApprovalCard, CardApprover


class StepRunning(Exception):
    """A qloop command was called from inside an agent step."""


class StepGuard:
    """Wraps each tool execution of one turn (``ToolRuntime.guard``)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self._before: dict[str, Any] = {}
        self._originals: list[tuple[Any, str, Any]] = []
        self._grants: Any = None

    def before(self, runtime: ToolRuntime) -> None:
        self._before = self._state(runtime)
        self._remember(runtime)
        self.agent.step_running = True
        self.agent.session.user_tools.freeze()

    def after(self, runtime: ToolRuntime) -> str | None:
        """None when nothing that decides approval changed; otherwise what changed."""
        self.agent.step_running = False
        self.agent.session.user_tools.thaw()
        now = self._state(runtime)
        changed = [name for name, value in now.items() if self._before.get(name) != value]
        if not changed:
            return None
        self._restore(runtime)
        return (
            "the step changed how approval works ("
            + ", ".join(changed)
            + "); the turn was stopped. Approval settings can only be changed by you, between cells"
        )

    def _restore(self, runtime: ToolRuntime) -> None:
        """Put back what the step replaced, so later cells ask as before."""
        for owner, name, value in self._originals:
            setattr(owner, name, value)
        runtime.grants.restore(self._grants)
        runtime.policy = self._policy
        self.agent.manager.settings = self._settings
        self.agent.base_settings = self._base

    def _remember(self, runtime: ToolRuntime) -> None:
        owners = [(CardApprover, "decide"), (ApprovalCard, "wait"), (ApprovalCard, "_decide"),
                  (AutoApprover, "decide"), (PolicyDenier, "decide"), (type(runtime), "run"),
                  (type(runtime), "_execute"), (type(runtime), "_permit"),
                  (type(runtime), "pipeline"), (type(runtime.approver), "decide"),
                  (ApprovalPolicy, "verdict"), (Grants, "covering"),
                  (pipeline.PermissionPipeline, "decide"), (pipeline.PermissionPipeline, "verdict"),
                  (pipeline.PermissionPipeline, "covering")]  # fmt: skip
        self._originals = [(o, n, o.__dict__[n]) for o, n in owners if n in o.__dict__]
        self._originals.append((pipeline, "combined_verdict", pipeline.combined_verdict))
        self._originals += [(permissions, name, getattr(permissions, name))
                            for name in ("policy_approver", "policy_verdict")]  # fmt: skip
        self._grants = runtime.grants.snapshot()
        self._policy = runtime.policy
        self._settings = self.agent.manager.settings
        self._base = self.agent.base_settings

    def _state(self, runtime: ToolRuntime) -> dict[str, Any]:
        approver = runtime.approver
        manager = self.agent.manager
        return {
            "the approver": (id(approver), type(approver), dict(vars(approver))),
            "the approver's decide": getattr(type(approver), "decide", None),
            "the approval card": (CardApprover.decide, ApprovalCard.wait, ApprovalCard._decide),
            "the policies": (  # read from the module: a step may rebind its functions
                permissions.policy_approver,
                permissions.policy_verdict,
                AutoApprover.decide,
                PolicyDenier.decide,
                ApprovalPolicy.verdict,
            ),
            "the permission pipeline": (
                pipeline.PermissionPipeline.decide,
                pipeline.PermissionPipeline.verdict,
                pipeline.PermissionPipeline.covering,
                pipeline.combined_verdict,
            ),
            "the policy": runtime.policy,
            "the grants": (
                id(runtime.grants),
                runtime.grants.snapshot(),
                runtime.grants is self.agent.grants,
                Grants.covering,
            ),
            "the settings": manager.settings.model_dump_json(),
            "the kernel's policy": self.agent.base_settings.model_dump_json(),
            "the tools": _tool_table(runtime),
            "the registered tools": tuple(
                (t.name, t.requires_approval, id(t))
                for t in self.agent.session.user_tools.tools()
            ),
            "the guard": (
                type(runtime).run,
                type(runtime)._execute,
                type(runtime)._permit,
                type(runtime).pipeline,
                runtime.guard is self,
            ),
        }


def _tool_table(runtime: ToolRuntime) -> tuple[Any, ...]:
    return tuple(
        (
            name,
            id(tool),
            tool.requires_approval,
            id(tool.func),
            tool.editable_field,
            tool.always_ask,
        )
        for name, tool in sorted(runtime.tools.items())
    )
