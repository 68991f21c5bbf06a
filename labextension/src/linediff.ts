/**
 * A line diff for showing a proposed source against the current one: the
 * common lines of the longest common subsequence are kept, the others marked
 * removed or added.
 */

/** One line of a diff: kept, removed from the old text or added by the new. */
export interface IDiffLine {
  kind: 'same' | 'del' | 'add';
  text: string;
}

/**
 * Above this many cells, the table of common subsequence lengths would cost
 * too much: the changed middle is shown as all removed, then all added.
 */
export const MAX_TABLE_CELLS = 4_000_000;

/** The lines of a text; an empty text has none, and a final newline ends the last line. */
export function splitLines(text: string): string[] {
  if (text === '') {
    return [];
  }
  const lines = text.split(/\r\n|\r|\n/);
  if (lines[lines.length - 1] === '') {
    lines.pop();
  }
  return lines;
}

/** The diff of the middle parts, which share no first or last line. */
function middleDiff(before: string[], after: string[]): IDiffLine[] {
  const n = before.length;
  const m = after.length;
  if (n === 0 || m === 0 || n * m > MAX_TABLE_CELLS) {
    return [
      ...before.map(text => ({ kind: 'del' as const, text })),
      ...after.map(text => ({ kind: 'add' as const, text }))
    ];
  }
  // lengths[i * (m + 1) + j]: the longest common subsequence of before[i:] and after[j:].
  const width = m + 1;
  const lengths = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i * width + j] =
        before[i] === after[j]
          ? lengths[(i + 1) * width + j + 1] + 1
          : Math.max(lengths[(i + 1) * width + j], lengths[i * width + j + 1]);
    }
  }
  const lines: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (before[i] === after[j]) {
      lines.push({ kind: 'same', text: before[i] });
      i++;
      j++;
    } else if (lengths[(i + 1) * width + j] >= lengths[i * width + j + 1]) {
      lines.push({ kind: 'del', text: before[i++] });
    } else {
      lines.push({ kind: 'add', text: after[j++] });
    }
  }
  before.slice(i).forEach(text => lines.push({ kind: 'del', text }));
  after.slice(j).forEach(text => lines.push({ kind: 'add', text }));
  return lines;
}

/** The line diff from `before` to `after`. */
export function lineDiff(before: string, after: string): IDiffLine[] {
  const old = splitLines(before);
  const next = splitLines(after);
  let start = 0;
  while (
    start < old.length &&
    start < next.length &&
    old[start] === next[start]
  ) {
    start++;
  }
  let end = 0;
  while (
    end < old.length - start &&
    end < next.length - start &&
    old[old.length - 1 - end] === next[next.length - 1 - end]
  ) {
    end++;
  }
  const same = (text: string): IDiffLine => ({ kind: 'same', text });
  return [
    ...old.slice(0, start).map(same),
    ...middleDiff(
      old.slice(start, old.length - end),
      next.slice(start, next.length - end)
    ),
    ...old.slice(old.length - end).map(same)
  ];
}
