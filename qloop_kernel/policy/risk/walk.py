"""The walk over the code's statements, on top of :mod:`.names`: assignments and deletions, code
that may run or not (``if``, loops, ``try``, ``match``), ``with``, imports (an allow-listed module
is read, any other may run code on import), function, class and lambda definitions (their bodies are
judged as if they ran), and names and attributes (the agent's own machinery, dunders, a module or
function passed around as a value)."""

from __future__ import annotations

import ast

from .assessment import Effect, Risk
from .lookup import _call_effect, _module_effect, _shown
from .names import _Names, _Scope
from .nodes import _comprehension_results, _describe, _root_name
from .scopes import _bound_names, _globals_of, _local_names, _parameters, _target_names
from .tables import CONVENTIONAL_ALIASES, MODULES, SAFE_DUNDERS, UNCHECKED


class _Walk(_Names):
    """The walk over statements: branches, bindings, deletions, imports, definitions, names."""

    # -- branches -------------------------------------------------------------------------------------

    def visit_If(self, node: ast.If | ast.While) -> None:
        self.visit(node.test)
        with self.branch():
            for statement in [*node.body, *node.orelse]:
                self.visit(statement)

    visit_While = visit_If

    def visit_Try(self, node: ast.Try) -> None:  # and ast.TryStar (3.11+): the same fields
        with self.branch():
            for part in [*node.body, *node.handlers, *node.orelse]:
                self.visit(part)
        for statement in node.finalbody:
            self.visit(statement)

    visit_TryStar = visit_Try

    def visit_match_case(self, node: ast.match_case) -> None:
        with self.branch():
            self.generic_visit(node)

    # -- statements --------------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit_assigned(node.targets, node.value)
        for target in node.targets:
            self.bind_target(target, node.value, node)
            self.refer(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit_assigned([node.target], node.value)
            self.bind_target(node.target, node.value, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            self.track(target.id, None)
            self.mutate(target, node, "")
        else:
            self.bind_target(target, None, node)

    def visit_assigned(self, targets: list[ast.expr], value: ast.expr) -> None:
        """Visit an assigned value; a module or function bound to a plain name is an alias, not a use."""
        pairs = [(t, value) for t in targets]
        if isinstance(value, (ast.Tuple, ast.List)):
            same = [
                t for t in targets if isinstance(t, type(value)) and len(t.elts) == len(value.elts)
            ]
            if len(same) == len(targets):
                pairs = [
                    (t, v) for target in same for t, v in zip(target.elts, value.elts, strict=True)
                ]
        seen: set[int] = set()
        for target, part in pairs:
            if id(part) in seen:
                continue
            seen.add(id(part))
            if isinstance(target, ast.Name) and self.resolve(part) is not None:
                self.visit_receiver(part)
            else:
                self.visit(part)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit_assigned([node.target], node.value)
        scopes, self.scopes = self.scopes, [s for s in self.scopes if s.kind != "comprehension"]
        try:
            if len(scopes) != len(self.scopes):  # in a comprehension: it may bind no time
                with self.branch():
                    self.bind(node.target.id, node, node.value)
            else:
                self.bind(node.target.id, node, node.value)
        finally:
            self.scopes = scopes

    def bind_target(self, target: ast.expr, value: ast.expr | None, node: ast.AST) -> None:
        """Bind an assignment target: names are bound, items and attributes mutate their root."""
        if isinstance(target, ast.Name):
            self.bind(target.id, node, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values: list[ast.expr | None] = [None] * len(target.elts)
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                values = list(value.elts)
            for element, element_value in zip(target.elts, values, strict=True):
                self.bind_target(element, element_value, node)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, None, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.visit_target_parts(target)
            self.mutate(target.value, node, "")

    def visit_target_parts(self, target: ast.Attribute | ast.Subscript) -> None:
        if isinstance(target, ast.Attribute):
            self.check_attribute_name(target)
        else:
            self.visit(target.slice)
        self.visit_receiver(target.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.delete(target, node)

    def delete(self, target: ast.expr, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.delete(element, node)
        elif isinstance(target, ast.Name):
            self.delete_name(target.id, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.visit_target_parts(target)
            root = _root_name(target)
            if root is not None and self.names.aliases.get(root):
                self.mutate(target.value, node, "")
            elif root is not None and self.is_user_name(root):
                self.changed.add(root)
                risk: Risk = "destructive" if self.exists(root) else "write"
                self.note(node, Effect(risk, ""), f"deletes {_describe(target)}")

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        with self.branch():  # the loop may run no time: its names may keep their earlier values
            self.bind_target(node.target, None, node)
            self.refer(node.target, node.iter)
            for statement in [*node.body, *node.orelse]:
                self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind_target(item.optional_vars, item.context_expr, node)
                self.refer(item.optional_vars, item.context_expr)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name, node, None)
        for statement in node.body:
            self.visit(statement)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self.bind(node.name, node, None)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name, node, None)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self.bind(node.rest, node, None)

    def visit_Global(self, node: ast.Global) -> None:
        return  # handled when the enclosing function's locals are computed

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        return

    # -- imports -----------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for name in node.names:
            self.check_import(name.name, node)
            qualified = name.name if name.asname else name.name.split(".")[0]
            bound = name.asname or qualified
            self.names.modules.add(qualified)
            self.bind_import(bound, qualified, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        self.check_import(module, node)
        for name in node.names:
            if name.name == "*":
                self.unbounded = True
                self.note(
                    node,
                    Effect("destructive", ""),
                    f"imports every name of {module}, which may overwrite variables",
                )
                continue
            self.bind_import(name.asname or name.name, f"{module}.{name.name}", node)

    def check_import(self, module: str, node: ast.AST) -> None:
        if "qloop" in module.lower():
            self.note(node, Effect("unknown", f"imports {module}, the agent's own machinery"))
        elif _module_effect(module) is None:
            self.unbounded = True
            self.note(node, Effect("external", f"imports {module}, which may run code on import"))

    def bind_import(self, bound: str, qualified: str, node: ast.AST) -> None:
        """Bind an imported name; its module's usual name (``pd``, ``json``) is not a write."""
        usual = qualified.split(".")[-1] == bound or CONVENTIONAL_ALIASES.get(bound) == qualified
        if not usual:
            self.bind(bound, node, None, qualified)
            return
        self.track(bound, None, qualified)
        if self.is_user_name(bound):
            self.changed.add(bound)
            self.names.created.add(bound)

    # -- definitions -------------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in [*node.decorator_list, *node.args.defaults]:
            self.visit(expression)
        for default in node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        self.bind(node.name, node, None)
        certain = self.is_certain(node.name)
        if certain:
            self.names.functions.add(node.name)
        params = frozenset(_parameters(node.args))
        scope = _Scope("function", _local_names(node), _globals_of(node.body), params)
        self.visit_body(node.body, scope)
        if scope.mutates_params:
            self.names.param_mutators.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in node.args.defaults:
            self.visit(expression)
        params = _parameters(node.args)
        scope = _Scope("function", params, params=frozenset(params))
        self.visit_body([node.body], scope)
        if scope.mutates_params:
            self.mutating_lambdas.add(id(node))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        self.bind(node.name, node, None)
        if self.is_certain(node.name):
            self.names.functions.add(node.name)
        self.visit_body(node.body, _Scope("class", _bound_names(node.body)))

    def visit_body(self, body: list[ast.stmt] | list[ast.expr], scope: _Scope) -> None:
        self.scope_count += 1
        scope.serial = self.scope_count
        self.scopes.append(scope)
        try:
            for statement in body:
                self.visit(statement)
        finally:
            self.scopes.pop()

    def visit_comprehension_of(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        first, *rest = node.generators
        self.visit(first.iter)
        targets: set[str] = set()
        for generator in node.generators:
            targets |= _target_names(generator.target)
        self.scope_count += 1
        self.scopes.append(_Scope("comprehension", targets, serial=self.scope_count))
        for generator in node.generators:
            self.refer(generator.target, generator.iter)
        try:
            for condition in first.ifs:
                self.visit(condition)
            for generator in rest:
                self.visit(generator.iter)
                for condition in generator.ifs:
                    self.visit(condition)
            for part in _comprehension_results(node):
                self.visit(part)
        finally:
            self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_of

    # -- names, attributes, constants ---------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if self.check_identifier(node.id, node):
            return
        qualified = self.resolve_name(node.id)
        if qualified is not None:
            self.note_reference(qualified, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_attribute_name(node)
        qualified = self.resolve(node)
        if qualified is not None:
            self.note_reference(qualified, node)
        else:
            self.visit_receiver(node.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "qloop" in node.value.lower():
            self.note(node, Effect("unknown", "mentions qloop, the agent's own machinery"))

    def check_identifier(self, name: str, node: ast.AST) -> bool:
        """Note identifiers that reach machinery; True when nothing more needs saying."""
        if "qloop" in name.lower():
            self.note(node, Effect("unknown", f"uses {name}, the agent's own machinery"))
            return True
        if name in {"__builtins__", "__builtin__", "__loader__", "__spec__"}:
            self.note(node, Effect("unknown", f"uses {name}, which can reach anything"))
            return True
        if name == "get_ipython" and not self.shadowed(name):
            self.note(node, Effect("unknown", "uses get_ipython(), which can run anything"))
            return True
        return False

    def check_attribute_name(self, node: ast.Attribute) -> None:
        attr = node.attr
        if "qloop" in attr.lower():
            self.note(node, Effect("unknown", f"uses .{attr}, the agent's own machinery"))
        elif attr.startswith("__") and attr.endswith("__") and attr not in SAFE_DUNDERS:
            self.note(node, Effect("unknown", f"uses .{attr}, which can reach anything"))

    def note_reference(self, qualified: str, node: ast.expr) -> None:
        """A module or function used as a value (not called here): it may be called elsewhere."""
        shown = _shown(qualified)
        if qualified in self.names.modules or qualified in MODULES:
            effect = _module_effect(qualified) or UNCHECKED
            if effect.risk != "read":
                self.note(node, Effect("unknown", ""), f"passes the module {shown} around")
            return
        if qualified.split(".")[-1].isupper():
            return  # a constant such as subprocess.PIPE
        effect = _call_effect(qualified)
        if effect.risk != "read":
            self.note(node, effect, f"refers to {shown}, which {effect.text}")

    def visit_receiver(self, node: ast.expr) -> None:
        """Visit the object a method is called on (a module path needs no further look)."""
        if isinstance(node, ast.Name):
            self.check_identifier(node.id, node)
        elif isinstance(node, ast.Attribute):
            self.check_attribute_name(node)
            if self.resolve(node) is None:
                self.visit_receiver(node.value)
        else:
            self.visit(node)
