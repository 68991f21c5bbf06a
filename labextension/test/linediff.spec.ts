/**
 * The line diff of a proposal: kept lines stay, the others are removed or
 * added, in the order a reader expects (removed lines before added ones).
 */
import {
  IDiffLine,
  MAX_TABLE_CELLS,
  lineDiff,
  splitLines
} from '../src/linediff';

function show(lines: IDiffLine[]): string[] {
  const marks = { same: ' ', del: '-', add: '+' };
  return lines.map(line => marks[line.kind] + line.text);
}

describe('splitLines', () => {
  it.each([
    ['', []],
    ['a', ['a']],
    ['a\n', ['a']],
    ['a\n\nb', ['a', '', 'b']],
    ['a\r\nb\rc', ['a', 'b', 'c']]
  ])('splits %j', (text, lines) => {
    expect(splitLines(text)).toEqual(lines);
  });
});

describe('lineDiff', () => {
  it('keeps equal texts', () => {
    expect(show(lineDiff('a\nb', 'a\nb'))).toEqual([' a', ' b']);
  });

  it('adds every line of a new cell', () => {
    expect(show(lineDiff('', 'x = 1\nprint(x)\n'))).toEqual([
      '+x = 1',
      '+print(x)'
    ]);
  });

  it('removes every line when the new source is empty', () => {
    expect(show(lineDiff('a\nb', ''))).toEqual(['-a', '-b']);
  });

  it('marks a changed line as removed then added', () => {
    expect(show(lineDiff('a\nb\nc', 'a\nB\nc'))).toEqual([
      ' a',
      '-b',
      '+B',
      ' c'
    ]);
  });

  it('keeps the longest common subsequence of lines', () => {
    const before = 'import pandas\ndf = load()\ndf.head()\nplot(df)';
    const after =
      'import pandas\ndf = load()\ndf = df.dropna()\nplot(df)\nsave(df)';
    expect(show(lineDiff(before, after))).toEqual([
      ' import pandas',
      ' df = load()',
      '-df.head()',
      '+df = df.dropna()',
      ' plot(df)',
      '+save(df)'
    ]);
  });

  it('finds moved lines among others', () => {
    const diff = lineDiff('a\nb\nc\nd', 'b\nc\na\nd');
    expect(show(diff)).toEqual(['-a', ' b', ' c', '+a', ' d']);
  });

  it('shows a huge change as removed then added, without the table', () => {
    const count = Math.ceil(Math.sqrt(MAX_TABLE_CELLS)) + 1;
    const before = Array.from({ length: count }, (_, i) => `old ${i}`);
    const after = Array.from({ length: count }, (_, i) => `new ${i}`);
    const diff = lineDiff(
      ['first', ...before, 'last'].join('\n'),
      ['first', ...after, 'last'].join('\n')
    );
    expect(diff.length).toBe(2 * count + 2);
    expect(diff[0]).toEqual({ kind: 'same', text: 'first' });
    expect(diff.slice(1, count + 1).every(line => line.kind === 'del')).toBe(
      true
    );
    expect(
      diff.slice(count + 1, 2 * count + 1).every(line => line.kind === 'add')
    ).toBe(true);
    expect(diff[diff.length - 1]).toEqual({ kind: 'same', text: 'last' });
  });
});
