"""``ReplayPreprocessor``: nbconvert's executor, replaying saved agent cells.

    jupyter nbconvert --to notebook --execute \\
        --Exporter.default_preprocessors=qloop_kernel.headless.ReplayPreprocessor NOTEBOOK

nbconvert's ``ExecutePreprocessor`` sends no cell metadata, so the kernel cannot see a cell's saved
record. This subclass sends each cell's metadata and id as ``qloop run`` does; ``--execute`` turns
it on (its configuration is ``ExecutePreprocessor``'s, so ``--ExecutePreprocessor.timeout=...``
applies). The trust rules are ``qloop run``'s, decided in the kernel: ``QLOOP_APPROVAL`` gives the
policy (default ``readonly``) for every saved step, and ``--ReplayPreprocessor.replay_received=True``
(or ``QLOOP_REPLAY_RECEIVED=1`` in the environment) lifts the block on records received from
elsewhere, under that policy. A saved step that is not run fails its cell, so the conversion fails as
for any failing cell (``QLOOP_CONTINUE_ON_DENIED=1`` goes on).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from nbconvert.preprocessors import ExecutePreprocessor
from traitlets import Bool

from ..notebook.replay import RECEIVED_OPT_IN
from .runner import SendsCellMetadata

if TYPE_CHECKING:
    from nbformat import NotebookNode


class ReplayPreprocessor(SendsCellMetadata, ExecutePreprocessor):
    """Executes the notebook like JupyterLab does for the kernel: saved agent cells replay."""

    replay_received = Bool(
        False,
        help="Replay saved agent steps not written by your kernel (read them first: qloop show).",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # traitlets' HasTraits
        self.send_cell_metadata()

    def preprocess(
        self, nb: Any, resources: Any = None, km: Any = None
    ) -> tuple[NotebookNode, dict[str, Any]]:
        before = os.environ.get(RECEIVED_OPT_IN)
        if self.replay_received:
            os.environ[RECEIVED_OPT_IN] = "1"  # the kernel inherits it; a notebook cannot set it
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self.apply_proposals()
            if before is None:
                os.environ.pop(RECEIVED_OPT_IN, None)
            else:
                os.environ[RECEIVED_OPT_IN] = before
