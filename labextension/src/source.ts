/**
 * The transcript view shows the code the approval card will run. A re-run
 * replays the record in the cell's metadata (the kernel receives it with the
 * execute request), while the view renders the record saved in the cell's
 * output; when their code differs (a record edited by hand, say), the view
 * renders the metadata's record and says so.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { Notebook } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';
import { Panel, Widget } from '@lumino/widgets';

import { METADATA_KEY, isJSONObject } from './record';

/** What the transcript view offers (duck-typed: it lives in the MIME bundle). */
interface ISourceView {
  showSource(record: JSONObject | null): void;
}

function isSourceView(widget: Widget): widget is Widget & ISourceView {
  return typeof (widget as Partial<ISourceView>).showSource === 'function';
}

/** The transcript views among a code cell's outputs. */
export function sourceViews(cell: CodeCell): ISourceView[] {
  const views: ISourceView[] = [];
  for (const child of cell.outputArea.widgets) {
    const inner = child instanceof Panel ? child.widgets : [child];
    inner.filter(isSourceView).forEach(view => views.push(view));
  }
  return views;
}

/** Give each transcript view of `cell` the record the cell would replay. */
export function applySource(cell: CodeCell): void {
  const record = cell.model.getMetadata(METADATA_KEY);
  const saved = isJSONObject(record) ? record : null;
  sourceViews(cell).forEach(view => view.showSource(saved));
}

function watchCell(cell: Cell, watched: WeakSet<Cell>): void {
  if (!(cell instanceof CodeCell) || watched.has(cell)) {
    return;
  }
  watched.add(cell);
  // Held here: a disposed cell has let go of its model and output area when
  // `disposed` fires, and both models may outlive it.
  const outputs = cell.outputArea.model;
  const model = cell.model;
  const update = () => applySource(cell);
  // Connected after the output area's own handler, which builds the views.
  outputs.changed.connect(update);
  model.metadataChanged.connect(update);
  cell.disposed.connect(() => {
    outputs.changed.disconnect(update);
    model.metadataChanged.disconnect(update);
  });
  update();
}

/** Keep every transcript view of `notebook` showing the record a re-run replays. */
export function trackSource(notebook: Notebook): void {
  const watched = new WeakSet<Cell>();
  const watchAll = () =>
    notebook.widgets.forEach(cell => watchCell(cell, watched));
  watchAll();
  notebook.model?.cells.changed.connect(watchAll);
}
