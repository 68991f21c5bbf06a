"""The papermill engine ``qloop``: ``papermill --engine qloop IN OUT`` replays saved agent cells.

papermill's own engine runs cells through nbclient, which sends no cell metadata: the kernel cannot
see a cell's saved record. This engine sends each cell's metadata and id as ``qloop run`` does, so
saved agent cells replay with no model call, under the same trust rules (decided in the kernel): the
approval policy from ``QLOOP_APPROVAL`` (default ``readonly``) for every saved step, and records
received from elsewhere only with ``QLOOP_REPLAY_RECEIVED=1`` in the environment of the papermill
command, still under the policy. A saved step that is not run fails its cell, and papermill stops there
as for any failing cell (``QLOOP_CONTINUE_ON_DENIED=1`` goes on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.utils import merge_kwargs, remove_args

from .runner import SendsCellMetadata

if TYPE_CHECKING:
    from logging import Logger

    from nbformat import NotebookNode


class ReplayingPapermillClient(SendsCellMetadata, PapermillNotebookClient):  # type: ignore[misc]
    """papermill's notebook client, sending cell metadata and keeping records in metadata."""

    def __init__(self, nb_man: Any, **kwargs: Any) -> None:
        super().__init__(nb_man, **kwargs)
        self.send_cell_metadata()


class QloopEngine(NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine with the replaying client."""

    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man: Any,
        kernel_name: str,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: float = 60,
        execution_timeout: float | None = None,
        **kwargs: Any,
    ) -> NotebookNode:
        # The same arguments papermill's NBClientEngine passes to its client.
        input_path = kwargs.get("input_path")
        kwargs = remove_args(["input_path"], **kwargs)
        safe_kwargs = remove_args(["timeout", "startup_timeout"], **kwargs)
        final_kwargs = merge_kwargs(
            safe_kwargs,
            timeout=execution_timeout if execution_timeout else kwargs.get("timeout"),
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=_logger(),
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        client = ReplayingPapermillClient(nb_man, **final_kwargs)
        client.notebook_path = str(input_path or "")
        try:
            executed: NotebookNode = client.execute()
            return executed
        finally:
            client.apply_proposals()


def _logger() -> Logger:
    from papermill.log import logger

    papermill_logger: Logger = logger  # papermill comes without stubs
    return papermill_logger
