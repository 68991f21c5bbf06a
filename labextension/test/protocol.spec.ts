/**
 * The comm protocol: every request gets one ack; only the listed operations
 * exist, only `metadata.qloop` may be written, and `read_notebook` answers a
 * bounded view of the cells.
 */
import { ICodeCellModel } from '@jupyterlab/cells';
import { NotebookModel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';

import { NotebookCells } from '../src/bridge';
import { ICellJSON } from '../src/notebookview';
import { ICellLookup, ICellMetadata, WRITABLE_KEYS } from '../src/protocol';

import { handleNow as handleRequest } from './answers';
import { quietYjs } from './yjs';

/** A notebook with cells that only hold metadata. */
class Cells implements ICellLookup {
  readonly cells = new Map<string, MetadataCell>();

  add(cellId: string): MetadataCell {
    const cell = new MetadataCell();
    this.cells.set(cellId, cell);
    return cell;
  }

  findCell(cellId: string): ICellMetadata | undefined {
    return this.cells.get(cellId);
  }
}

class MetadataCell implements ICellMetadata {
  readonly metadata = new Map<string, unknown>();

  setMetadata(key: string, value: unknown): void {
    this.metadata.set(key, value);
  }
}

const HELLO = { frontend: 'jupyterlab', version: '9.9.9' };
const OPERATIONS = [
  'hello',
  'set_metadata',
  'set_notebook_metadata',
  'read_notebook',
  'propose',
  'cell_source',
  'set_outputs',
  'revert_cell',
  'withdraw'
];
const RECORD: JSONObject = { schema_version: 1, status: 'completed' };

describe('handleRequest', () => {
  let cells: Cells;
  let cell: MetadataCell;

  beforeEach(() => {
    cells = new Cells();
    cell = cells.add('cell-1');
  });

  it('answers hello with the frontend, version and operations', () => {
    expect(
      handleRequest({ op: 'hello', request_id: 'r1' }, cells, HELLO)
    ).toEqual({
      op: 'ack',
      request_id: 'r1',
      ok: true,
      ...HELLO,
      operations: OPERATIONS
    });
  });

  it('writes the record of a cell and acks it', () => {
    const ack = handleRequest(
      {
        op: 'set_metadata',
        request_id: 7,
        cell_id: 'cell-1',
        key: 'qloop',
        value: RECORD
      },
      cells,
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 7, ok: true });
    expect(cell.metadata.get('qloop')).toEqual(RECORD);
  });

  it('only lets the kernel write the qloop key', () => {
    expect(WRITABLE_KEYS).toEqual(['qloop']);
    const ack = handleRequest(
      {
        op: 'set_metadata',
        request_id: 'k',
        cell_id: 'cell-1',
        key: 'tags',
        value: {}
      },
      cells,
      HELLO
    );
    expect(ack).toMatchObject({ request_id: 'k', ok: false });
    expect(ack['error']).toBe("key 'tags' is not writable (writable: qloop)");
    expect(cell.metadata.size).toBe(0);
  });

  it.each([
    [
      { cell_id: 'missing', key: 'qloop', value: RECORD },
      'no cell with id missing'
    ],
    [
      { cell_id: 'cell-1', key: 'qloop', value: [1, 2] },
      "'value' must be a JSON object"
    ],
    [
      { cell_id: 'cell-1', key: 'qloop', value: null },
      "'value' must be a JSON object"
    ],
    [
      { cell_id: 42, key: 'qloop', value: RECORD },
      "'cell_id' must be a non-empty string"
    ],
    [
      { cell_id: '', key: 'qloop', value: RECORD },
      "'cell_id' must be a non-empty string"
    ],
    [{ cell_id: 'cell-1', value: RECORD }, "'key' must be a non-empty string"]
  ])('refuses set_metadata %j', (fields, error) => {
    const ack = handleRequest(
      { op: 'set_metadata', request_id: 'bad', ...fields },
      cells,
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 'bad', ok: false, error });
    expect(cell.metadata.size).toBe(0);
  });

  it.each([
    'get_metadata',
    'delete_metadata',
    'launch',
    '__proto__',
    'toString'
  ])('refuses the unknown op %s', op => {
    const ack = handleRequest(
      { op, request_id: 'u', cell_id: 'cell-1', key: 'qloop' },
      cells,
      HELLO
    );
    expect(ack).toEqual({
      op: 'ack',
      request_id: 'u',
      ok: false,
      error: `unknown op ${JSON.stringify(op)}`
    });
  });

  it('refuses a request without an op', () => {
    expect(handleRequest({ request_id: 'n' }, cells, HELLO)).toEqual({
      op: 'ack',
      request_id: 'n',
      ok: false,
      error: 'unknown op null'
    });
  });

  it.each([null, 'hello', 3, ['op', 'hello'], undefined])(
    'refuses the non-object request %j with a null request id',
    data => {
      expect(handleRequest(data, cells, HELLO)).toEqual({
        op: 'ack',
        request_id: null,
        ok: false,
        error: 'a request must be a JSON object'
      });
    }
  );

  it('answers a request id of the wrong type with null', () => {
    const ack = handleRequest(
      { op: 'hello', request_id: { a: 1 } },
      cells,
      HELLO
    );
    expect(ack.request_id).toBeNull();
    expect(ack.ok).toBe(true);
  });
});

/** A notebook whose cells are nbformat JSON, as the bridge reads them. */
class JSONCells implements ICellLookup {
  constructor(readonly cells: ICellJSON[] | undefined) {}

  findCell(cellId: string): ICellMetadata | undefined {
    const found = (this.cells ?? []).some(cell => cell.id === cellId);
    return found ? { setMetadata: () => undefined } : undefined;
  }

  notebook() {
    return {
      path: 'dir/nb.ipynb',
      getMetadata: () => undefined,
      setMetadata: () => undefined
    };
  }

  cellsJSON(): ICellJSON[] | undefined {
    return this.cells;
  }
}

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk';

const CELLS: ICellJSON[] = [
  { id: 'md', cell_type: 'markdown', source: '# Notes', metadata: {} },
  {
    id: 'plot',
    cell_type: 'code',
    source: 'plot()',
    metadata: { qloop: { status: 'completed' } },
    execution_count: 2,
    outputs: [
      {
        output_type: 'display_data',
        data: { 'image/png': PNG, 'text/plain': '<Figure>' },
        metadata: {}
      }
    ]
  }
];

describe('read_notebook', () => {
  it('answers the view of every cell', () => {
    const ack = handleRequest(
      { op: 'read_notebook', request_id: 'r' },
      new JSONCells(CELLS),
      HELLO
    );
    expect(ack).toEqual({
      op: 'ack',
      request_id: 'r',
      ok: true,
      notebook_path: 'dir/nb.ipynb',
      total_cells: 2,
      missing: [],
      cells: [
        {
          id: 'md',
          cell_type: 'markdown',
          execution_count: null,
          agent: false,
          source: '# Notes',
          source_chars: 7,
          outputs: [],
          more_outputs: 0
        },
        {
          id: 'plot',
          cell_type: 'code',
          execution_count: 2,
          agent: true,
          source: 'plot()',
          source_chars: 6,
          outputs: [
            {
              output_type: 'display_data',
              text: '<Figure>',
              chars: 8,
              mime: ['image/png', 'text/plain']
            }
          ],
          more_outputs: 0
        }
      ]
    });
    expect(JSON.stringify(ack)).not.toContain(PNG);
  });

  it('answers only from the notebook that holds the running cell', () => {
    const cells = new JSONCells(CELLS);
    const here = handleRequest(
      { op: 'read_notebook', request_id: 'r', cell_id: 'plot' },
      cells,
      HELLO
    );
    expect(here).toMatchObject({ ok: true, total_cells: 2 });
    const elsewhere = handleRequest(
      { op: 'read_notebook', request_id: 'r', cell_id: 'not-here' },
      cells,
      HELLO
    );
    expect(elsewhere).toEqual({
      op: 'ack',
      request_id: 'r',
      ok: false,
      error: 'no cell with id not-here'
    });
  });

  it('answers the asked cells without outputs', () => {
    const ack = handleRequest(
      {
        op: 'read_notebook',
        request_id: 'r',
        cell_ids: ['plot', 'gone'],
        outputs: false
      },
      new JSONCells(CELLS),
      HELLO
    );
    expect(ack).toMatchObject({
      ok: true,
      total_cells: 2,
      missing: ['gone'],
      cells: [{ id: 'plot', source: 'plot()' }]
    });
    expect(ack['cells']).toEqual([
      expect.not.objectContaining({ outputs: expect.anything() })
    ]);
  });

  it.each([
    [
      { cell_ids: 'plot' },
      "'cell_ids' must be an array of non-empty strings, or null for every cell"
    ],
    [
      { cell_ids: ['plot', ''] },
      "'cell_ids' must be an array of non-empty strings, or null for every cell"
    ],
    [
      { cell_ids: [1] },
      "'cell_ids' must be an array of non-empty strings, or null for every cell"
    ],
    [{ outputs: 'yes' }, "'outputs' must be a boolean"],
    [{ outputs: 1 }, "'outputs' must be a boolean"]
  ])('refuses read_notebook %j', (fields, error) => {
    const ack = handleRequest(
      { op: 'read_notebook', request_id: 'bad', ...fields },
      new JSONCells(CELLS),
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 'bad', ok: false, error });
  });

  it('refuses without a notebook to read', () => {
    for (const lookup of [new JSONCells(undefined), new Cells()]) {
      expect(
        handleRequest({ op: 'read_notebook', request_id: 'n' }, lookup, HELLO)
      ).toEqual({
        op: 'ack',
        request_id: 'n',
        ok: false,
        error: 'no notebook to read'
      });
    }
  });

  it('reads the cells of a notebook model', () => {
    // @jupyter/ydoc builds standalone cells and then moves them into the
    // notebook's document, and yjs warns about both steps.
    const warn = quietYjs();
    const model = new NotebookModel();
    model.sharedModel.insertCells(0, [
      { cell_type: 'markdown', source: 'intro', metadata: {} },
      {
        cell_type: 'code',
        source: 'print(1)',
        metadata: {},
        execution_count: 1,
        outputs: [{ output_type: 'stream', name: 'stdout', text: '1\n' }]
      }
    ]);
    const lookup = new NotebookCells(
      () => model,
      () => 'x.ipynb'
    );
    const ids = [model.cells.get(0).id, model.cells.get(1).id];
    const ack = handleRequest(
      { op: 'read_notebook', request_id: 1, cell_ids: null },
      lookup,
      HELLO
    );
    expect(ack).toMatchObject({
      ok: true,
      notebook_path: 'x.ipynb',
      total_cells: 2,
      cells: [
        { id: ids[0], cell_type: 'markdown', source: 'intro' },
        {
          id: ids[1],
          cell_type: 'code',
          execution_count: 1,
          outputs: [
            { output_type: 'stream', name: 'stdout', text: '1\n', chars: 2 }
          ]
        }
      ]
    });
    model.dispose();
    warn.mockRestore();
    expect(
      handleRequest({ op: 'read_notebook', request_id: 2 }, lookup, HELLO)
    ).toMatchObject({ ok: false, error: 'no notebook to read' });
  });
});

describe('cell_source and set_outputs', () => {
  let model: NotebookModel;
  let lookup: NotebookCells;
  let ids: string[];
  let warn: jest.SpyInstance;

  beforeEach(() => {
    warn = quietYjs();
    model = new NotebookModel();
    model.sharedModel.insertCells(0, [
      { cell_type: 'code', source: '%%agent\nrun it', metadata: {} },
      { cell_type: 'markdown', source: 'notes', metadata: {} },
      {
        cell_type: 'code',
        source: 'df.describe()',
        metadata: {},
        execution_count: 4,
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'old\n' }]
      }
    ]);
    lookup = new NotebookCells(
      () => model,
      () => 'x.ipynb'
    );
    ids = Array.from(model.cells, cell => cell.id);
  });

  afterEach(() => {
    model.dispose();
    warn.mockRestore();
  });

  it("answers a cell's type and whole source", () => {
    const ack = handleRequest(
      { op: 'cell_source', request_id: 1, cell_id: ids[0], target: ids[2] },
      lookup,
      HELLO
    );
    expect(ack).toEqual({
      op: 'ack',
      request_id: 1,
      ok: true,
      cell_type: 'code',
      source: 'df.describe()'
    });
    expect(
      handleRequest(
        { op: 'cell_source', request_id: 2, cell_id: ids[0], target: ids[1] },
        lookup,
        HELLO
      )
    ).toMatchObject({ ok: true, cell_type: 'markdown', source: 'notes' });
  });

  it('refuses a cell the notebook lacks, and a request from another notebook', () => {
    expect(
      handleRequest(
        { op: 'cell_source', request_id: 1, cell_id: ids[0], target: 'gone' },
        lookup,
        HELLO
      )
    ).toEqual({
      op: 'ack',
      request_id: 1,
      ok: false,
      error: 'no cell with id gone'
    });
    expect(
      handleRequest(
        { op: 'cell_source', request_id: 2, cell_id: 'other', target: ids[2] },
        lookup,
        HELLO
      )
    ).toMatchObject({ ok: false, error: 'no cell with id other' });
  });

  it("makes the outputs the cell's own, with the source that ran", () => {
    const outputs = [
      { output_type: 'stream', name: 'stdout', text: 'ran\n' },
      {
        output_type: 'execute_result',
        execution_count: null,
        data: { 'text/plain': '42' },
        metadata: {}
      }
    ];
    const ack = handleRequest(
      {
        op: 'set_outputs',
        request_id: 3,
        cell_id: ids[0],
        target: ids[2],
        source: 'df.describe()  # edited on the card',
        outputs,
        effect: 'rebinds df'
      },
      lookup,
      HELLO
    );
    expect(ack).toEqual({ op: 'ack', request_id: 3, ok: true });
    const json = model.cells.get(2).toJSON();
    expect(json.source).toBe('df.describe()  # edited on the card');
    expect(json.outputs).toEqual(outputs);
    expect(json.execution_count).toBeNull();
    // The shared document holds them: every view and collaborator sees them.
    const shared = model.sharedModel.toJSON().cells[2];
    expect(shared.outputs).toEqual(outputs);
  });

  it('refuses outputs that are not nbformat outputs, and a markdown cell', () => {
    const before = model.cells.get(2).toJSON();
    for (const outputs of [
      'text',
      [{ output_type: 'script', text: 'x' }],
      [null]
    ]) {
      expect(
        handleRequest(
          {
            op: 'set_outputs',
            request_id: 4,
            cell_id: ids[0],
            target: ids[2],
            source: 'x = 1',
            outputs
          } as unknown as JSONObject,
          lookup,
          HELLO
        )
      ).toMatchObject({
        ok: false,
        error:
          "'outputs' must be an array of nbformat outputs (stream, display_data, execute_result, error)"
      });
    }
    expect(
      handleRequest(
        {
          op: 'set_outputs',
          request_id: 5,
          cell_id: ids[0],
          target: ids[1],
          source: 'notes',
          outputs: []
        },
        lookup,
        HELLO
      )
    ).toMatchObject({ ok: false, error: `cell ${ids[1]} is not a code cell` });
    expect(
      handleRequest(
        {
          op: 'set_outputs',
          request_id: 6,
          cell_id: ids[0],
          target: ids[2],
          source: 'x = 1',
          outputs: [],
          effect: 3
        },
        lookup,
        HELLO
      )
    ).toMatchObject({ ok: false, error: "'effect' must be a string" });
    expect(model.cells.get(2).toJSON()).toEqual(before);
  });
});

describe('a record saved in a page that has no output of its turn', () => {
  const MIME = 'application/vnd.qloop.transcript+json';
  let model: NotebookModel;
  let lookup: NotebookCells;
  let id: string;
  let warn: jest.SpyInstance;

  const record = (fields: JSONObject = {}): JSONObject => ({
    schema_version: 2,
    session_id: 's1',
    status: 'completed',
    prompt: 'Set y.',
    answer: 'Done.',
    timings: { started_at: '2026-12-06T01:00:00.000001+00:00' },
    digest: 'sha256:one',
    ...fields
  });

  function save(value: JSONObject): void {
    const ack = handleRequest(
      { op: 'set_metadata', request_id: 1, cell_id: id, key: 'qloop', value },
      lookup,
      HELLO
    );
    expect(ack).toMatchObject({ ok: true });
  }

  function mirrors(): unknown[] {
    const outputs = model.cells.get(0).toJSON().outputs as JSONObject[];
    return outputs.map(output => (output['data'] as JSONObject)?.[MIME]);
  }

  beforeEach(() => {
    warn = quietYjs();
    model = new NotebookModel();
    model.sharedModel.insertCells(0, [
      {
        cell_type: 'code',
        source: '%%agent\nSet y.',
        metadata: {},
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'earlier\n' }]
      }
    ]);
    lookup = new NotebookCells(
      () => model,
      () => 'x.ipynb'
    );
    id = model.cells.get(0).id;
  });

  afterEach(() => {
    model.dispose();
    warn.mockRestore();
  });

  it('shows the finished turn from its record, once', () => {
    save(record());
    expect(mirrors()).toEqual([undefined, record()]);
    expect(model.cells.get(0).getMetadata('qloop')).toEqual(record());
    save(record());
    expect(mirrors()).toEqual([undefined, record()]);
  });

  it("replaces an earlier copy of the same turn's mirror, and adds another turn's", () => {
    save(record());
    const later = record({ digest: 'sha256:two', answer: 'Done, again.' });
    save(later);
    expect(mirrors()).toEqual([undefined, later]);
    const next = record({
      digest: 'sha256:three',
      timings: { started_at: '2026-12-06T02:00:00.000001+00:00' }
    });
    save(next);
    expect(mirrors()).toEqual([undefined, later, next]);
  });

  it('leaves a running turn, and a page that runs the cell, to the kernel', () => {
    save(record({ status: 'running', digest: '' }));
    expect(mirrors()).toEqual([undefined]);
    (model.cells.get(0) as ICodeCellModel).executionState = 'running';
    save(record());
    expect(mirrors()).toEqual([undefined]);
    expect(model.cells.get(0).getMetadata('qloop')).toEqual(record());
  });
});
