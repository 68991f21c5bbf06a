"""The demo command's progress lines, from pip's output (the install itself needs PyPI: not run here)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "scripts" / "demo.sh"

PIP_OUTPUT = """\
Looking in indexes: https://pypi.org/simple
Processing ./.
  Installing build dependencies: started
Collecting anthropic<3,>=2.10 (from qloop-kernel==0.1.0)
  Downloading anthropic-2.16.0-py3-none-any.whl (2.9 MB)
Processing /opt/wheels/ipykernel-7.4.0-py3-none-any.whl (from qloop-kernel==0.1.0)
Collecting wcwidth>=0.1.4 (from prompt-toolkit<3.1.0,>=3.0.41->ipython>=7.23.1)
Collecting tzdata
Building wheels for collected packages: qloop-kernel
Installing collected packages: tzdata, wcwidth, ipykernel, anthropic, qloop-kernel
Successfully installed anthropic-2.16.0 ipykernel-7.4.0 qloop-kernel-0.1.0
"""


def progress(pip_output: str) -> str:
    script = DEMO.read_text()
    function = re.search(r"^progress\(\) \{\n.*?^\}\n", script, re.S | re.M)
    assert function is not None
    run = subprocess.run(
        ["bash", "-c", function.group(0) + "progress"],
        input=pip_output, capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return run.stdout


def test_each_package_is_one_numbered_line_then_the_install_count() -> None:
    assert progress(PIP_OUTPUT).splitlines() == [
        "      building qloop-kernel from this checkout",
        "        1 anthropic",
        "        2 ipykernel",
        "        3 wcwidth",
        "        4 tzdata",
        "      installing 5 packages…",
    ]


def test_the_install_builds_no_frontend_and_compiles_no_bytecode_up_front() -> None:
    lines = DEMO.read_text().replace("\\\n", " ").splitlines()
    install = next(line for line in lines if "pip install" in line and ".[data]" in line)
    assert install.startswith("HATCH_BUILD_NO_HOOKS=true ")
    assert "--no-compile" in install and install.endswith("| progress")


def test_names_with_a_dash_are_shown_whole() -> None:
    pip_output = """\
Collecting markdown-it-py>=3 (from qloop-kernel==0.1.0)
Collecting pydantic>=2 (from qloop-kernel==0.1.0)
Collecting pydantic-core==2.41.5 (from pydantic>=2->qloop-kernel==0.1.0)
Processing /opt/wheels/jupyter_client-8.6.3-py3-none-any.whl (from qloop-kernel==0.1.0)
Processing /opt/pypi/typing-extensions-4.12.2.tar.gz (from pydantic>=2)
Collecting python-dateutil>=2.8.2; python_version >= "3.9"
Collecting nh3@ file:///opt/wheels/nh3-0.3.2-cp38-abi3-manylinux_2_17_x86_64.whl
Collecting zope.interface[test]
"""
    assert [line.split()[-1] for line in progress(pip_output).splitlines()] == [
        "markdown-it-py",
        "pydantic",
        "pydantic-core",
        "jupyter-client",
        "typing-extensions",
        "python-dateutil",
        "nh3",
        "zope.interface",
    ]
