"""The "Python 3 (qloop)" kernel spec: an ipykernel that loads the extension at start."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

KERNEL_NAME = "qloop"
DISPLAY_NAME = "Python 3 (qloop)"


def kernel_json(python: str = sys.executable) -> dict[str, object]:
    return {
        "argv": [
            python,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            "--ext=qloop_kernel",
        ],
        "display_name": DISPLAY_NAME,
        "language": "python",
        "metadata": {"debugger": True},
    }


def install(*, user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME) -> str:
    """Install the kernel spec; return where it went."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "kernel.json").write_text(json.dumps(kernel_json(), indent=2))
        return str(
            KernelSpecManager().install_kernel_spec(
                folder, kernel_name=name, user=user, prefix=prefix
            )
        )
