/**
 * "Copy to cell": an approved code step of a saved turn becomes an ordinary
 * code cell below the agent cell, so the work runs without qloop or a model.
 *
 * The transcript view is a MIME renderer with no access to the notebook: its
 * button sends a bubbling `qloop:copy-to-cell` DOM event carrying the code,
 * and the notebook plugin below inserts the cell.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { COPY_EVENT, ICopyDetail } from './copybutton';
import { eachPanel } from './notebooks';

/** Where the copy of a step goes: below the agent cell and the copies made from it. */
export function insertIndex(
  cells: readonly ICellModel[],
  agentIndex: number,
  copies: WeakSet<ICellModel>
): number {
  let index = agentIndex + 1;
  while (index < cells.length && copies.has(cells[index])) {
    index++;
  }
  return index;
}

/** Insert the copied steps of a notebook view's transcripts as code cells. */
export function acceptCopies(panel: NotebookPanel): void {
  const copies = new WeakSet<ICellModel>();
  panel.content.node.addEventListener(COPY_EVENT, event => {
    const detail = (event as CustomEvent<ICopyDetail>).detail;
    const target = event.target as Node | null;
    const notebook = panel.content;
    const agentIndex = notebook.widgets.findIndex(
      cell => target !== null && cell.node.contains(target)
    );
    const model = notebook.model;
    if (agentIndex < 0 || !model || typeof detail?.code !== 'string') {
      return;
    }
    event.stopPropagation();
    const cells = Array.from(model.cells);
    const index = insertIndex(cells, agentIndex, copies);
    model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: detail.code,
      metadata: {}
    });
    copies.add(model.cells.get(index));
    notebook.activeCellIndex = index;
  });
}

/** Copies steps of saved turns into cells, in every notebook view. */
export const copyToCellPlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:copy-to-cell',
  description: 'Copies a step of a saved qloop turn into a code cell.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    eachPanel(tracker, acceptCopies);
  }
};
