"""A cell change applied to the saved notebook, for when no page shows it.

With a page open, the page applies an outside agent's cell change (its model is the notebook's
truth, and writing the file under it would conflict). With none, a change the user's policy or
grant allows goes into the file through the Jupyter server's contents manager, as the page would
make it: a new cell after its neighbour (or at the end), or an edited cell's new source, each
marked with who proposed it in its ``qloop_outside`` metadata. Nothing else in the file changes.
"""

from __future__ import annotations

import inspect
from typing import Any

import nbformat

from .record import METADATA_KEY


# Any: the Jupyter server contents manager's answer, whatever it returns
async def maybe_await(value: Any) -> Any:
    """The contents manager's answer, whether it is the sync or the async manager."""
    return await value if inspect.isawaitable(value) else value


async def apply_change(
    contents: Any, path: str, cell: dict[str, Any], source: str, client: str
) -> dict[str, Any]:
    """Apply ``cell`` (op add or edit) with ``source`` to the notebook file at ``path``: what the
    gate is told was done (``cell_id``, or ``error`` when nothing was written)."""
    try:
        model = await maybe_await(contents.get(path, content=True))
    except Exception as exc:  # tornado's HTTPError for a missing file, or an unreadable one
        return {"error": f"cannot read {path!r}: {getattr(exc, 'log_message', None) or exc}"}
    notebook = model.get("content") if model.get("type") == "notebook" else None
    if notebook is None:
        return {"error": f"{path!r} is not a notebook"}
    if (notebook.get("nbformat"), notebook.get("nbformat_minor", 0)) < (4, 5):
        return {
            "error": "the notebook's format (before nbformat 4.5) has no cell ids; open it in "
            "JupyterLab, which applies the change in the page"
        }
    cells = notebook["cells"]
    target = cell.get("after_cell_id") if cell["op"] == "add" else cell.get("cell_id")
    found = next((i for i, c in enumerate(cells) if c.get("id") == target), None)
    if target is not None and found is None:
        return {"error": f"no cell with id {target} in the notebook"}
    mark = {"client": client, "tool": f"{cell['op']}_cell"}
    if cell["op"] == "add":
        make: Any = (  # nbformat's makers are untyped
            nbformat.v4.new_markdown_cell
            if cell["cell_type"] == "markdown"
            else nbformat.v4.new_code_cell
        )
        made = make(source, metadata={METADATA_KEY: mark})
        cells.insert(len(cells) if found is None else found + 1, made)
        changed = made
    elif found is None:
        return {"error": "edit_cell names no cell"}
    else:
        changed = cells[found]
        changed["source"] = source
        changed.setdefault("metadata", {})[METADATA_KEY] = mark
    try:
        await maybe_await(
            contents.save({"type": "notebook", "format": "json", "content": notebook}, path)
        )
    except Exception as exc:
        return {"error": f"cannot save {path!r}: {getattr(exc, 'log_message', None) or exc}"}
    return {"cell_id": str(changed["id"])}
