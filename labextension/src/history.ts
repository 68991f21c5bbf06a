/**
 * Earlier records of a cell: no record is ever lost.
 *
 * A record carries `history`, the cell's earlier records (newest first), each
 * a whole record that verifies on its own: the list is not part of the digest,
 * so the extension may add to it. These rules are the kernel's
 * (`qloop_kernel/records/history.py`): a record written knowing the saved one
 * (the saved record is in its history) succeeds it; any other disagreement
 * keeps the saved record and puts the other one first in its history.
 */
import { JSONObject } from '@lumino/coreutils';

import { isJSONObject } from './record';

/** The most earlier records a cell keeps, and their size in characters of JSON. */
export const HISTORY_ENTRIES = 5;
export const HISTORY_CHARS = 1_500_000;

/** A record's earlier records, newest first (only the objects among them). */
export function historyOf(record: unknown): JSONObject[] {
  const history = isJSONObject(record) ? record['history'] : undefined;
  return Array.isArray(history) ? history.filter(isJSONObject) : [];
}

/** A record as a history entry: without its own history. */
export function entryOf(record: JSONObject): JSONObject {
  const copy: JSONObject = { ...record };
  delete copy['history'];
  return copy;
}

function digestOf(record: JSONObject): string | null {
  const digest = record['digest'];
  return typeof digest === 'string' && digest.length > 0 ? digest : null;
}

function same(a: JSONObject, b: JSONObject): boolean {
  const digest = digestOf(a);
  return digest !== null && digest === digestOf(b);
}

function startedAt(record: JSONObject): unknown {
  const timings = record['timings'];
  return isJSONObject(timings) ? timings['started_at'] : undefined;
}

function sameTurn(a: JSONObject, b: JSONObject): boolean {
  const started = startedAt(a);
  return (
    typeof started === 'string' &&
    started.length > 0 &&
    a['session_id'] === b['session_id'] &&
    started === startedAt(b)
  );
}

/** Whether `record` was written knowing `saved` (it is in its history). */
export function knows(record: JSONObject, saved: JSONObject): boolean {
  return historyOf(record).some(entry => same(entry, saved));
}

/** `history` with `record` first (without its copies), bounded. */
export function pushed(
  history: JSONObject[],
  record: JSONObject
): JSONObject[] {
  const first = entryOf(record);
  const all = [first, ...history.filter(entry => !same(entry, first))];
  const kept: JSONObject[] = [];
  let used = 0;
  for (const entry of all.slice(0, HISTORY_ENTRIES)) {
    used += JSON.stringify(entry).length;
    if (used > HISTORY_CHARS) {
      break;
    }
    kept.push(entry);
  }
  return kept;
}

/**
 * The record a cell keeps when its metadata holds `saved` and its output
 * mirror `mirror`: `saved` itself when nothing changes.
 */
export function merged(saved: unknown, mirror: JSONObject): JSONObject {
  if (!isJSONObject(saved)) {
    return mirror;
  }
  if (same(saved, mirror) || knows(saved, mirror)) {
    return saved;
  }
  if (sameTurn(saved, mirror)) {
    // Two saves of one turn (a running record and its end): the later one.
    return String(mirror['updated_at'] ?? '') >
      String(saved['updated_at'] ?? '')
      ? mirror
      : saved;
  }
  if (knows(mirror, saved)) {
    return mirror;
  }
  return { ...saved, history: pushed(historyOf(saved), mirror) };
}

/** `current` with its history entry `index` made the record, itself put in history. */
export function restored(current: JSONObject, index: number): JSONObject {
  const history = historyOf(current);
  if (index < 0 || index >= history.length) {
    throw new RangeError(`no earlier record ${index + 1}`);
  }
  const rest = history.filter((_, i) => i !== index);
  return { ...history[index], history: pushed(rest, current) };
}

/** Whether a record's turn can replay: completed, and not all its code steps denied or failed. */
export function isReplayable(record: unknown): boolean {
  if (!isJSONObject(record) || record['status'] !== 'completed') {
    return false;
  }
  const calls = Array.isArray(record['tool_calls']) ? record['tool_calls'] : [];
  const code = calls
    .filter(isJSONObject)
    .filter(call => call['name'] === 'run_code');
  const ran = code.filter(call => {
    const decision = isJSONObject(call['decision'])
      ? call['decision']['kind']
      : undefined;
    return (
      ['approved', 'edited', 'auto', 'always'].includes(String(decision)) &&
      call['is_error'] !== true
    );
  });
  return code.length === 0 || ran.length > 0;
}

/** The notebook cells a record's turn read: cell id and the SHA-256 of its source then. */
export function cellsRead(
  record: unknown
): { cellId: string; sha256: string }[] {
  const fingerprint = isJSONObject(record) ? record['fingerprint'] : undefined;
  const cells =
    isJSONObject(fingerprint) && Array.isArray(fingerprint['cells'])
      ? fingerprint['cells']
      : [];
  return cells
    .filter(isJSONObject)
    .filter(
      cell =>
        typeof cell['cell_id'] === 'string' &&
        typeof cell['sha256'] === 'string'
    )
    .map(cell => ({
      cellId: cell['cell_id'] as string,
      sha256: cell['sha256'] as string
    }));
}

/** The hex SHA-256 of a text's UTF-8 bytes, or null where Web Crypto is missing. */
export async function sha256Hex(text: string): Promise<string | null> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    return null;
  }
  const digest = await subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest))
    .map(byte => byte.toString(16).padStart(2, '0'))
    .join('');
}

/**
 * Whether a cell the turn read has been edited since: its source now hashes
 * differently. `sourceOf` gives a cell's current source by id (undefined when
 * the notebook no longer has it: not counted as edited).
 */
export async function isStale(
  record: unknown,
  sourceOf: (cellId: string) => string | undefined,
  hash: (text: string) => Promise<string | null> = sha256Hex
): Promise<boolean> {
  for (const cell of cellsRead(record)) {
    const source = sourceOf(cell.cellId);
    if (source === undefined) {
      continue;
    }
    const now = await hash(source);
    if (now !== null && now !== cell.sha256) {
      return true;
    }
  }
  return false;
}
