/**
 * Marks agent cells: cells whose `metadata.qloop` holds a saved turn.
 *
 * The cell node gets the class `qloop-agent-cell`, a `data-qloop-status`
 * attribute and the badge text in the CSS variable `--qloop-badge`, which the
 * stylesheet shows at the bottom right of the cell's input. The badge also
 * says when a completed turn cannot replay (its code steps were all denied),
 * how many earlier records the cell keeps, and "stale" when a cell the turn
 * read has been edited since (`data-qloop-stale`).
 */
import { Cell, ICellModel } from '@jupyterlab/cells';
import { Notebook } from '@jupyterlab/notebook';
import { TranslationBundle } from '@jupyterlab/translation';

import { historyOf, isReplayable, isStale } from './history';
import { badgeText } from './labels';
import { METADATA_KEY, TurnStatus, statusOf, unreadableReason } from './record';

/** Class on the node of a cell that carries a saved record. */
export const AGENT_CELL_CLASS = 'qloop-agent-cell';
/** Attribute with the record's status, or `unreadable` for a record the view cannot read. */
export const STATUS_ATTRIBUTE = 'data-qloop-status';
/** CSS variable holding the badge text (a CSS string). */
export const BADGE_VARIABLE = '--qloop-badge';
/** How long after the last edit the staleness of agent cells is checked. */
export const STALE_DELAY_MS = 300;
/** Attribute present while a cell the turn read has been edited since. */
export const STALE_ATTRIBUTE = 'data-qloop-stale';

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

/** The badge of a cell model's record: status, replayability, history, staleness. */
export function markerText(
  record: unknown,
  status: TurnStatus | 'unreadable',
  stale: boolean,
  trans: TranslationBundle
): string {
  let text =
    status === 'completed' && !isReplayable(record)
      ? trans.__('agent · not replayable (its code steps were denied)')
      : badgeText(status, trans);
  const earlier = historyOf(record).length;
  if (earlier > 0) {
    text += trans._n(' · %1 earlier record', ' · %1 earlier records', earlier);
  }
  if (stale) {
    text += trans.__(' · stale: a cell it read was edited');
  }
  return text;
}

/** Bring one cell's marker up to date with its metadata. */
export function updateMarker(
  cell: Cell,
  trans: TranslationBundle,
  stale = false
): void {
  if (cell.isDisposed) {
    return;
  }
  const status = markerStatus(cell.model);
  const node = cell.node;
  if (status === null) {
    node.classList.remove(AGENT_CELL_CLASS);
    node.removeAttribute(STATUS_ATTRIBUTE);
    node.removeAttribute(STALE_ATTRIBUTE);
    node.style.removeProperty(BADGE_VARIABLE);
    return;
  }
  const record = cell.model.getMetadata(METADATA_KEY);
  node.classList.add(AGENT_CELL_CLASS);
  node.setAttribute(STATUS_ATTRIBUTE, status);
  node.toggleAttribute(STALE_ATTRIBUTE, stale);
  node.style.setProperty(
    BADGE_VARIABLE,
    JSON.stringify(markerText(record, status, stale, trans))
  );
}

/** Re-mark the notebook's agent cells, checking whether the cells they read were edited. */
async function refreshStale(
  notebook: Notebook,
  trans: TranslationBundle
): Promise<void> {
  const sources = new Map<string, string>();
  for (const cell of notebook.widgets) {
    sources.set(cell.model.id, cell.model.sharedModel.getSource());
  }
  for (const cell of notebook.widgets) {
    const record = cell.model.getMetadata(METADATA_KEY);
    if (record !== undefined) {
      const stale = await isStale(record, id => sources.get(id));
      updateMarker(cell, trans, stale);
    }
  }
}

function watchCell(
  cell: Cell,
  watched: WeakSet<Cell>,
  trans: TranslationBundle,
  refresh: () => void
): void {
  if (watched.has(cell)) {
    return;
  }
  watched.add(cell);
  const model = cell.model;
  const onChange = (_: unknown, change: { key: string }) => {
    if (change.key === METADATA_KEY) {
      updateMarker(cell, trans);
      refresh();
    }
  };
  model.metadataChanged.connect(onChange);
  model.contentChanged.connect(refresh);
  cell.disposed.connect(() => {
    model.metadataChanged.disconnect(onChange);
    model.contentChanged.disconnect(refresh);
  });
  updateMarker(cell, trans);
}

/** Mark the notebook's agent cells now and whenever cells or metadata change. */
export function trackMarkers(
  notebook: Notebook,
  trans: TranslationBundle
): void {
  const watched = new WeakSet<Cell>();
  let pending: ReturnType<typeof setTimeout> | null = null;
  // Edits arrive per keystroke: the staleness check waits for a pause.
  const refresh = () => {
    if (pending !== null) {
      clearTimeout(pending);
    }
    pending = setTimeout(() => {
      pending = null;
      void refreshStale(notebook, trans);
    }, STALE_DELAY_MS);
  };
  const watchAll = () => {
    notebook.widgets.forEach(cell => watchCell(cell, watched, trans, refresh));
    refresh();
  };
  watchAll();
  // The notebook creates the widgets of new cells in its own handler of this
  // signal, connected before this one.
  notebook.model?.cells.changed.connect(watchAll);
}
