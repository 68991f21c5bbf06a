/**
 * The output mirror moves into `metadata.qloop` without ever losing a record,
 * with JupyterLab's own cell and notebook models.
 */
import { CodeCellModel, MarkdownCellModel } from '@jupyterlab/cells';
import { NotebookModel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';

import { mirrorRecord, syncCell, trackMirrors } from '../src/mirror';
import { TRANSCRIPT_MIME } from '../src/record';

function record(updatedAt: string, prompt = 'p'): JSONObject {
  return {
    schema_version: 1,
    status: 'completed',
    prompt,
    updated_at: updatedAt
  };
}

// @jupyter/ydoc builds standalone cells and then moves them into the
// notebook's document, and yjs warns about both steps: not this module's concern.
const YJS_WARNINGS = ['Invalid access: Add Yjs type', '[yjs#509]'];
const warn = console.warn;
beforeAll(() => {
  jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    const message = String(args[0]);
    if (!YJS_WARNINGS.some(prefix => message.startsWith(prefix))) {
      warn(...args);
    }
  });
});
afterAll(() => jest.restoreAllMocks());

const OLD = record('2025-03-04T10:00:00.000001+00:00', 'old');
const NEW = record('2025-03-04T10:00:00.000002+00:00', 'new');

function mirrorOutput(data: JSONObject) {
  return {
    output_type: 'display_data',
    data: { [TRANSCRIPT_MIME]: data, 'text/plain': 'agent turn' },
    metadata: {}
  };
}

function codeCell(records: JSONObject[], saved?: JSONObject): CodeCellModel {
  const cell = new CodeCellModel({});
  records.forEach(data => cell.outputs.add(mirrorOutput(data)));
  if (saved) {
    cell.setMetadata('qloop', saved);
  }
  return cell;
}

describe('mirrorRecord', () => {
  it('picks the newest mirror among the outputs', () => {
    expect(mirrorRecord(codeCell([OLD, NEW, OLD]))).toEqual(NEW);
  });

  it('ignores outputs that are not records', () => {
    const cell = codeCell([]);
    cell.outputs.add({
      output_type: 'display_data',
      data: { [TRANSCRIPT_MIME]: 'not a record' },
      metadata: {}
    });
    cell.outputs.add({ output_type: 'stream', name: 'stdout', text: 'hi' });
    expect(mirrorRecord(cell)).toBeNull();
  });

  it('has nothing for a Markdown cell', () => {
    expect(mirrorRecord(new MarkdownCellModel({}))).toBeNull();
  });
});

describe('syncCell', () => {
  it('copies a mirror into empty metadata', () => {
    const cell = codeCell([NEW]);
    syncCell(cell);
    expect(cell.getMetadata('qloop')).toEqual(NEW);
  });

  it('takes a mirror written knowing the saved record (a successor)', () => {
    const saved = { ...OLD, digest: 'sha256:old' };
    const successor = { ...NEW, digest: 'sha256:new', history: [saved] };
    const cell = codeCell([successor], saved);
    syncCell(cell);
    expect(cell.getMetadata('qloop')).toEqual(successor);
  });

  it('keeps the saved record and puts a disagreeing mirror in its history', () => {
    const saved = { ...OLD, digest: 'sha256:approved' };
    const blind = { ...NEW, digest: 'sha256:blind', metadata_unseen: true };
    const cell = codeCell([blind], saved);
    syncCell(cell);
    const kept = cell.getMetadata('qloop') as JSONObject;
    expect(kept['digest']).toBe('sha256:approved');
    expect(kept['history']).toEqual([blind]);
    syncCell(cell); // opening the notebook again adds nothing
    expect((cell.getMetadata('qloop') as JSONObject)['history']).toEqual([
      blind
    ]);
  });

  it('writes nothing without a mirror', () => {
    const cell = codeCell([]);
    syncCell(cell);
    expect(cell.getMetadata('qloop')).toBeUndefined();
  });
});

describe('trackMirrors', () => {
  it('syncs the cells of a notebook now and the cells added later', async () => {
    const notebook = new NotebookModel();
    notebook.sharedModel.insertCells(0, [
      {
        cell_type: 'code',
        source: '%%agent old',
        metadata: {},
        outputs: [mirrorOutput(OLD)]
      }
    ]);
    trackMirrors(notebook);
    expect(notebook.cells.get(0).getMetadata('qloop')).toEqual(OLD);

    notebook.sharedModel.insertCells(1, [
      {
        cell_type: 'code',
        source: '%%agent new',
        metadata: { qloop: OLD },
        outputs: [mirrorOutput(NEW)]
      }
    ]);
    // The copy waits for the cell-list change to finish; the saved record
    // stays, the other one goes into its history.
    expect(notebook.cells.get(1).getMetadata('qloop')).toEqual(OLD);
    await Promise.resolve();
    expect(notebook.cells.get(1).getMetadata('qloop')).toEqual({
      ...OLD,
      history: [NEW]
    });
    notebook.dispose();
  });

  it('syncs a cell again when its outputs change in place', async () => {
    // Under collaboration the server loads a file written meanwhile into the
    // shared document cell by cell: the cell stays, its outputs change.
    const notebook = new NotebookModel();
    const saved = { ...OLD, digest: 'sha256:approved' };
    notebook.sharedModel.insertCells(0, [
      {
        cell_type: 'code',
        source: '%%agent p',
        metadata: { qloop: saved },
        outputs: [mirrorOutput(saved)]
      }
    ]);
    trackMirrors(notebook);
    const cell = notebook.cells.get(0) as CodeCellModel;
    expect(cell.getMetadata('qloop')).toEqual(saved);
    let writes = 0;
    cell.metadataChanged.connect(() => (writes += 1));

    const blind = { ...NEW, digest: 'sha256:blind', metadata_unseen: true };
    cell.sharedModel.setOutputs([mirrorOutput(blind)]);
    await Promise.resolve();
    expect(cell.getMetadata('qloop')).toEqual({ ...saved, history: [blind] });
    expect(writes).toBe(1);

    // Later output changes that bring no other record write nothing more.
    cell.outputs.add({ output_type: 'stream', name: 'stdout', text: 'more' });
    await Promise.resolve();
    expect(writes).toBe(1);
    notebook.dispose();
  });
});
