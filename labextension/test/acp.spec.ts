/**
 * The agent chat's event stream: server-sent event blocks become chat events
 * (the data lines joined), and comment lines, broken JSON and objects that
 * are not events are skipped.
 */
import { parseEvent } from '../src/acpapi';

describe('parseEvent', () => {
  it('reads the data of an event block', () => {
    const block =
      'id: 3\ndata: {"n": 3, "kind": "turn_end", "stop_reason": "end_turn"}';
    expect(parseEvent(block)).toEqual({
      n: 3,
      kind: 'turn_end',
      stop_reason: 'end_turn'
    });
  });

  it('joins data lines', () => {
    expect(parseEvent('data: {"n": 1,\ndata: "kind": "user"}')).toEqual({
      n: 1,
      kind: 'user'
    });
  });

  it('skips what is not an event', () => {
    for (const block of [
      ': waiting',
      'data: {"n": 1',
      'data: {"kind": "user"}',
      'data: [1, 2]',
      ''
    ]) {
      expect(parseEvent(block)).toBeNull();
    }
  });
});
