"""Installing from a checkout: without Node, the wheel carries the kernel side (and the Jupyter server
extension's config) and the build says once that the JupyterLab view needs Node; the ``headless`` extra brings papermill and nbconvert.
The ``lab`` extra brings JupyterLab, which the Lab view needs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent
NOTICE = "qloop-kernel: Node was not found, so the JupyterLab extension"


def checkout_copy(folder: Path) -> Path:
    """The files a wheel is built from, without a built extension (a fresh clone)."""
    copy = folder / "checkout"
    copy.mkdir()
    for name in ("pyproject.toml", "hatch_build.py", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(
        ROOT / "qloop_kernel", copy / "qloop_kernel",
        ignore=shutil.ignore_patterns("labextension", "__pycache__"),
    )  # fmt: skip
    (copy / "labextension").mkdir()
    shutil.copy(ROOT / "labextension" / "install.json", copy / "labextension" / "install.json")
    shutil.copytree(ROOT / "jupyter-config", copy / "jupyter-config")
    return copy


def test_a_checkout_without_node_builds_the_kernel_side_with_one_notice(tmp_path: Path) -> None:
    copy = checkout_copy(tmp_path)
    no_node = tmp_path / "bin"  # a PATH with no node, jlpm or npm on it
    no_node.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(tmp_path / "dist"), str(copy)],
        env={"PATH": str(no_node), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-3000:]
    assert "Traceback" not in printed
    assert printed.count(NOTICE) == 1
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "qloop_kernel/headless/cli.py" in names
    assert not [n for n in names if "labextensions" in n]  # no half-installed view
    # The Jupyter server extension (MCP for outside agents) is enabled all the same.
    assert any(n.endswith("etc/jupyter/jupyter_server_config.d/qloop-kernel.json") for n in names)


def test_the_headless_extra_brings_papermill_and_nbconvert() -> None:
    extras = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1]
    assert 'headless = ["papermill>=2.6", "nbconvert>=7"]' in extras.split("\n[")[0]
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'qloop-kernel[headless]'" in readme


def test_the_lab_extra_brings_jupyterlab_and_the_readme_says_the_view_needs_it() -> None:
    extras = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1]
    assert 'lab = ["jupyterlab>=4.4,<5"]' in extras.split("\n[")[0]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "pip install '.[lab]'" in readme
    assert "The Lab view needs JupyterLab" in readme
