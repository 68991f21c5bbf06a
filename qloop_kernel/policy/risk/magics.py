"""IPython's magics and ``!`` commands, which arrive as ``get_ipython().run_line_magic(...)``,
``run_cell_magic(...)`` and ``system(...)`` calls: each is judged from ``LINE_MAGICS`` and
``CELL_MAGICS`` or by a rule of its own (``%env``, ``%reset``, ``%store``, ``%load_ext``...), and the
code that ``%time``, ``%timeit``, ``%prun`` and ``%%capture`` run is walked in place, its lines
mapped to the lines of the cell."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from .assessment import Effect
from .nodes import _syntax_message
from .tables import (
    CELL_MAGICS,
    CODE_MAGICS,
    ENVIRONMENT,
    LINE_MAGICS,
    PURE_EXTENSIONS,
    SHELL,
    UNCHECKED,
    WRITES_FILES,
)
from .walk import _Walk


class _MagicWalk(_Walk):
    """The walk, with IPython's magics and ``!`` commands judged by what they run."""

    MAX_MAGIC_DEPTH = 4

    def magic(self, node: ast.Call) -> bool:
        """Judge ``get_ipython().run_line_magic(...)`` and the like; False for any other call."""
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "get_ipython"
            and not self.shadowed("get_ipython")
            and func.attr in _MAGIC_CALLS
        ):
            return False
        texts = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if len(texts) != len(node.args) or node.keywords or not texts:
            shell = func.attr in {"system", "getoutput"}
            self.note(node, SHELL if shell else UNCHECKED, _UNREADABLE_MAGIC[shell])
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self.visit(argument)
            return True
        _MAGIC_CALLS[func.attr](self, node, texts)
        return True

    def line_magic(self, node: ast.Call, name: str, line: str) -> None:
        if "qloop" in name.lower() or "qloop" in line.lower() or name == "agent":
            self.note(node, Effect("unknown", f"runs %{name}, the agent's own machinery"))
        elif name in CODE_MAGICS:
            self.code_magic(node, name, line, "", cell=False)
        elif name in _LINE_MAGIC_RULES:
            _LINE_MAGIC_RULES[name](self, node, name, line)
        elif name in LINE_MAGICS:
            self.note(node, LINE_MAGICS[name], f"{LINE_MAGICS[name].text} (%{name})")
        else:
            self.note(node, Effect("unknown", f"runs the magic %{name}, which it cannot check"))

    def cell_magic(self, node: ast.Call, name: str, line: str, body: str) -> None:
        if "qloop" in (name + line + body).lower() or name == "agent":
            self.note(node, Effect("unknown", f"runs %%{name}, the agent's own machinery"))
        elif name in CODE_MAGICS:
            self.code_magic(node, name, line, body, cell=True)
        elif name in {"writefile", "file"}:
            target = next((t for t in line.split() if not t.startswith("-")), "a file")
            self.note(node, Effect("external", f"writes the file {target} (%%{name})"))
        elif name in CELL_MAGICS:
            self.note(node, CELL_MAGICS[name], f"{CELL_MAGICS[name].text} (%%{name})")
        else:
            self.note(
                node, Effect("unknown", f"runs the cell magic %%{name}, which it cannot check")
            )

    def code_magic(self, node: ast.Call, name: str, line: str, body: str, *, cell: bool) -> None:
        """``%time``, ``%timeit``, ``%prun``, ``%%capture``: the class of the code they run."""
        options, rest = _split_options(line, CODE_MAGICS[name])
        if name == "prun" and {"-T", "-D"} & set(options):
            self.note(node, Effect("external", "writes profile output to a file (%prun)"))
        if name == "capture":
            if rest.split():
                self.bind(rest.split()[0], node, None)
            rest = ""
        if rest.strip():
            self.nested(node, rest.strip(), line_offset=-1)
        if cell:
            self.nested(node, body, line_offset=0)

    def nested(self, node: ast.Call, code: str, line_offset: int) -> None:
        """Judge code a magic runs, with its lines mapped to the lines of the cell."""
        if self.magic_depth >= self.MAX_MAGIC_DEPTH:
            self.note(node, Effect("unknown", "nests magics too deeply to check"))
            return
        offset = self.line_offset + node.lineno + line_offset
        try:
            tree = ast.parse(_transform_lines(code))
        except (SyntaxError, ValueError) as exc:
            line = offset + (getattr(exc, "lineno", None) or 1)
            self.note(
                line - self.line_offset,
                Effect("unknown", f"cannot parse the code a magic runs: {_syntax_message(exc)}"),
            )
            return
        saved = self.line_offset
        self.line_offset, self.magic_depth = offset, self.magic_depth + 1
        try:
            for statement in tree.body:
                self.visit(statement)
        finally:
            self.line_offset, self.magic_depth = saved, self.magic_depth - 1


_UNREADABLE_MAGIC = {
    True: "runs a shell command it cannot read",
    False: "runs a magic it cannot read",
}
_MagicCall = Callable[[_MagicWalk, ast.Call, list[str]], None]


def _magic_line(analysis: _MagicWalk, node: ast.Call, texts: list[str]) -> None:
    analysis.line_magic(node, texts[0], texts[1] if len(texts) > 1 else "")


def _magic_cell(analysis: _MagicWalk, node: ast.Call, texts: list[str]) -> None:
    line, body = (texts + ["", ""])[1:3]
    analysis.cell_magic(node, texts[0], line, body)


def _magic_old(analysis: _MagicWalk, node: ast.Call, texts: list[str]) -> None:
    name, _, line = texts[0].lstrip("%").partition(" ")
    analysis.line_magic(node, name, line)


def _magic_shell(analysis: _MagicWalk, node: ast.Call, texts: list[str]) -> None:
    command = texts[0].split()
    program = command[0] if command else ""
    analysis.note(node, SHELL, f"runs the shell command `{program[:40]}`")


_MAGIC_CALLS: dict[str, _MagicCall] = {
    "run_line_magic": _magic_line,
    "run_cell_magic": _magic_cell,
    "magic": _magic_old,
    "system": _magic_shell,
    "getoutput": _magic_shell,
}

_LineMagicRule = Callable[[_MagicWalk, ast.Call, str, str], None]


def _magic_env(analysis: _MagicWalk, node: ast.Call, name: str, line: str) -> None:
    if "=" in line or len(line.split()) > 1:
        analysis.note(node, ENVIRONMENT, f"{ENVIRONMENT.text} (%{name})")


def _magic_deletes(analysis: _MagicWalk, node: ast.Call, name: str, line: str) -> None:
    if name == "xdel":
        for variable in line.split():
            analysis.changed.add(variable)
        analysis.note(
            node, Effect("destructive", f"deletes {line.strip() or 'a variable'} (%xdel)")
        )
        return
    analysis.unbounded = True
    analysis.note(node, Effect("destructive", f"deletes variables (%{name})"))


def _magic_history(analysis: _MagicWalk, node: ast.Call, name: str, line: str) -> None:
    if {"-f", "-o"} & set(line.split()) or "-f" in line:
        analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} (%history -f)")


def _magic_store(analysis: _MagicWalk, node: ast.Call, name: str, line: str) -> None:
    if "-r" in line.split():
        analysis.unbounded = True
        analysis.note(
            node, Effect("destructive", "restores stored variables over existing ones (%store -r)")
        )
    else:
        analysis.note(node, LINE_MAGICS["store"], f"{LINE_MAGICS['store'].text} (%store)")


def _magic_extension(analysis: _MagicWalk, node: ast.Call, name: str, line: str) -> None:
    if line.strip() in PURE_EXTENSIONS:
        return
    analysis.unbounded = True
    effect = LINE_MAGICS[name]
    analysis.note(node, effect, f"{effect.text} (%{name} {line.strip()[:40]})")


_LINE_MAGIC_RULES: dict[str, _LineMagicRule] = {
    "env": _magic_env,
    "reset": _magic_deletes,
    "reset_selective": _magic_deletes,
    "xdel": _magic_deletes,
    "history": _magic_history,
    "store": _magic_store,
    "load_ext": _magic_extension,
    "reload_ext": _magic_extension,
}


def _split_options(line: str, with_value: frozenset[str]) -> tuple[list[str], str]:
    """Split a magic's leading ``-x`` options from the code that follows them."""
    options: list[str] = []
    position = 0
    tokens = list(re.finditer(r"\S+", line))
    index = 0
    while index < len(tokens) and tokens[index].group().startswith("-"):
        token = tokens[index].group()
        options.append(token[:2])
        index += 2 if token in with_value else 1
        position = tokens[index - 1].end() if index - 1 < len(tokens) else len(line)
    return options, line[position:]


def _transform_lines(code: str) -> str:
    """Turn ``!cmd`` and ``%magic`` lines of code given to a magic into the calls IPython makes."""
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("!"):
            lines.append(f"{indent}get_ipython().system({stripped[1:]!r})")
        elif stripped.startswith("%") and not stripped.startswith("%%"):
            name, _, rest = stripped[1:].partition(" ")
            lines.append(f"{indent}get_ipython().run_line_magic({name!r}, {rest!r})")
        else:
            lines.append(line)
    return "\n".join(lines)
