"""The test files a change touches, for the quick loop (``scripts/quick.sh``).

    python -m tests.affected [BASE]

prints, one per line, the test files to run for the files changed since ``BASE`` (default: the
last commit, ``HEAD``) plus those not yet committed or not yet tracked:

- a changed test file itself;
- a test file that imports a changed module of ``qloop_kernel`` (``from qloop_kernel.redact import
  ...``, ``import qloop_kernel.values.fingerprint``, ``from qloop_kernel.values import fingerprint``);
  a changed package ``__init__.py`` counts as its package;
- a test file that imports a changed test helper (``from tests.kernel_client import LabKernel``);
- every test file when ``tests/conftest.py`` or the project's configuration (``pyproject.toml``)
  changed.

Only direct imports count: a module that everything imports (``messages.py``, ``settings.py``) selects
the tests that name it, not the whole suite; the full run (``scripts/test.sh``) remains the check.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
EVERYTHING = "*"
PACKAGES = ("qloop_kernel", "tests")
EVERY_TEST = ("pyproject.toml", "tests/conftest.py")


def changed_files(base: str) -> list[str]:
    """Paths (relative to the root) changed since ``base``, staged or not, and untracked ones."""

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
        return [line for line in done.stdout.splitlines() if line]

    return sorted(
        set(git("diff", "--name-only", base))
        | set(git("ls-files", "--others", "--exclude-standard"))
    )


def module_of(path: str) -> str | None:
    """``qloop_kernel/values/fingerprint.py`` -> ``qloop_kernel.values.fingerprint`` (and the same
    for ``tests/``); None for other files."""
    parts = Path(path).with_suffix("").parts
    if not path.endswith(".py") or not parts or parts[0] not in PACKAGES:
        return None
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(test_file: Path) -> set[str]:
    """The project's modules a test file names in its imports (at any depth of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] in PACKAGES}


def affected(changed: list[str]) -> list[str]:
    """The test files to run for ``changed``; ``["*"]`` for all of them."""
    test_files = sorted(TESTS.glob("test_*.py"))
    selected: set[str] = set()
    modules: set[str] = set()
    for path in changed:
        if path in EVERY_TEST:
            return [EVERYTHING]
        if path.startswith("tests/test_") and path.endswith(".py") and (ROOT / path).exists():
            selected.add(path)
        module = module_of(path)
        if module:
            modules.add(module)
    for test_file in test_files:
        if imported_modules(test_file) & modules:
            selected.add(str(test_file.relative_to(ROOT)))
    return sorted(selected)


def main(argv: list[str]) -> int:
    base = argv[0] if argv else "HEAD"
    for path in affected(changed_files(base)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
