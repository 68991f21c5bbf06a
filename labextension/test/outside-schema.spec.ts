/**
 * The page reads the server's outside messages as the schema has them: the
 * example messages of outside-vectors.json (which tests/test_outside_schema.py
 * checks against qloop_kernel/schema/protocol.schema.json and the Python
 * types) are read as they are when the schema accepts them, and refused when
 * it does not.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import { isOutsideEntry, parsePending } from '../src/outside';
import { parseAgentCell } from '../src/outsideview';

interface ICases {
  valid: unknown[];
  invalid: unknown[];
}

const vectors: { [message: string]: ICases } = JSON.parse(
  readFileSync(join(__dirname, 'outside-vectors.json'), 'utf-8')
);

function quietly<T>(read: () => T): T {
  const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
  try {
    return read();
  } finally {
    warn.mockRestore();
  }
}

describe('the outside vectors', () => {
  it('are read item by item as the schema has them', () => {
    const { valid, invalid } = vectors['OutsideItem'];
    for (const item of valid) {
      expect(parsePending({ version: 1, items: [item] })).toEqual({
        version: 1,
        items: [item]
      });
    }
    for (const item of invalid) {
      expect([
        item,
        quietly(() => parsePending({ version: 1, items: [item] }))
      ]).toEqual([item, { version: 1, items: [] }]);
    }
  });

  it('are read as whole answers of the pending route', () => {
    const { valid, invalid } = vectors['OutsidePending'];
    for (const pending of valid) {
      expect(parsePending(pending)).toEqual(pending);
    }
    for (const pending of invalid) {
      expect([pending, parsePending(pending)]).toEqual([pending, null]);
    }
  });

  it('read the saved calls of the record items, and no other', () => {
    const records = vectors['OutsideItem'].valid.filter(
      item => (item as { kind: string }).kind === 'record'
    ) as { entry: unknown }[];
    expect(records.length).toBeGreaterThan(1);
    expect(records.every(item => isOutsideEntry(item.entry))).toBe(true);
    const broken = vectors['OutsideItem'].invalid.filter(
      item =>
        typeof item === 'object' &&
        item !== null &&
        (item as { kind: string }).kind === 'record' &&
        (item as { key: string }).key === 'qloop_outside'
    ) as { entry: unknown }[];
    expect(broken.length).toBeGreaterThan(1);
    expect(broken.filter(item => isOutsideEntry(item.entry))).toEqual([]);
  });

  it('are read as agent cells as the schema has them', () => {
    const { valid, invalid } = vectors['OutsideAgentCell'];
    for (const cell of valid) {
      expect(parseAgentCell(cell)).toEqual(cell);
    }
    for (const cell of invalid) {
      expect([cell, parseAgentCell(cell)]).toEqual([cell, null]);
    }
  });
});
