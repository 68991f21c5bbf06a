/**
 * The comm protocol: every request gets one ack; only `hello` and
 * `set_metadata` exist, and only `metadata.qloop` may be written.
 */
import { JSONObject } from '@lumino/coreutils';

import {
  ICellLookup,
  ICellMetadata,
  WRITABLE_KEYS,
  handleRequest
} from '../src/protocol';

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

const HELLO: JSONObject = { frontend: 'jupyterlab', version: '9.9.9' };
const RECORD: JSONObject = { schema_version: 1, status: 'completed' };

describe('handleRequest', () => {
  let cells: Cells;
  let cell: MetadataCell;

  beforeEach(() => {
    cells = new Cells();
    cell = cells.add('cell-1');
  });

  it('answers hello with the frontend and version', () => {
    expect(
      handleRequest({ op: 'hello', request_id: 'r1' }, cells, HELLO)
    ).toEqual({ op: 'ack', request_id: 'r1', ok: true, ...HELLO });
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
