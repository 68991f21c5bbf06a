/**
 * The saved agent turn ("record", schema_version 1 or 2) and defensive readers for it.
 *
 * A record arrives from a kernel or from a notebook file: every field may be
 * missing or of the wrong type, so nothing here trusts the shape of the input.
 * The fields read are those of the record's schema (generated/record.ts).
 */
import { TranslationBundle, nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';

import type { SetMetadataRequest } from './generated/protocol';
import type {
  AttachmentRecord,
  CellRecord,
  ContextRecord,
  DecisionRecord,
  EgressRecord,
  ImagePlaceholder,
  RefusalRecord,
  RulesRecord,
  Timings,
  ToolCallRecord,
  ToolSize,
  UsageRecord,
  VariableChange
} from './generated/record';

/**
 * A value of the kernel's type `T` as it arrives: any field may be missing or
 * of another type, and only the fields `T` has can be read.
 */
export type Untrusted<T> = {
  readonly [K in T extends unknown ? keyof T : never]?: unknown;
};

/** Cell metadata key, comm target and output MIME types shared with the kernel. */
export const METADATA_KEY: SetMetadataRequest['key'] = 'qloop';
export const COMM_TARGET = 'qloop';
export const TRANSCRIPT_MIME = 'application/vnd.qloop.transcript+json';
/** The agent's answer, streamed or saved: `{"markdown": "<text>"}`. */
export const ANSWER_MIME = 'application/vnd.qloop.answer+json';
/** The record versions the view reads: 2 is version 1 plus a signature, egress and refusal. */
export const READABLE_VERSIONS: readonly number[] = [1, 2];

/** The turn statuses the kernel writes; anything else reads as `unknown`. */
export const KNOWN_STATUSES = [
  'completed',
  'running',
  'max_turns',
  'budget_exceeded',
  'timeout',
  'interrupted',
  'refused',
  'error'
] as const;
export type TurnStatus = CellRecord['status'] | 'unknown';

/** How a tool call was allowed to run (or not). */
export const KNOWN_DECISIONS = [
  'approved',
  'edited',
  'denied',
  'auto',
  'always',
  'readonly'
] as const;
export type DecisionKind = DecisionRecord['kind'] | 'unknown';

/** What kind of thing left the kernel for the model. */
export const KNOWN_EGRESS_KINDS = [
  'variable',
  'variables',
  'output',
  'prompt',
  'history',
  'tool',
  'rules',
  'file',
  'cell'
] as const;
export type EgressKind = EgressRecord['kind'] | 'unknown';

/** Token counters of a turn; `null` where the record has no usable number. */
export interface IUsage {
  input: number | null;
  output: number | null;
  cacheRead: number | null;
  cacheWrite: number | null;
}

/** An image the kernel kept out of the record, described by size and hash. */
export interface IImagePlaceholder {
  bytes: number | null;
  sha256: string;
}

/** What a code step did to one variable: a one-line summary, never the value. */
export interface IVariableChange {
  name: string;
  kind: VariableChange['kind'] | 'unknown';
  summary: string;
}

/** One tool call as the transcript view shows it. */
export interface IToolCall {
  /** Null when the record names no tool. */
  name: string | null;
  /** The code for code-running tools, otherwise the JSON input. */
  code: string | null;
  inputJson: string;
  decision: DecisionKind;
  reason: string | null;
  isError: boolean;
  outputSummary: string;
  durationS: number | null;
  images: IImagePlaceholder[];
  /** The variables a code step created, changed and deleted; null when not recorded. */
  changes: IVariableChange[] | null;
}

/** One thing sent to the model during the turn. */
export interface IEgress {
  kind: EgressKind;
  name: string;
  chars: number | null;
}

/** A rules file found for the turn: whose, its size as sent and whether it was used. */
export interface IRulesFile {
  path: string;
  origin: RulesRecord['origin'] | 'unknown';
  sha256: string;
  chars: number | null;
  status: string;
}

/** An item of `--with`: its kind, name and size as sent. */
export interface IAttachment {
  kind: string;
  name: string;
  sha256: string;
  chars: number | null;
  imageBytes: number | null;
  note: string;
}

/** What the turn's first request held besides the prompt, and its estimated size and cost. */
export interface ITurnContext {
  systemChars: number | null;
  rules: IRulesFile[];
  attachments: IAttachment[];
  tools: { name: string; chars: number | null }[];
  historyMessages: number | null;
  estimatedTokens: number | null;
  estimatedCostUsd: number | null;
  estimateMethod: string;
}

/** Why the model refused, as the API reported it. */
export interface IRefusal {
  category: string | null;
  explanation: string;
}

/** A record normalised for display: every field has a definite type. */
export interface ITurnRecord {
  status: TurnStatus;
  model: string | null;
  prompt: string;
  answer: string;
  error: string | null;
  approveMode: string | null;
  toolCalls: IToolCall[];
  usage: IUsage;
  costUsd: number | null;
  modelCalls: number | null;
  elapsedS: number | null;
  approvalWaitS: number | null;
  /** Not signed by this user: made elsewhere, or edited. */
  received: boolean;
  egress: IEgress[];
  refusal: IRefusal | null;
  /** What the first request held besides the prompt; null in records without it. */
  context: ITurnContext | null;
}

/** The outcome of reading a record: the normalised turn or why it is unreadable. */
export type ReadResult =
  { ok: true; record: ITurnRecord } | { ok: false; reason: string };

/** True for a plain JSON object (not null, not an array). */
export function isJSONObject(value: unknown): value is JSONObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The Markdown of an answer output (`{"markdown": "<text>"}`), or null. */
export function answerMarkdown(data: unknown): string | null {
  if (!isJSONObject(data)) {
    return null;
  }
  const markdown = data['markdown'];
  return typeof markdown === 'string' ? markdown : null;
}

/** A non-empty string, or null. */
export function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

/** A finite number, or null. */
export function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The fields of a value of the kernel's type `T`, or none when it is not an object. */
function fieldsOf<T>(value: unknown): Untrusted<T> {
  // Any object reads as one: each field is unknown until checked.
  return (isJSONObject(value) ? value : {}) as Untrusted<T>;
}

/** The objects of an array of the kernel's type `T[]`, or none when it is not an array. */
function objects<T>(value: unknown): Untrusted<T>[] {
  return Array.isArray(value)
    ? value.filter(isJSONObject).map(fieldsOf<T>)
    : [];
}

/** `value` if it is one of `known`, `unknown` otherwise. */
function knownOr<T extends string>(
  value: unknown,
  known: readonly T[]
): T | 'unknown' {
  const names: readonly string[] = known;
  return typeof value === 'string' && names.includes(value)
    ? (value as T)
    : 'unknown';
}

/** The status of a record as one of the known values, `unknown` otherwise. */
export function statusOf(record: unknown): TurnStatus {
  return knownOr(fieldsOf<CellRecord>(record)['status'], KNOWN_STATUSES);
}

/**
 * The moment a record was last updated, in milliseconds since the epoch,
 * or null when `updated_at` is missing or not a date.
 */
export function updatedAtMillis(record: unknown): number | null {
  const text = fieldsOf<CellRecord>(record)['updated_at'];
  if (typeof text !== 'string') {
    return null;
  }
  const millis = Date.parse(text);
  return Number.isNaN(millis) ? null : millis;
}

/** The sub-second digits of an ISO time, padded to nanoseconds for comparison. */
function fractionDigits(record: unknown): string {
  const text = (record as Untrusted<CellRecord>)['updated_at'] as string;
  const match = /T[0-9:]+\.(\d+)/.exec(text);
  return (match ? match[1] : '').padEnd(9, '0').slice(0, 9);
}

/**
 * Whether record `a` was updated strictly after record `b`.
 *
 * Kernel timestamps carry microseconds that `Date.parse` drops, so a tie at
 * the millisecond is settled by the sub-second digits.
 */
export function isNewer(a: unknown, b: unknown): boolean {
  const aMillis = updatedAtMillis(a);
  if (aMillis === null) {
    return false;
  }
  const bMillis = updatedAtMillis(b);
  if (bMillis === null) {
    return true;
  }
  if (aMillis !== bMillis) {
    return aMillis > bMillis;
  }
  return fractionDigits(a) > fractionDigits(b);
}

function decisionOf(value: unknown): DecisionKind {
  return knownOr(fieldsOf<DecisionRecord>(value)['kind'], KNOWN_DECISIONS);
}

function readImage(value: unknown): IImagePlaceholder {
  const image = fieldsOf<ImagePlaceholder>(value);
  return {
    bytes: numberOrNull(image['bytes']),
    sha256: stringOrNull(image['sha256']) ?? ''
  };
}

const CHANGE_KINDS = ['created', 'changed', 'deleted'] as const;

function readChanges(value: unknown): IVariableChange[] | null {
  if (!Array.isArray(value)) {
    return null;
  }
  return objects<VariableChange>(value).map(item => ({
    name: typeof item['name'] === 'string' ? item['name'] : '',
    kind: knownOr(item['kind'], CHANGE_KINDS),
    summary: typeof item['summary'] === 'string' ? item['summary'] : ''
  }));
}

function readToolCall(value: unknown): IToolCall {
  const call = fieldsOf<ToolCallRecord>(value);
  const input = call['input'];
  // The code the step's card showed: a code step's `code`, a cell proposal's
  // `source` (records/schema.py shown_code says the same).
  const name = stringOrNull(call['name']);
  const field = name === 'add_cell' || name === 'edit_cell' ? 'source' : 'code';
  const code = isJSONObject(input) ? stringOrNull(input[field]) : null;
  const decision = decisionOf(call['decision']);
  const images = Array.isArray(call['images']) ? call['images'] : [];
  return {
    name,
    code,
    inputJson: JSON.stringify(input ?? null, null, 2),
    decision,
    reason: stringOrNull(fieldsOf<DecisionRecord>(call['decision'])['reason']),
    isError: call['is_error'] === true,
    outputSummary:
      typeof call['output_summary'] === 'string' ? call['output_summary'] : '',
    durationS: numberOrNull(call['duration_s']),
    images: images.map(readImage),
    changes: readChanges(call['changes'])
  };
}

function readEgress(value: unknown): IEgress[] {
  return objects<EgressRecord>(value).map(item => ({
    kind: knownOr(item['kind'], KNOWN_EGRESS_KINDS),
    name: typeof item['name'] === 'string' ? item['name'] : '',
    chars: numberOrNull(item['chars'])
  }));
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

const RULES_ORIGINS = ['user', 'project'] as const;

function readContext(data: unknown): ITurnContext | null {
  if (!isJSONObject(data)) {
    return null;
  }
  const value: Untrusted<ContextRecord> = data;
  return {
    systemChars: numberOrNull(value['system_chars']),
    rules: objects<RulesRecord>(value['rules']).map(item => ({
      path: text(item['path']),
      origin: knownOr(item['origin'], RULES_ORIGINS),
      sha256: text(item['sha256']),
      chars: numberOrNull(item['chars']),
      status: text(item['status'])
    })),
    attachments: objects<AttachmentRecord>(value['attachments']).map(item => ({
      kind: text(item['kind']),
      name: text(item['name']),
      sha256: text(item['sha256']),
      chars: numberOrNull(item['chars']),
      imageBytes: numberOrNull(item['image_bytes']),
      note: text(item['note'])
    })),
    tools: objects<ToolSize>(value['tools']).map(item => ({
      name: text(item['name']),
      chars: numberOrNull(item['chars'])
    })),
    historyMessages: numberOrNull(value['history_messages']),
    estimatedTokens: numberOrNull(value['estimated_tokens']),
    estimatedCostUsd: numberOrNull(value['estimated_cost_usd']),
    estimateMethod: text(value['estimate_method'])
  };
}

function readRefusal(data: unknown): IRefusal | null {
  if (!isJSONObject(data)) {
    return null;
  }
  const value: Untrusted<RefusalRecord> = data;
  const explanation = value['explanation'];
  return {
    category: stringOrNull(value['category']),
    explanation: typeof explanation === 'string' ? explanation : ''
  };
}

function readUsage(value: unknown): IUsage {
  const usage = fieldsOf<UsageRecord>(value);
  return {
    input: numberOrNull(usage['input_tokens']),
    output: numberOrNull(usage['output_tokens']),
    cacheRead: numberOrNull(usage['cache_read_input_tokens']),
    cacheWrite: numberOrNull(usage['cache_creation_input_tokens'])
  };
}

/**
 * Why a value cannot be read as a record, or null when it can: it must be a
 * JSON object with a readable `schema_version`.
 */
export function unreadableReason(
  data: unknown,
  trans: TranslationBundle = nullTranslator.load('qloop-kernel')
): string | null {
  if (!isJSONObject(data)) {
    const kind = Array.isArray(data)
      ? trans.__('an array')
      : data === null
        ? 'null'
        : typeof data;
    return trans.__('expected a JSON object, got %1', kind);
  }
  const version = data['schema_version'];
  if (version === undefined) {
    return trans.__('the record has no schema_version');
  }
  if (typeof version !== 'number' || !READABLE_VERSIONS.includes(version)) {
    return trans.__(
      'unsupported schema_version %1 (this view reads versions %2)',
      JSON.stringify(version),
      READABLE_VERSIONS.join(', ')
    );
  }
  return null;
}

/**
 * Read a record for display.
 *
 * Only a non-object or a wrong `schema_version` makes a record unreadable;
 * any other missing or mistyped field falls back to an empty value.
 */
export function readRecord(
  data: unknown,
  trans?: TranslationBundle
): ReadResult {
  const reason = unreadableReason(data, trans);
  if (reason !== null) {
    return { ok: false, reason };
  }
  const record = data as Untrusted<CellRecord>;
  const status = statusOf(record);
  const timings = fieldsOf<Timings>(record['timings']);
  const toolCalls = Array.isArray(record['tool_calls'])
    ? record['tool_calls']
    : [];
  return {
    ok: true,
    record: {
      status,
      model: stringOrNull(record['model']),
      prompt: typeof record['prompt'] === 'string' ? record['prompt'] : '',
      answer: typeof record['answer'] === 'string' ? record['answer'] : '',
      error: stringOrNull(record['error']),
      approveMode: stringOrNull(
        fieldsOf<JSONObject>(record['settings'])['approve']
      ),
      toolCalls: toolCalls.map(readToolCall),
      usage: readUsage(record['usage']),
      costUsd: numberOrNull(record['cost_usd']),
      modelCalls: numberOrNull(record['model_calls']),
      elapsedS: numberOrNull(timings['elapsed_s']),
      approvalWaitS: numberOrNull(timings['approval_wait_s']),
      received: (data as JSONObject)['received'] === true,
      egress: readEgress(record['egress']),
      refusal: readRefusal(record['refusal']),
      context: readContext(record['context'])
    }
  };
}
