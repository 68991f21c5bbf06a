/**
 * The notebook's saved approval grants: the `hello` answer carries them with
 * the notebook's path, `set_notebook_metadata` writes them only into the
 * notebook that holds the given cell, and the notice on open lists them.
 */
import { nullTranslator } from '@jupyterlab/translation';

import { grantsNotice } from '../src/grants';
import {
  GRANTS_KEY,
  ICellLookup,
  ICellMetadata,
  INotebookMetadata,
  NOTEBOOK_WRITABLE_KEYS
} from '../src/protocol';

import { handleNow as handleRequest } from './answers';

class Notebook implements ICellLookup, INotebookMetadata {
  readonly metadata = new Map<string, unknown>();
  readonly cells = new Map<string, ICellMetadata>();
  constructor(readonly path: string) {}

  findCell(cellId: string): ICellMetadata | undefined {
    return this.cells.get(cellId);
  }
  notebook(): INotebookMetadata {
    return this;
  }
  getMetadata(key: string): unknown {
    return this.metadata.get(key);
  }
  setMetadata(key: string, value: unknown): void {
    this.metadata.set(key, value);
  }
}

const HELLO = { frontend: 'jupyterlab', version: '9.9.9' };
const SAVED = {
  version: 1,
  grants: [{ tool: 'run_code', risk: 'write', granted_at: 'now' }],
  signature: 'hmac-sha256:00'
};
const trans = nullTranslator.load('qloop-kernel');

describe('notebook grants over the comm', () => {
  let notebook: Notebook;

  beforeEach(() => {
    notebook = new Notebook('work/analysis.ipynb');
    notebook.cells.set('cell-1', { setMetadata: () => undefined });
  });

  it('answers hello with the path and the saved grants', () => {
    notebook.setMetadata(GRANTS_KEY, SAVED);
    expect(
      handleRequest({ op: 'hello', request_id: 'h' }, notebook, HELLO)
    ).toEqual({
      op: 'ack',
      request_id: 'h',
      ok: true,
      ...HELLO,
      operations: expect.any(Array),
      notebook_path: 'work/analysis.ipynb',
      notebook_grants: SAVED
    });
  });

  it('answers hello with null grants when there are none or they are not an object', () => {
    const none = handleRequest({ op: 'hello', request_id: 1 }, notebook, HELLO);
    expect(none['notebook_grants']).toBeNull();
    notebook.setMetadata(GRANTS_KEY, ['not', 'an', 'object']);
    const junk = handleRequest({ op: 'hello', request_id: 2 }, notebook, HELLO);
    expect(junk['notebook_grants']).toBeNull();
  });

  it('writes the grants into the notebook that holds the cell', () => {
    const ack = handleRequest(
      {
        op: 'set_notebook_metadata',
        request_id: 's',
        cell_id: 'cell-1',
        key: GRANTS_KEY,
        value: SAVED
      },
      notebook,
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 's', ok: true });
    expect(notebook.getMetadata(GRANTS_KEY)).toEqual(SAVED);
  });

  it.each([
    [
      { cell_id: 'other-notebooks-cell', key: GRANTS_KEY, value: SAVED },
      'no cell with id other-notebooks-cell'
    ],
    [
      { cell_id: 'cell-1', key: 'kernelspec', value: SAVED },
      "notebook key 'kernelspec' is not writable (writable: qloop_grants)"
    ],
    [
      { cell_id: 'cell-1', key: GRANTS_KEY, value: 'x' },
      "'value' must be a JSON object"
    ]
  ])('refuses set_notebook_metadata %j', (fields, error) => {
    const ack = handleRequest(
      { op: 'set_notebook_metadata', request_id: 'bad', ...fields },
      notebook,
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 'bad', ok: false, error });
    expect(notebook.metadata.size).toBe(0);
  });

  it('only lets the kernel write the grants key', () => {
    expect(NOTEBOOK_WRITABLE_KEYS).toEqual(['qloop_grants']);
  });
});

describe('grantsNotice', () => {
  it('lists the saved grants and says when they apply', () => {
    const notice = grantsNotice(
      { ...SAVED, grants: [...SAVED.grants, { tool: 'drop', risk: null }] },
      trans
    );
    expect(notice).toContain("run_code 'write' steps; drop calls");
    expect(notice).toContain('only if your own kernel saved them');
    expect(notice).toContain('%agent revoke all');
  });

  it.each([
    undefined,
    null,
    'x',
    { grants: 'x' },
    { grants: [] },
    { grants: [{}] }
  ])('says nothing for %j', saved => {
    expect(grantsNotice(saved, trans)).toBeNull();
  });
});
