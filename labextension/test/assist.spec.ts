/**
 * What Fix, Explain and Edit with agent send and save: the `%agent` line of
 * each (the edit's instruction quoted so IPython neither expands nor splits
 * it; tests/test_fix.py sends the same vectors to a real kernel), and the
 * turns kept in the cell's `qloop_assist` metadata.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import {
  MAX_SAVED_TURNS,
  assistCode,
  finishedRecord,
  hasError,
  isAgentSource,
  quoteInstruction,
  savedTurns,
  withTurn
} from '../src/assist';

const vectors: { instruction: string; line: string }[] = JSON.parse(
  readFileSync(join(__dirname, 'assist-vectors.json'), 'utf-8')
);

describe('assistCode', () => {
  it('fixes and explains a cell by its id', () => {
    expect(assistCode('fix', 'c1')).toBe('%agent fix c1');
    expect(assistCode('explain', 'c1')).toBe('%agent explain c1');
  });

  it('quotes the instruction as one word IPython leaves alone', () => {
    for (const { instruction, line } of vectors) {
      expect(assistCode('edit', 'plot', instruction)).toBe(line);
      expect(line.split(' ')).toHaveLength(4); // %agent edit plot "..."
      expect(line).not.toMatch(/[\n${}]/);
      expect(JSON.parse(quoteInstruction(instruction))).toBe(instruction);
    }
  });
});

describe('which cells', () => {
  it('knows agent cells and errors', () => {
    expect(isAgentSource('  %%agent\nDo it')).toBe(true);
    expect(isAgentSource('%agent fix')).toBe(true);
    expect(isAgentSource('x = 1  # %agent')).toBe(false);
    expect(hasError([{ type: 'stream' }, { type: 'error' }])).toBe(true);
    expect(hasError([{ type: 'stream' }])).toBe(false);
  });
});

describe('withTurn', () => {
  const record = (digest: string) => ({
    status: 'completed',
    digest,
    prompt: 'Fix'
  });

  it('keeps finished records only, once each, the newest turns', () => {
    expect(finishedRecord({ status: 'running', digest: '' })).toBeNull();
    expect(finishedRecord({ status: 'completed' })).toBeNull();
    expect(finishedRecord(record('d1'))).toEqual(record('d1'));
    let saved = withTurn(undefined, 'fix', record('d1'));
    saved = withTurn(saved, 'fix', record('d1'));
    saved = withTurn(saved, 'explain', record('d2'));
    expect(savedTurns(saved)).toEqual([
      { action: 'fix', record: record('d1') },
      { action: 'explain', record: record('d2') }
    ]);
    for (let index = 0; index < MAX_SAVED_TURNS + 3; index++) {
      saved = withTurn(saved, 'edit', record(`e${index}`));
    }
    const turns = savedTurns(saved);
    expect(turns).toHaveLength(MAX_SAVED_TURNS);
    expect(turns[turns.length - 1]).toEqual({
      action: 'edit',
      record: record(`e${MAX_SAVED_TURNS + 2}`)
    });
  });

  it('starts over from metadata that is not its shape', () => {
    expect(savedTurns({ turns: 'no' })).toEqual([]);
    expect(savedTurns([1, 2])).toEqual([]);
    expect(
      withTurn({ turns: [1, { action: 'fix' }] }, 'fix', record('d'))
    ).toEqual({
      turns: [{ action: 'fix' }, { action: 'fix', record: record('d') }]
    });
  });
});
