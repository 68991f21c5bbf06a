"""Approval cannot be raised from inside a step.

While an approved step runs, qloop's own commands, settings changes, nested agent cells and tool
registration are refused. After the step, the guard checks that what decides approval is what it was
before; if anything changed, it is put back and the turn ends with a clear message (the user can still
change these between cells).

What decides approval is found, not listed: every function, class (with its methods) and attribute of
every loaded module of ``qloop_kernel.policy`` (the policies, the risk classes and their tables, grants,
the admin floor, the pipeline), and of the modules the runtime, its approver and the card live in;
the constant tables (names in capitals) are compared by content too. A policy function added later is
protected without naming it here. Beside them, the objects: the session's approver, policy, grants,
settings and tool table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from ..policy.grants import Grant, Grants, NotebookGrants
from ..tools.runtime import ToolRuntime
from .approval import CardApprover

if TYPE_CHECKING:
    from ..conversation import ConversationManager
    from ..settings import Settings
    from .session import KernelSession

POLICY_PACKAGE = "qloop_kernel.policy"
# How a change in each kind of module is named in the message a person reads.
LABELS = {POLICY_PACKAGE: "the policies", ToolRuntime.__module__: "the guard",
          CardApprover.__module__: "the approval card"}  # fmt: skip
_CONTAINERS = (dict, list, set)


class GuardedAgent(Protocol):
    """What the guard reads and puts back of the kernel's agent (``agent.KernelAgent``, which
    imports this module: the guard knows it by this protocol)."""

    step_running: bool  # qloop's commands are refused while it is True
    base_settings: Settings  # the kernel's policy

    @property
    def session(self) -> KernelSession: ...

    @property
    def manager(self) -> ConversationManager: ...

    @property
    def grants(self) -> Grants: ...


class StepRunning(Exception):
    """A qloop command was called from inside an agent step."""


@dataclass(frozen=True)
class _Held:
    """One module's or class's attributes as they were before the step, and the content of its
    constant tables (names in capitals), which the step could change in place."""

    owner: ModuleType | type
    attributes: dict[str, object]
    tables: dict[str, object]

    def changed(self) -> bool:
        now = vars(self.owner)
        if now.keys() != self.attributes.keys() and (
            isinstance(self.owner, type) or self.attributes.keys() - now.keys()
        ):  # a class's method added (one may shadow a base's), or a name removed
            return True
        found = any(now.get(name, _MISSING) is not value for name, value in self.attributes.items())
        return found or any(_content(now[n]) != c for n, c in self.tables.items())

    def restore(self) -> None:
        if isinstance(self.owner, type):
            for added in set(vars(self.owner)) - self.attributes.keys():
                delattr(self.owner, added)
        for name, value in self.attributes.items():
            if vars(self.owner).get(name, _MISSING) is not value:
                setattr(self.owner, name, value)
        for name, content in self.tables.items():
            _refill(self.attributes[name], content)


_MISSING = object()


def _content(value: object) -> object:
    """A table's content (a copy)."""
    return dict(value) if isinstance(value, dict) else list(value)  # type: ignore[call-overload]


def _refill(table: object, content: object) -> None:
    """Put a table's content back in place (the modules hold the table object itself)."""
    if isinstance(table, dict | list | set) and isinstance(content, dict | list):
        table.clear()
        if isinstance(table, list):
            table.extend(content)
        else:
            table.update(content)


def approval_modules(*objects: object) -> list[ModuleType]:
    """Every loaded module of the policy package, and the modules ``objects``' classes (and their
    bases) and the card are defined in."""
    names = {n for n in sys.modules if n == POLICY_PACKAGE or n.startswith(POLICY_PACKAGE + ".")}
    names.add(CardApprover.__module__)
    for found in objects:
        names.update(
            c.__module__ for c in type(found).__mro__ if c.__module__.startswith("qloop_kernel")
        )
    return [sys.modules[n] for n in sorted(names) if isinstance(sys.modules.get(n), ModuleType)]


def snapshot(modules: list[ModuleType]) -> list[_Held]:
    """The attributes of ``modules`` and of the classes they define, as they are now."""
    held: list[_Held] = []
    for module in modules:
        attributes = dict(vars(module))
        tables = {n: _content(v) for n, v in attributes.items()
                  if n.isupper() and isinstance(v, _CONTAINERS)}  # fmt: skip
        held.append(_Held(module, attributes, tables))
        held += [_Held(v, dict(vars(v)), {}) for v in attributes.values()
                 if isinstance(v, type) and v.__module__ == module.__name__]  # fmt: skip
    return held


def _label(owner: ModuleType | type) -> str:
    module = owner.__name__ if isinstance(owner, ModuleType) else owner.__module__
    for prefix, label in LABELS.items():
        if module == prefix or module.startswith(prefix + "."):
            return label
    return "the approvers"


class StepGuard:
    """Wraps each tool execution of one turn (``ToolRuntime.guard``)."""

    def __init__(self, agent: GuardedAgent) -> None:
        self.agent = agent
        self._before: dict[str, object] = {}
        self._held: list[_Held] = []
        self._grants: tuple[tuple[Grant, ...], NotebookGrants] | None = None

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
        changed += self._code_changes()
        if not changed:
            return None
        self._restore(runtime)
        return (
            "the step changed how approval works ("
            + ", ".join(dict.fromkeys(changed))
            + "); the turn was stopped. Approval settings can only be changed by you, between cells"
        )

    def _code_changes(self) -> list[str]:
        """What the step rebound, replaced or added in the modules and classes that decide."""
        return [_label(h.owner) for h in self._held if h.changed()]

    def _restore(self, runtime: ToolRuntime) -> None:
        """Put back what the step replaced, so later cells ask as before."""
        for held in self._held:
            if held.changed():
                held.restore()
        if self._grants is not None:
            runtime.grants.restore(self._grants)
        runtime.policy = self._policy
        self.agent.manager.settings = self._settings
        self.agent.base_settings = self._base

    def _remember(self, runtime: ToolRuntime) -> None:
        self._held = snapshot(approval_modules(runtime, runtime.approver, self))
        self._grants = runtime.grants.snapshot()
        self._policy = runtime.policy
        self._settings = self.agent.manager.settings
        self._base = self.agent.base_settings

    def _state(self, runtime: ToolRuntime) -> dict[str, object]:
        """The objects that decide: the session's approver, policy, grants, settings and tools."""
        approver = runtime.approver
        manager = self.agent.manager
        return {
            "the approver": (id(approver), type(approver), dict(vars(approver))),
            "the policy": runtime.policy,
            "the grants": (
                id(runtime.grants),
                runtime.grants.snapshot(),
                runtime.grants is self.agent.grants,
                type(runtime.grants) is Grants,
            ),
            "the settings": manager.settings.model_dump_json(),
            "the kernel's policy": self.agent.base_settings.model_dump_json(),
            "the tools": _tool_table(runtime),
            "the registered tools": tuple(
                (t.name, t.requires_approval, id(t)) for t in self.agent.session.user_tools.tools()
            ),
            "the guard": (type(runtime), runtime.guard is self),
        }


def _tool_table(runtime: ToolRuntime) -> tuple[object, ...]:
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
