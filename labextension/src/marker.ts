/**
 * Marks agent cells: cells whose `metadata.qloop` holds a saved turn.
 *
 * The cell node gets the class `qloop-agent-cell`, a `data-qloop-status`
 * attribute and the badge text in the CSS variable `--qloop-badge`, which the
 * stylesheet shows at the bottom right of the cell's input.
 */
import { Cell, ICellModel } from '@jupyterlab/cells';
import { Notebook } from '@jupyterlab/notebook';
import { TranslationBundle } from '@jupyterlab/translation';

import { badgeText } from './labels';
import { METADATA_KEY, TurnStatus, statusOf, unreadableReason } from './record';

/** Class on the node of a cell that carries a saved record. */
export const AGENT_CELL_CLASS = 'qloop-agent-cell';
/** Attribute with the record's status, or `unreadable` for a record the view cannot read. */
export const STATUS_ATTRIBUTE = 'data-qloop-status';
/** CSS variable holding the badge text (a CSS string). */
export const BADGE_VARIABLE = '--qloop-badge';

/** The marker state of a cell model: null when it has no saved record. */
export function markerStatus(
  model: ICellModel
): TurnStatus | 'unreadable' | null {
  const record = model.getMetadata(METADATA_KEY);
  if (record === undefined) {
    return null;
  }
  return unreadableReason(record) === null ? statusOf(record) : 'unreadable';
}

/** Bring one cell's marker up to date with its metadata. */
export function updateMarker(cell: Cell, trans: TranslationBundle): void {
  if (cell.isDisposed) {
    return;
  }
  const status = markerStatus(cell.model);
  const node = cell.node;
  if (status === null) {
    node.classList.remove(AGENT_CELL_CLASS);
    node.removeAttribute(STATUS_ATTRIBUTE);
    node.style.removeProperty(BADGE_VARIABLE);
    return;
  }
  node.classList.add(AGENT_CELL_CLASS);
  node.setAttribute(STATUS_ATTRIBUTE, status);
  node.style.setProperty(
    BADGE_VARIABLE,
    JSON.stringify(badgeText(status, trans))
  );
}

function watchCell(
  cell: Cell,
  watched: WeakSet<Cell>,
  trans: TranslationBundle
): void {
  if (watched.has(cell)) {
    return;
  }
  watched.add(cell);
  const model = cell.model;
  const onChange = (_: unknown, change: { key: string }) => {
    if (change.key === METADATA_KEY) {
      updateMarker(cell, trans);
    }
  };
  model.metadataChanged.connect(onChange);
  cell.disposed.connect(() => model.metadataChanged.disconnect(onChange));
  updateMarker(cell, trans);
}

/** Mark the notebook's agent cells now and whenever cells or metadata change. */
export function trackMarkers(
  notebook: Notebook,
  trans: TranslationBundle
): void {
  const watched = new WeakSet<Cell>();
  const watchAll = () =>
    notebook.widgets.forEach(cell => watchCell(cell, watched, trans));
  watchAll();
  // The notebook creates the widgets of new cells in its own handler of this
  // signal, connected before this one.
  notebook.model?.cells.changed.connect(watchAll);
}
