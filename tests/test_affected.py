"""The quick loop's choice of test files (tests/affected.py)."""

from __future__ import annotations

from pathlib import Path

from tests.affected import EVERYTHING, affected, imported_modules, module_of


def test_a_changed_module_selects_the_test_files_that_import_it() -> None:
    chosen = affected(["qloop_kernel/records/signing.py"])
    assert "tests/test_signing_key.py" in chosen
    assert "tests/test_standin.py" not in chosen


def test_a_changed_test_file_and_a_changed_helper_select_their_files() -> None:
    assert affected(["tests/test_text.py"]) == ["tests/test_text.py"]
    assert "tests/test_affected.py" in affected(["tests/affected.py"])


def test_shared_configuration_selects_everything() -> None:
    assert affected(["tests/conftest.py"]) == [EVERYTHING]
    assert affected(["pyproject.toml"]) == [EVERYTHING]


def test_files_outside_the_packages_select_nothing() -> None:
    assert affected(["README.md", "labextension/src/index.ts"]) == []
    assert affected(["tests/test_gone.py"]) == [], "a deleted test file is not run"


def test_module_names_and_imports() -> None:
    assert module_of("qloop_kernel/values/__init__.py") == "qloop_kernel.values"
    assert module_of("qloop_kernel/values/fingerprint.py") == "qloop_kernel.values.fingerprint"
    assert module_of("docs/testing.md") is None
    names = imported_modules(Path(__file__))
    assert {"tests.affected", "tests.affected.affected"} <= names
