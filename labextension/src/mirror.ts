/**
 * Moves the transcript mirror (a `display_data` output) into `metadata.qloop`.
 *
 * A notebook run headless, or saved while the comm was not there, carries the
 * record only as an output; outputs are not sent back to the kernel on a
 * re-run and "Clear outputs" erases them, so the record is copied into the
 * cell metadata when the cell enters the notebook model, and again when its
 * outputs change in place: under real-time collaboration the server loads a
 * file written meanwhile (by papermill, say) into the open notebook cell by
 * cell, so no cell is added.
 *
 * A mirror never silently replaces an approved record: one that disagrees
 * with the metadata (a run that could not see the saved record, say) goes into
 * the record's history, and the user can restore it (see `history.ts`).
 */
import { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookModel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';

import { merged } from './history';
import { METADATA_KEY, TRANSCRIPT_MIME, isJSONObject, isNewer } from './record';

/** The newest transcript record among a code cell's outputs, or null. */
export function mirrorRecord(cell: ICellModel): JSONObject | null {
  if (cell.type !== 'code') {
    return null;
  }
  const outputs = (cell as ICodeCellModel).outputs;
  let newest: JSONObject | null = null;
  for (let index = 0; index < outputs.length; index++) {
    const output = outputs.get(index);
    // Only these carry a MIME bundle (and reading a stream's data joins its text).
    if (output.type !== 'display_data' && output.type !== 'execute_result') {
      continue;
    }
    const record = output.data[TRANSCRIPT_MIME];
    if (isJSONObject(record) && (newest === null || !isNewer(newest, record))) {
      newest = record;
    }
  }
  return newest;
}

/** Bring a cell's metadata up to date with its mirror, losing no record. */
export function syncCell(cell: ICellModel): void {
  if (cell.isDisposed) {
    return;
  }
  const mirror = mirrorRecord(cell);
  const saved = cell.getMetadata(METADATA_KEY);
  if (mirror === null) {
    return;
  }
  const kept = merged(saved, mirror);
  if (kept !== saved) {
    cell.setMetadata(METADATA_KEY, kept);
  }
}

/**
 * Sync a code cell again whenever its outputs change, once per burst of
 * changes. Writing metadata from inside the outputs signal would nest a
 * change in the one being announced (a remote one, under collaboration).
 */
function watchOutputs(cell: ICellModel, watched: WeakSet<ICellModel>): void {
  if (cell.type !== 'code' || watched.has(cell)) {
    return;
  }
  watched.add(cell);
  let pending = false;
  // The outputs list goes with the cell: disposing it disconnects this.
  (cell as ICodeCellModel).outputs.changed.connect(() => {
    if (!pending) {
      pending = true;
      void Promise.resolve().then(() => {
        pending = false;
        syncCell(cell);
      });
    }
  });
}

/**
 * Keep a notebook model in sync: now, for cells added later (a revert or
 * a reload replaces every cell; a paste brings cells from elsewhere), and
 * whenever a cell's outputs change.
 */
export function trackMirrors(model: INotebookModel): void {
  const watched = new WeakSet<ICellModel>();
  for (const cell of model.cells) {
    syncCell(cell);
    watchOutputs(cell, watched);
  }
  model.cells.changed.connect((_, change) => {
    if (change.type !== 'add' && change.type !== 'set') {
      return;
    }
    const added = [...change.newValues];
    added.forEach(cell => watchOutputs(cell, watched));
    // Writing metadata from inside the cell-list signal would nest a change
    // in the one being announced; wait for it to finish.
    void Promise.resolve().then(() => added.forEach(syncCell));
  });
}
