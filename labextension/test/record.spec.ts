/**
 * Reading records: every field may be missing or of the wrong type; only a
 * non-object or another schema_version makes a record unreadable.
 */
import { nullTranslator } from '@jupyterlab/translation';

import {
  answerMarkdown,
  isNewer,
  readRecord,
  statusOf,
  unreadableReason,
  updatedAtMillis
} from '../src/record';
import { badgeText, decisionLabel, statusLabel } from '../src/labels';
import { shouting } from './translators';

const trans = nullTranslator.load('qloop-kernel');

function read(data: unknown) {
  const result = readRecord(data);
  if (!result.ok) {
    throw new Error(result.reason);
  }
  return result.record;
}

describe('unreadableReason', () => {
  it.each([
    ['text', 'expected a JSON object, got string'],
    [null, 'expected a JSON object, got null'],
    [[1], 'expected a JSON object, got an array'],
    [3, 'expected a JSON object, got number'],
    [{}, 'the record has no schema_version'],
    [
      { schema_version: 3 },
      'unsupported schema_version 3 (this view reads versions 1, 2)'
    ],
    [
      { schema_version: '1' },
      'unsupported schema_version "1" (this view reads versions 1, 2)'
    ],
    [
      { schema_version: null },
      'unsupported schema_version null (this view reads versions 1, 2)'
    ]
  ])('explains why %j cannot be read', (data, reason) => {
    expect(unreadableReason(data)).toBe(reason);
    expect(readRecord(data)).toEqual({ ok: false, reason });
  });

  it('goes through the translator', () => {
    expect(unreadableReason({}, shouting.load('qloop-kernel'))).toBe(
      'THE RECORD HAS NO SCHEMA_VERSION'
    );
  });

  it('reads versions 1 and 2', () => {
    expect(unreadableReason({ schema_version: 1 })).toBeNull();
    expect(unreadableReason({ schema_version: 2 })).toBeNull();
  });
});

describe('readRecord', () => {
  it('reads a complete record', () => {
    const record = read({
      schema_version: 2,
      status: 'completed',
      model: 'claude-sonnet-5-5',
      prompt: 'Clean df',
      answer: 'Done **now**.',
      settings: { approve: 'ask' },
      tool_calls: [
        {
          name: 'run_code',
          input: { code: 'df = df.dropna()' },
          decision: { kind: 'edited', reason: 'fixed a typo' },
          is_error: false,
          output_summary: '3 rows',
          duration_s: 0.25,
          images: [{ bytes: 23000, sha256: 'ab12cd34ef' }],
          changes: [
            {
              name: 'df',
              kind: 'changed',
              summary: 'DataFrame 600×5 → 598×5',
              hash: 'ab'
            },
            { name: 'y', kind: 'renamed' },
            'not a change'
          ]
        }
      ],
      usage: {
        input_tokens: 10,
        output_tokens: 20,
        cache_read_input_tokens: 30,
        cache_creation_input_tokens: 40
      },
      cost_usd: 0.02,
      model_calls: 2,
      timings: { elapsed_s: 3.5, approval_wait_s: 1.25 },
      received: true,
      egress: [
        { kind: 'variable', name: 'df', chars: 1234 },
        { kind: 'prompt', name: 'prompt', chars: 8 },
        { kind: 'history', name: 'cell 2', chars: 50 }
      ],
      refusal: { category: 'cyber', explanation: 'Not allowed.' },
      signature: 'v1:abc'
    });
    expect(record).toEqual({
      status: 'completed',
      model: 'claude-sonnet-5-5',
      prompt: 'Clean df',
      answer: 'Done **now**.',
      error: null,
      approveMode: 'ask',
      toolCalls: [
        {
          name: 'run_code',
          code: 'df = df.dropna()',
          inputJson: '{\n  "code": "df = df.dropna()"\n}',
          decision: 'edited',
          reason: 'fixed a typo',
          isError: false,
          outputSummary: '3 rows',
          durationS: 0.25,
          images: [{ bytes: 23000, sha256: 'ab12cd34ef' }],
          changes: [
            { name: 'df', kind: 'changed', summary: 'DataFrame 600×5 → 598×5' },
            { name: 'y', kind: 'unknown', summary: '' }
          ]
        }
      ],
      usage: { input: 10, output: 20, cacheRead: 30, cacheWrite: 40 },
      costUsd: 0.02,
      modelCalls: 2,
      elapsedS: 3.5,
      approvalWaitS: 1.25,
      received: true,
      egress: [
        { kind: 'variable', name: 'df', chars: 1234 },
        { kind: 'prompt', name: 'prompt', chars: 8 },
        { kind: 'history', name: 'cell 2', chars: 50 }
      ],
      refusal: { category: 'cyber', explanation: 'Not allowed.' },
      context: null
    });
  });

  it('falls back to empty values for missing and mistyped fields', () => {
    const record = read({
      schema_version: 1,
      status: 'exploded',
      model: 42,
      prompt: ['x'],
      answer: { markdown: 'x' },
      error: '',
      tool_calls: [null, 'rm -rf /', { name: 7, decision: 'yes', images: 'x' }],
      usage: { input_tokens: 'many', output_tokens: Infinity },
      cost_usd: '0.1',
      timings: [],
      received: 'true',
      egress: 'df',
      refusal: 'no'
    });
    expect(record.status).toBe('unknown');
    expect(record.model).toBeNull();
    expect(record.prompt).toBe('');
    expect(record.answer).toBe('');
    expect(record.error).toBeNull();
    expect(record.toolCalls.map(call => [call.name, call.decision])).toEqual([
      [null, 'unknown'],
      [null, 'unknown'],
      [null, 'unknown']
    ]);
    expect(record.toolCalls[1].inputJson).toBe('null');
    expect(record.toolCalls[2].images).toEqual([]);
    expect(record.toolCalls[2].changes).toBeNull(); // a record made before changes were kept
    expect(record.usage).toEqual({
      input: null,
      output: null,
      cacheRead: null,
      cacheWrite: null
    });
    expect(record.costUsd).toBeNull();
    expect(record.elapsedS).toBeNull();
    expect(record.received).toBe(false);
    expect(record.egress).toEqual([]);
    expect(record.refusal).toBeNull();
  });

  it("shows a cell proposal's source as its code, and no other field", () => {
    const record = read({
      schema_version: 1,
      tool_calls: [
        { name: 'add_cell', input: { source: 'z = 7', code: 'x = 1' } },
        { name: 'edit_cell', input: { cell_id: 'a', source: 'y = 2' } },
        { name: 'run_code', input: { source: 'not code' } }
      ]
    });
    expect(record.toolCalls.map(call => call.code)).toEqual([
      'z = 7',
      'y = 2',
      null
    ]);
  });

  it('keeps the readable items of the egress list', () => {
    const record = read({
      schema_version: 1,
      egress: [
        'df',
        null,
        { kind: 'socket', name: 3, chars: '12' },
        { kind: 'file', name: 'data.csv', chars: 99 }
      ]
    });
    expect(record.egress).toEqual([
      { kind: 'unknown', name: '', chars: null },
      { kind: 'file', name: 'data.csv', chars: 99 }
    ]);
  });

  it('reads a refusal with a null category', () => {
    expect(
      read({
        schema_version: 1,
        refusal: { category: null, explanation: 'No.' }
      }).refusal
    ).toEqual({ category: null, explanation: 'No.' });
    expect(
      read({ schema_version: 1, refusal: { explanation: 5 } }).refusal
    ).toEqual({ category: null, explanation: '' });
  });
});

describe('statusOf', () => {
  it('knows the kernel statuses and nothing else', () => {
    expect(statusOf({ status: 'budget_exceeded' })).toBe('budget_exceeded');
    expect(statusOf({ status: 'constructor' })).toBe('unknown');
    expect(statusOf('completed')).toBe('unknown');
  });
});

describe('isNewer', () => {
  const at = (updated_at: unknown) => ({ updated_at });

  it('compares to the microsecond', () => {
    const a = at('2025-03-04T10:00:00.123457+00:00');
    const b = at('2025-03-04T10:00:00.123456+00:00');
    expect(isNewer(a, b)).toBe(true);
    expect(isNewer(b, a)).toBe(false);
    expect(isNewer(a, a)).toBe(false);
  });

  it('compares across time zones', () => {
    expect(
      isNewer(at('2025-03-04T11:00:01+01:00'), at('2025-03-04T10:00:00Z'))
    ).toBe(true);
  });

  it('never prefers a record without a date', () => {
    expect(isNewer(at('soon'), at('2025-03-04T10:00:00Z'))).toBe(false);
    expect(isNewer(at('2025-03-04T10:00:00Z'), at(null))).toBe(true);
    expect(updatedAtMillis(at(5))).toBeNull();
  });
});

describe('answerMarkdown', () => {
  it('reads {"markdown": text} and nothing else', () => {
    expect(answerMarkdown({ markdown: '**hi**' })).toBe('**hi**');
    expect(answerMarkdown({ markdown: '' })).toBe('');
    expect(answerMarkdown({ markdown: 5 })).toBeNull();
    expect(answerMarkdown('**hi**')).toBeNull();
    expect(answerMarkdown(null)).toBeNull();
  });
});

describe('labels', () => {
  it('names every status, decision and badge', () => {
    expect(statusLabel('max_turns', trans)).toBe('stopped: turn limit');
    expect(decisionLabel('edited', trans)).toBe('approved after edit');
    expect(badgeText('completed', trans)).toBe('agent · replayable');
    expect(badgeText('unreadable', trans)).toBe('agent · unreadable record');
  });

  it('goes through the translator', () => {
    const loud = shouting.load('qloop-kernel');
    expect(statusLabel('unknown', loud)).toBe('UNKNOWN STATUS');
    expect(badgeText('running', loud)).toBe('AGENT · RUNNING');
  });
});
