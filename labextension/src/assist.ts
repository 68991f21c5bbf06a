/**
 * The agent from any cell, in the page: what Fix, Explain and Edit with
 * agent send to the kernel, and what they save in the cell.
 *
 * Each runs an `%agent fix|explain|edit CELL_ID` line as an execute request
 * of its own (not a cell of the notebook: store_history false), sent with
 * the cell's id and `qloopAssist` in its metadata: the kernel then treats it
 * as a turn about that cell and not as a run of it (the cell stays failed,
 * its own record stays as it is). The turn's outputs go to an area beside
 * the cell (`assistview.ts`); its finished record, from the output mirror,
 * is kept in the cell's `qloop_assist` metadata, beside the cell's outputs
 * and other metadata.
 */
import { JSONObject } from '@lumino/coreutils';

import { isJSONObject } from './record';

/** What the page asks the agent about a cell. */
export type AssistAction = 'fix' | 'explain' | 'edit';

/** The execute request's metadata key the kernel reads (qloop_kernel/notebook/cell.py). */
export const ASSIST_REQUEST_KEY = 'qloopAssist';

/** Cell metadata of the cell's Fix, Explain and Edit turns: `{turns: [{action, record}]}`. */
export const ASSIST_KEY = 'qloop_assist';

/** The turns a cell keeps (the oldest go first). */
export const MAX_SAVED_TURNS = 10;

/** Characters IPython reads in a magic's line (`$name`, `{expr}`) or splits on (spaces). */
const LINE_ESCAPES: Record<string, string> = {
  $: '\\u0024',
  '{': '\\u007b',
  '}': '\\u007d',
  ' ': '\\u0020'
};

/**
 * The instruction as one word of an `%agent edit` line: a JSON string (its
 * quotes, backslashes and newlines escaped), with `$`, braces and spaces as
 * `\u` escapes too, so IPython neither expands nor splits it. The kernel
 * reads it back with `json.loads` (`fix.instruction_text`).
 */
export function quoteInstruction(text: string): string {
  return JSON.stringify(text).replace(/[${} ]/g, char => LINE_ESCAPES[char]);
}

/** The line the page runs for `action` on cell `cellId`. */
export function assistCode(
  action: AssistAction,
  cellId: string,
  instruction = ''
): string {
  if (action === 'edit') {
    return `%agent edit ${cellId} ${quoteInstruction(instruction)}`;
  }
  return `%agent ${action} ${cellId}`;
}

/** Whether a cell's source is an agent cell (or an `%agent` line): never fixed from here. */
export function isAgentSource(source: string): boolean {
  const start = source.trimStart();
  return start.startsWith('%%agent') || start.startsWith('%agent');
}

/** Whether outputs (their `type`s) hold an error. */
export function hasError(outputs: Iterable<{ type: string }>): boolean {
  for (const output of outputs) {
    if (output.type === 'error') {
      return true;
    }
  }
  return false;
}

/** A finished record (sealed: it has a digest), or null. */
export function finishedRecord(value: unknown): JSONObject | null {
  if (
    !isJSONObject(value) ||
    value['status'] === 'running' ||
    typeof value['digest'] !== 'string' ||
    !value['digest']
  ) {
    return null;
  }
  return value;
}

/** The saved turns of a cell's `qloop_assist` metadata (none when it is not that shape). */
export function savedTurns(saved: unknown): JSONObject[] {
  const turns = isJSONObject(saved) ? saved['turns'] : undefined;
  return Array.isArray(turns) ? turns.filter(isJSONObject) : [];
}

/**
 * The cell's `qloop_assist` metadata with `record` kept as a turn of
 * `action`: a record already kept (the same digest) is not kept twice, and
 * only the newest turns stay.
 */
export function withTurn(
  saved: unknown,
  action: AssistAction,
  record: JSONObject
): JSONObject {
  const turns = savedTurns(saved);
  const digest = record['digest'];
  const kept = turns.some(
    turn => isJSONObject(turn['record']) && turn['record']['digest'] === digest
  );
  const all = kept ? turns : [...turns, { action, record }];
  return { turns: all.slice(-MAX_SAVED_TURNS) };
}
