/**
 * The transcript views of a notebook follow the record a re-run replays;
 * a cell that goes (deleted, or the notebook shows another model) lets go of
 * its models without an error, and its views are no longer updated.
 */
import { CodeCell } from '@jupyterlab/cells';
import { NotebookModel } from '@jupyterlab/notebook';
import { NBTestUtils } from '@jupyterlab/notebook/lib/testutils';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { JSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { METADATA_KEY } from '../src/record';
import { trackSource } from '../src/source';

import { quietYjs } from './yjs';

const VIEW_MIME = 'application/x-qloop-test-view';

/** A stand-in for the transcript view: it records what it is given to show. */
class RecordingView extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly _shown: (JSONObject | null)[]) {
    super();
  }
  renderModel(): Promise<void> {
    return Promise.resolve();
  }
  showSource(record: JSONObject | null): void {
    this._shown.push(record);
  }
}

describe('trackSource', () => {
  let warn: jest.SpyInstance;
  let errors: jest.SpyInstance;

  beforeEach(() => {
    warn = quietYjs();
    // Lumino hands an exception thrown in a signal handler to console.error.
    errors = jest.spyOn(console, 'error');
  });

  afterEach(() => {
    errors.mockRestore();
    warn.mockRestore();
  });

  function notebookOf(model: NotebookModel, shown: (JSONObject | null)[]) {
    const notebook = NBTestUtils.createNotebook();
    notebook.rendermime.addFactory(
      {
        safe: true,
        mimeTypes: [VIEW_MIME],
        createRenderer: () => new RecordingView(shown)
      },
      0
    );
    notebook.model = model;
    trackSource(notebook);
    return notebook;
  }

  function modelOf(...sources: string[]): NotebookModel {
    const model = new NotebookModel();
    model.sharedModel.insertCells(
      0,
      sources.map(source => ({ cell_type: 'code', source, metadata: {} }))
    );
    return model;
  }

  const view = { output_type: 'display_data', data: { [VIEW_MIME]: {} } };

  it('gives a view the saved record, and a deleted cell goes without an error', () => {
    const shown: (JSONObject | null)[] = [];
    const model = modelOf('a', 'b', 'c');
    const notebook = notebookOf(model, shown);
    const cell = notebook.widgets[1] as CodeCell;
    cell.model.outputs.add(view);
    expect(shown).toEqual([null]);
    cell.model.setMetadata(METADATA_KEY, { digest: 'sha256:one' });
    expect(shown).toEqual([null, { digest: 'sha256:one' }]);

    model.sharedModel.deleteCell(1);
    model.sharedModel.deleteCell(0);
    expect(cell.isDisposed).toBe(true);
    expect(notebook.widgets).toHaveLength(1);
    expect(errors).not.toHaveBeenCalled();
    notebook.dispose();
    model.dispose();
  });

  it('no longer follows the models of a cell that went while they stay', () => {
    const shown: (JSONObject | null)[] = [];
    const first = modelOf('a');
    const notebook = notebookOf(first, shown);
    const cell = notebook.widgets[0] as CodeCell;
    const cellModel = cell.model;
    cellModel.outputs.add(view);
    expect(shown).toHaveLength(1);

    // Another model shown: the cell widgets go, the first model's cells stay.
    const second = modelOf('b');
    notebook.model = second;
    expect(cell.isDisposed).toBe(true);
    cellModel.setMetadata(METADATA_KEY, { digest: 'sha256:two' });
    cellModel.outputs.add(view);
    expect(shown).toHaveLength(1);
    expect(errors).not.toHaveBeenCalled();
    notebook.dispose();
    first.dispose();
    second.dispose();
  });
});
