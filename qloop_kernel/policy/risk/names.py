"""What one analysis records and knows as it reads the code top to bottom, the base of the walk: its
findings, the scopes it is in, what each name holds (a module, a string, what made its value, the
names whose objects it holds), and the user-namespace names the code may change, which become the
``may_change`` of the :class:`~.assessment.Assessment`. A name bound once, outside any branch, holds
something known; any other binding leaves it one of several things."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from typing import Literal

from .assessment import Assessment, Effect, Reason, Risk, most_severe, severity
from .lookup import _module_state_effect
from .nodes import _LITERALS, _describe, _is_string_expr, _root_name
from .scopes import _is_history_name, _source_roots, _target_names
from .strings import _PLACEHOLDER
from .tables import ASSUMED_MODULES, BUILTINS, IPYTHON_NAMES, UNCHECKED


@dataclass
class _Scope:
    kind: Literal["function", "class", "comprehension"]
    local: set[str]
    declared_global: set[str] = field(default_factory=set)
    params: frozenset[str] = frozenset()
    mutates_params: bool = False  # the body changes an object passed to it
    branch_depth: int = 0  # inside how many branches of this scope's own code
    serial: int = 0


@dataclass
class _Bindings:
    """What the analysis knows about names bound by this code, as it reads it top to bottom."""

    created: set[str] = field(default_factory=set)
    aliases: dict[str, str | None] = field(default_factory=dict)  # None: bound to several things
    modules: set[str] = field(default_factory=set)  # qualified names that are whole modules
    kinds: dict[str, str] = field(default_factory=dict)  # name -> what made its value
    strings: dict[str, ast.expr] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    bindings: dict[str, int] = field(default_factory=dict)  # how often each scope binds a name
    maybe_module: set[str] = field(default_factory=set)  # may hold a module or a function of one
    param_mutators: set[str] = field(default_factory=set)  # functions that change their arguments
    refers: dict[str, set[str]] = field(
        default_factory=dict
    )  # name -> names whose objects it holds


class _TooDeep(Exception):
    pass


class _Names(ast.NodeVisitor):
    """What one analysis has found, and what it knows of names as it reads top to bottom."""

    def __init__(self, existing: Container[str]) -> None:
        self.existing = existing
        self.reasons: dict[tuple[int, Risk, str], Reason] = {}
        self.changed: set[str] = set()
        self.unbounded = False
        self.names = _Bindings()
        self.scopes: list[_Scope] = []
        self.mutating_lambdas: set[int] = set()
        self.branch_depth = 0  # inside how many branches of the module's own code
        self.scope_count = 0
        self.line_offset = 0
        self.magic_depth = 0

    # -- recording ---------------------------------------------------------------------------------

    def note(self, node: ast.AST | int, effect: Effect, text: str | None = None) -> None:
        """Record a finding on a node's line; unknown findings leave the changed names unbounded."""
        if effect.risk == "read":
            return
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        reason = Reason(line + self.line_offset, effect.risk, text or effect.text)
        self.reasons.setdefault((reason.line, reason.risk, reason.text), reason)
        if effect.risk == "unknown":
            self.unbounded = True

    def assessment(self) -> Assessment:
        reasons = tuple(sorted(self.reasons.values(), key=lambda r: (r.line, -severity(r.risk))))
        may_change = None if self.unbounded else frozenset(self.changed)
        return Assessment(most_severe(r.risk for r in reasons), reasons, may_change)

    # -- names and scopes --------------------------------------------------------------------------

    def is_user_name(self, name: str) -> bool:
        """Whether a name here is a user-namespace name (not a local of a function or class)."""
        for depth, scope in enumerate(reversed(self.scopes)):
            if scope.kind == "class" and depth > 0:
                continue  # a class body is not an enclosing scope of its methods
            if name in scope.declared_global:
                return True
            if name in scope.local:
                return False
        return True

    def exists(self, name: str) -> bool:
        """Whether a user name held a value before this code ran (and this code did not make it)."""
        if name in self.names.created or _is_history_name(name):
            return False
        return name in self.existing and name not in IPYTHON_NAMES

    def shadowed(self, name: str) -> bool:
        return (
            name in self.names.created
            or not self.is_user_name(name)
            or (name in self.existing and name not in IPYTHON_NAMES)
        )

    def resolve(self, node: ast.expr) -> str | None:
        """The qualified name an expression refers to (``os.system`` for ``o.system``), if known."""
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def resolve_name(self, name: str) -> str | None:
        if name in self.names.aliases:
            return self.names.aliases[name]
        assumed = self.assumed_module(name)
        if assumed is not None:
            return assumed  # imported by an earlier cell, under its usual name
        if self.shadowed(name) or name not in BUILTINS:
            return None
        return f"builtins.{name}"

    def bind(
        self, name: str, node: ast.AST, value: ast.expr | None, target: str | None = None
    ) -> None:
        """A name is (re)bound: note the write or the overwrite, and track what it now holds."""
        self.track(name, value, target)
        if not self.is_user_name(name):
            return
        self.changed.add(name)
        if self.exists(name):
            self.note(node, Effect("destructive", ""), f"overwrites {name}, which exists")
        elif name not in self.names.created:
            self.note(node, Effect("write", ""), f"creates {name}")
        self.names.created.add(name)

    def track(self, name: str, value: ast.expr | None, target: str | None = None) -> bool:
        """Record what a name holds now (the module it names, what made its value, its text).

        Only a name bound once, outside any branch, loop or function, holds something known: any
        other binding may leave the earlier value in place, so the name is then one of several
        things. Returns whether the binding is certain.
        """
        names = self.names
        target = target or (self.resolve(value) if value is not None else None)
        previous = names.aliases.get(name, self.assumed_module(name))
        key = self.binding_key(name)
        names.bindings[key] = names.bindings.get(key, 0) + 1
        certain = self.is_certain(name)
        for table in (names.kinds, names.strings, names.refers):
            table.pop(name, None)
        names.functions.discard(name)
        names.param_mutators.discard(name)
        if certain and target is None:
            names.aliases.pop(name, None)
        elif certain or (target is not None and target == previous):
            names.aliases[name] = target
        else:
            names.aliases[name] = None  # one of several things
            if target is not None or previous is not None:
                names.maybe_module.add(name)
        kind = self.kind_of(value) if certain else None
        if kind:
            names.kinds[name] = kind
        if certain and value is not None and _is_string_expr(value):
            names.strings[name] = value
        return certain

    def is_certain(self, name: str) -> bool:
        """Whether the one binding of a name so far happens whenever the code runs."""
        depth = self.scopes[-1].branch_depth if self.scopes else self.branch_depth
        global_from_function = bool(self.scopes) and self.is_user_name(name)
        once = self.names.bindings.get(self.binding_key(name)) == 1
        return once and depth == 0 and not global_from_function

    def binding_key(self, name: str) -> str:
        """A name as the scope that binds it: locals of different functions are different names."""
        for depth, scope in enumerate(reversed(self.scopes)):
            if scope.kind == "class" and depth > 0:
                continue
            if name in scope.declared_global:
                return name
            if name in scope.local:
                return f"{scope.serial}:{name}"
        return name

    def is_ambiguous_module(self, node: ast.expr) -> bool:
        """Whether an expression's root may be a module here, or may be something else."""
        root = _root_name(node)
        names = self.names
        return root in names.maybe_module and names.aliases.get(root or "") is None

    def assumed_module(self, name: str) -> str | None:
        """The module a name is taken to be when this code has not bound it (``pd``, ``os``)."""
        if self.binding_key(name) in self.names.bindings or not self.is_user_name(name):
            return None
        return ASSUMED_MODULES.get(name)

    @contextlib.contextmanager
    def branch(self) -> Iterator[None]:
        """Code that may run or not (a branch, a loop, a handler, a function body)."""
        holder: _Scope | _Names = self.scopes[-1] if self.scopes else self
        holder.branch_depth += 1
        try:
            yield
        finally:
            holder.branch_depth -= 1

    def kind_of(self, node: ast.expr | None, depth: int = 0) -> str | None:
        """What made a value: a qualified function name, ``builtins`` for literals, or None."""
        if node is None or depth > 20:
            return None
        if isinstance(node, _LITERALS):
            return "builtins"
        if isinstance(node, ast.Name):
            return self.names.kinds.get(node.id)
        if isinstance(node, ast.Call):
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            return self.resolve(node.func) or self.kind_of(receiver, depth + 1)
        if isinstance(node, ast.Attribute):
            return self.resolve(node) or self.kind_of(node.value, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.kind_of(node.value, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.kind_of(node.left, depth + 1)
        return None

    def string_value(self, node: ast.expr, depth: int = 0) -> str | None:
        """The text of a string expression, with each part it cannot read as a placeholder."""
        if depth > 20:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(self.string_value(v, depth + 1) or _PLACEHOLDER for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            left = self.string_value(node.left, depth + 1)
            right = self.string_value(node.right, depth + 1) or _PLACEHOLDER
            return None if left is None else left + right
        if isinstance(node, ast.Name) and node.id in self.names.strings:
            return self.string_value(self.names.strings[node.id], depth + 1)
        if isinstance(node, ast.Call) and node.args and _describe(node.func).endswith("text"):
            return self.string_value(node.args[0], depth + 1)  # text("...") of SQLAlchemy
        return None

    # -- what the code changes -------------------------------------------------------------------------

    def delete_name(self, name: str, node: ast.AST) -> None:
        self.track(name, None)
        if not self.is_user_name(name):
            return
        self.changed.add(name)
        if name in self.names.created and name not in self.existing:
            self.note(node, Effect("write", ""), f"deletes {name}, which this code created")
        else:
            suffix = ", which exists" if self.exists(name) else ""
            self.note(node, Effect("destructive", ""), f"deletes {name}{suffix}")
        self.names.created.discard(name)

    def mutate(self, receiver: ast.expr, node: ast.AST, detail: str) -> None:
        """The object ``receiver`` evaluates to changes: note it against its root name."""
        root = _root_name(receiver)
        if root is None:
            return  # a temporary: the call that made it is judged on its own
        if self.is_ambiguous_module(receiver):
            self.note(node, UNCHECKED, f"changes {root}, which may be a module")
            return
        qualified = self.module_path(receiver)
        if qualified is not None:
            self.note(node, _module_state_effect(qualified), None)
            return
        for name in self.holders(root):
            if not self.is_user_name(name):
                self.local_change(name)
                continue
            self.changed.add(name)
            suffix = ", which exists" if self.exists(name) else ""
            through = f" through {root}" if name != root else ""
            self.note(node, Effect("write", ""), f"changes {name}{suffix}{through}{detail}")

    def holders(self, root: str) -> set[str]:
        """``root`` and the names whose objects it may hold (``x = df``, ``for row in rows``)."""
        found, pending = {root}, [root]
        while pending and len(found) < 50:
            for name in self.names.refers.get(pending.pop(), set()) - found:
                found.add(name)
                pending.append(name)
        return found

    def local_change(self, name: str) -> None:
        """A function changes one of its locals: if it is a parameter, callers' objects change."""
        for scope in reversed(self.scopes):
            if name in scope.local:
                scope.mutates_params = scope.mutates_params or name in scope.params
                return

    def refer(self, target: ast.expr, source: ast.expr) -> None:
        """Names bound by ``target`` hold objects reachable from ``source``."""
        roots = _source_roots(source)
        for name in _target_names(target):
            if roots - {name}:
                self.names.refers[name] = roots - {name}

    def module_path(self, node: ast.expr) -> str | None:
        """``os.environ`` for ``o.environ["X"]`` when the root is a module or builtin, else None."""
        attrs: list[str] = []
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(node, ast.Attribute):
                attrs.append(node.attr)
            node = node.func if isinstance(node, ast.Call) else node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.resolve_name(node.id)
        if base is None:
            return None
        return ".".join([base, *reversed(attrs)])
