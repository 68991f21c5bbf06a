"""Build hook: a checkout without Node installs the kernel side, with one notice about the view.

The JupyterLab extension (the approval cards' view, the transcript view) is built from TypeScript with
Node. A wheel built from a checkout where it was not built yet, and where no Node is on PATH, leaves it
out instead of failing with the builder's traceback: the kernel, ``%%agent`` cells (cards are ipywidgets)
and ``qloop run`` work without it. Released wheels carry the built extension.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUILT = os.path.join("qloop_kernel", "labextension", "static", "style.js")
NOTICE = (
    "qloop-kernel: Node was not found, so the JupyterLab extension (the transcript and card view) "
    "is not built into this install; the kernel side is. Install Node >= 20.19 and reinstall from "
    "this checkout, or install a built wheel (pip install qloop-kernel), to add the view.\n"
)


class NodeOptionalBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Runs before the jupyter-builder hook: without Node and without a built extension, it turns
    that hook off and leaves the extension's files out of the wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.path.exists(os.path.join(self.root, BUILT)):
            return
        if shutil.which("node") is not None or os.environ.get("SKIP_JUPYTER_BUILDER"):
            return
        os.environ["SKIP_JUPYTER_BUILDER"] = "1"  # read by hatch-jupyter-builder's hook
        shared = self.build_config.target_config.get("shared-data", {})
        for source in [s for s in shared if "labextension" in s]:  # the server's config stays
            del shared[source]
        self.app.display_warning(NOTICE.rstrip())
