/**
 * Earlier records: merging a mirror, restoring, replayability and staleness.
 */
import { createHash } from 'crypto';

import { JSONObject } from '@lumino/coreutils';

import {
  HISTORY_ENTRIES,
  isReplayable,
  isStale,
  merged,
  pushed,
  restored
} from '../src/history';
import { markerText } from '../src/marker';
import { nullTranslator } from '@jupyterlab/translation';

function record(digest: string, extra: JSONObject = {}): JSONObject {
  return { schema_version: 2, status: 'completed', digest, ...extra };
}

function step(kind: string, isError = false): JSONObject {
  return {
    name: 'run_code',
    input: { code: 'x = 1' },
    decision: { kind },
    is_error: isError
  };
}

const hash = async (text: string) =>
  createHash('sha256').update(text, 'utf8').digest('hex');

describe('merged', () => {
  const approved = record('sha256:a');
  const other = record('sha256:b');

  it('never replaces a saved record with one that did not know it', () => {
    expect(merged(approved, other)).toEqual({ ...approved, history: [other] });
  });

  it('takes a successor and leaves a known record alone', () => {
    const successor = { ...other, history: [approved] };
    expect(merged(approved, successor)).toBe(successor);
    expect(merged(successor, approved)).toBe(successor);
    expect(merged(approved, approved)).toBe(approved);
  });

  it('keeps the later save of one turn', () => {
    const turn = { session_id: 's', timings: { started_at: 't0' } };
    const running = record('sha256:r', { ...turn, updated_at: '1' });
    const done = record('sha256:d', { ...turn, updated_at: '2' });
    expect(merged(running, done)).toBe(done);
    expect(merged(done, running)).toBe(done);
  });
});

describe('pushed and restored', () => {
  it('keeps a bounded, flat history, newest first', () => {
    let history: JSONObject[] = [];
    for (let i = 0; i < HISTORY_ENTRIES + 3; i++) {
      history = pushed(history, record(`sha256:${i}`, { history: [] }));
    }
    expect(history).toHaveLength(HISTORY_ENTRIES);
    expect(history[0]['digest']).toBe(`sha256:${HISTORY_ENTRIES + 2}`);
    expect(history.every(entry => !('history' in entry))).toBe(true);
  });

  it('swaps the chosen earlier record with the current one', () => {
    const current = record('sha256:now', {
      history: [record('sha256:one'), record('sha256:two')]
    });
    const back = restored(current, 1);
    expect(back['digest']).toBe('sha256:two');
    expect((back['history'] as JSONObject[]).map(e => e['digest'])).toEqual([
      'sha256:now',
      'sha256:one'
    ]);
    expect(() => restored(current, 2)).toThrow(RangeError);
  });
});

describe('isReplayable', () => {
  it('is false for a completed turn whose code steps were all denied', () => {
    expect(isReplayable(record('d', { tool_calls: [step('denied')] }))).toBe(
      false
    );
    expect(
      isReplayable(record('d', { tool_calls: [step('approved', true)] }))
    ).toBe(false);
    expect(
      isReplayable(
        record('d', { tool_calls: [step('denied'), step('approved')] })
      )
    ).toBe(true);
    expect(isReplayable(record('d', { tool_calls: [] }))).toBe(true);
    expect(isReplayable({ ...record('d'), status: 'error' })).toBe(false);
  });
});

describe('isStale', () => {
  const source = 'df = load()';
  it('is true once a cell the turn read was edited', async () => {
    const fingerprint = {
      cells: [{ cell_id: 'setup', sha256: await hash(source), defines: ['df'] }]
    };
    const saved = record('d', { fingerprint });
    expect(await isStale(saved, () => source, hash)).toBe(false);
    expect(await isStale(saved, () => source + '\n', hash)).toBe(true);
    expect(await isStale(saved, () => undefined, hash)).toBe(false);
    expect(await isStale(record('d'), () => 'x', hash)).toBe(false);
  });
});

describe('markerText', () => {
  const trans = nullTranslator.load('qloop-kernel');
  it('says not replayable, earlier records and stale', () => {
    const denied = record('d', {
      tool_calls: [step('denied')],
      history: [record('e')]
    });
    expect(markerText(denied, 'completed', true, trans)).toBe(
      'agent · not replayable (its code steps were denied) · 1 earlier record' +
        ' · stale: a cell it read was edited'
    );
    expect(markerText(record('d'), 'completed', false, trans)).toBe(
      'agent · replayable'
    );
  });
});
