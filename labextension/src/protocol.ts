/**
 * The `qloop` comm protocol: requests from the kernel, acknowledgements back.
 *
 * Every request carries an `op` and a `request_id`; every request gets exactly
 * one `ack` with the same `request_id`. A malformed request gets `ok: false`
 * with the reason and never throws. The kernel sends four operations: `hello`
 * (which frontend and version is there, which operations it answers, and,
 * when the lookup reaches the notebook, its path and saved approval grants),
 * `set_metadata` (save a record in a cell), `set_notebook_metadata` (save the
 * approval grants in the notebook that holds the given cell) and
 * `read_notebook` (a bounded view of the notebook's cells and outputs).
 */
import { JSONObject } from '@lumino/coreutils';

import { ICellJSON, notebookView } from './notebookview';
import { METADATA_KEY, isJSONObject } from './record';

/** The metadata operation the bridge needs from a cell model. */
export interface ICellMetadata {
  setMetadata(key: string, value: unknown): void;
}

/** The notebook itself: its path and its notebook-level metadata. */
export interface INotebookMetadata {
  readonly path: string;
  getMetadata(key: string): unknown;
  setMetadata(key: string, value: unknown): void;
}

/** Finds a cell of the notebook a kernel belongs to. */
export interface ICellLookup {
  /** The cell with this id, or undefined when the notebook has none. */
  findCell(cellId: string): ICellMetadata | undefined;
  /** The notebook, when this lookup can reach it (and it is open). */
  notebook?(): INotebookMetadata | undefined;
  /** Every cell as nbformat JSON, in order, when this lookup can reach the notebook. */
  cellsJSON?(): ICellJSON[] | undefined;
}

/** The reply to one request. */
export interface IAck extends JSONObject {
  op: 'ack';
  request_id: string | number | null;
  ok: boolean;
}

/** Metadata keys a kernel may write. */
export const WRITABLE_KEYS: readonly string[] = [METADATA_KEY];
/** The notebook-level key of the saved approval grants (signed by the kernel). */
export const GRANTS_KEY = 'qloop_grants';
/** Notebook-level metadata keys a kernel may write. */
export const NOTEBOOK_WRITABLE_KEYS: readonly string[] = [GRANTS_KEY];

type RequestId = IAck['request_id'];

class RequestError extends Error {}

function ack(requestId: RequestId, extra: JSONObject = {}): IAck {
  return { op: 'ack', request_id: requestId, ok: true, ...extra };
}

function refusal(requestId: RequestId, error: string): IAck {
  return { op: 'ack', request_id: requestId, ok: false, error };
}

function requestIdOf(data: JSONObject): RequestId {
  const id = data['request_id'];
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function requireString(data: JSONObject, field: string): string {
  const value = data[field];
  if (typeof value !== 'string' || value.length === 0) {
    throw new RequestError(`'${field}' must be a non-empty string`);
  }
  return value;
}

function requireWritableKey(data: JSONObject): string {
  const key = requireString(data, 'key');
  if (!WRITABLE_KEYS.includes(key)) {
    throw new RequestError(
      `key '${key}' is not writable (writable: ${WRITABLE_KEYS.join(', ')})`
    );
  }
  return key;
}

function requireCell(data: JSONObject, cells: ICellLookup): ICellMetadata {
  const cellId = requireString(data, 'cell_id');
  const cell = cells.findCell(cellId);
  if (!cell) {
    throw new RequestError(`no cell with id ${cellId}`);
  }
  return cell;
}

function setMetadata(data: JSONObject, cells: ICellLookup): JSONObject {
  const key = requireWritableKey(data);
  const value = data['value'];
  if (!isJSONObject(value)) {
    throw new RequestError("'value' must be a JSON object");
  }
  // The cell model skips a write of an equal value: the notebook stays clean.
  requireCell(data, cells).setMetadata(key, value);
  return {};
}

/** The notebook's path and saved grants, for `hello` (nothing without a notebook). */
function notebookHello(cells: ICellLookup): JSONObject {
  const notebook = cells.notebook?.();
  if (!notebook) {
    return {};
  }
  const grants = notebook.getMetadata(GRANTS_KEY);
  return {
    notebook_path: notebook.path,
    notebook_grants: isJSONObject(grants) ? grants : null
  };
}

function setNotebookMetadata(data: JSONObject, cells: ICellLookup): JSONObject {
  const key = requireString(data, 'key');
  if (!NOTEBOOK_WRITABLE_KEYS.includes(key)) {
    throw new RequestError(
      `notebook key '${key}' is not writable (writable: ${NOTEBOOK_WRITABLE_KEYS.join(', ')})`
    );
  }
  const value = data['value'];
  if (!isJSONObject(value)) {
    throw new RequestError("'value' must be a JSON object");
  }
  // Only the notebook holding the running cell takes the write: another
  // notebook on the same kernel answers with a refusal.
  requireCell(data, cells);
  const notebook = cells.notebook?.();
  if (!notebook) {
    throw new RequestError('no notebook to write to');
  }
  notebook.setMetadata(key, value);
  return {};
}

/** The `cell_ids` of a request: null (absent or null) means every cell. */
function requireCellIds(data: JSONObject): string[] | null {
  const value = data['cell_ids'];
  if (value === undefined || value === null) {
    return null;
  }
  if (
    !Array.isArray(value) ||
    !value.every(id => typeof id === 'string' && id.length > 0)
  ) {
    throw new RequestError(
      "'cell_ids' must be an array of non-empty strings, or null for every cell"
    );
  }
  return value as string[];
}

function readNotebook(data: JSONObject, cells: ICellLookup): JSONObject {
  const cellIds = requireCellIds(data);
  const outputs = data['outputs'] ?? true;
  if (typeof outputs !== 'boolean') {
    throw new RequestError("'outputs' must be a boolean");
  }
  const all = cells.cellsJSON?.();
  if (!all) {
    throw new RequestError('no notebook to read');
  }
  const path = cells.notebook?.()?.path ?? '';
  // The view holds only strings, numbers, booleans, arrays and plain objects.
  return notebookView(path, all, cellIds, outputs) as unknown as JSONObject;
}

type Operation = (
  data: JSONObject,
  cells: ICellLookup,
  hello: JSONObject
) => JSONObject;

const OPERATIONS: Record<string, Operation> = {
  hello: (data, cells, hello) => ({
    ...hello,
    operations: Object.keys(OPERATIONS),
    ...notebookHello(cells)
  }),
  set_metadata: setMetadata,
  set_notebook_metadata: setNotebookMetadata,
  read_notebook: readNotebook
};

/**
 * Answer one request from the kernel.
 *
 * @param data - the comm message's `data`, as received (untrusted).
 * @param cells - the cells of the notebook the kernel belongs to.
 * @param hello - what a `hello` request answers (frontend name and version).
 */
export function handleRequest(
  data: unknown,
  cells: ICellLookup,
  hello: JSONObject
): IAck {
  if (!isJSONObject(data)) {
    return refusal(null, 'a request must be a JSON object');
  }
  const requestId = requestIdOf(data);
  const op = data['op'];
  if (
    typeof op !== 'string' ||
    !Object.prototype.hasOwnProperty.call(OPERATIONS, op)
  ) {
    return refusal(requestId, `unknown op ${JSON.stringify(op ?? null)}`);
  }
  try {
    return ack(requestId, OPERATIONS[op](data, cells, hello));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return refusal(requestId, message);
  }
}
