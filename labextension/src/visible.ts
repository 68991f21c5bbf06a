/**
 * Code as a person sees it: the rule of `qloop_kernel/visible.py`, so the
 * transcript view shows the same marks as the approval card.
 *
 * A character of Unicode category Cf, Zl, Zp, Co or Cn, a Hangul filler, a
 * control other than tab and line feed (a carriage return before a line feed
 * is a line end), a space other than U+0020 and the marks' own brackets
 * become `⟨U+200B ZERO WIDTH SPACE⟩`; a run of `WHITESPACE_RUN` or more spaces
 * or tabs inside a line (not its indentation) becomes `⟨400 spaces⟩`. The
 * shared vectors (test/visible-vectors.json) hold both sides to one output.
 */
import { TranslationBundle, nullTranslator } from '@jupyterlab/translation';

import { TRANSLATION_DOMAIN } from './labels';
import { MARK_NAMES } from './marknames';

/** Spaces or tabs inside a line from which the run is shown as a mark. */
export const WHITESPACE_RUN = 8;
/** Class of a mark in the page. */
export const MARK_CLASS = 'qloop-mark';

const OPEN = '\u27E8';
const CLOSE = '\u27E9';
const FILLERS = '\u115F\u1160\u3164\uFFA0';
const RULE = /^[\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\p{Cc}\p{Zs}]$/u;
const NAMES: ReadonlyMap<number, string> = new Map(MARK_NAMES);

/** A stretch of code: `text` as it runs, `mark` what is shown (null: the text). */
export interface IPiece {
  text: string;
  mark: string | null;
}

function isMarked(char: string): boolean {
  if (char === '\t' || char === '\n' || char === ' ') {
    return false;
  }
  return (
    RULE.test(char) || FILLERS.includes(char) || char === OPEN || char === CLOSE
  );
}

function unnamed(char: string): string {
  if (/^\p{Co}$/u.test(char)) {
    return 'private use';
  }
  if (/^\p{Cs}$/u.test(char)) {
    return 'surrogate';
  }
  return /^\p{Cn}$/u.test(char) ? 'unassigned' : 'no name';
}

/** The mark of one character: `⟨U+200B ZERO WIDTH SPACE⟩`. */
export function charMark(char: string): string {
  const point = char.codePointAt(0) ?? 0;
  const hex = point.toString(16).toUpperCase().padStart(4, '0');
  return `${OPEN}U+${hex} ${NAMES.get(point) ?? unnamed(char)}${CLOSE}`;
}

/** The mark of a run of spaces and tabs: `⟨400 spaces⟩`. */
export function runMark(run: string): string {
  const kind = /^ +$/.test(run)
    ? 'spaces'
    : /^\t+$/.test(run)
      ? 'tabs'
      : 'spaces and tabs';
  return `${OPEN}${run.length} ${kind}${CLOSE}`;
}

function linePieces(line: string, into: IPiece[]): void {
  const indent = /^[ \t]*/.exec(line)?.[0] ?? '';
  into.push({ text: indent, mark: null });
  const rest = line.slice(indent.length);
  // A run of blanks, or one character (a whole code point).
  const parts = rest.match(/[ \t]+|[^ \t]/gsu) ?? [];
  parts.forEach((part, index) => {
    if (part[0] === ' ' || part[0] === '\t') {
      const long = part.length >= WHITESPACE_RUN;
      into.push({ text: part, mark: long ? runMark(part) : null });
    } else if (part === '\r' && parts[index + 1] === '\n') {
      into.push({ text: part, mark: null });
    } else {
      into.push({ text: part, mark: isMarked(part) ? charMark(part) : null });
    }
  });
}

/** The code cut into plain text and marks; joined, their texts are the code. */
export function pieces(code: string): IPiece[] {
  const found: IPiece[] = [];
  for (const line of code.match(/[^\n]*\n|[^\n]+/g) ?? []) {
    linePieces(line, found);
  }
  const merged: IPiece[] = [];
  for (const piece of found) {
    const last = merged[merged.length - 1];
    if (piece.mark === null && last && last.mark === null) {
      last.text += piece.text;
    } else if (piece.text) {
      merged.push({ ...piece });
    }
  }
  return merged;
}

/** The code as a person reads it, marks in place of what they stand for. */
export function asShown(code: string): string {
  return pieces(code)
    .map(piece => piece.mark ?? piece.text)
    .join('');
}

/** The code as nodes of `doc`: text, and each mark a styled span. */
export function shownNodes(
  doc: Document,
  code: string,
  trans: TranslationBundle = nullTranslator.load(TRANSLATION_DOMAIN)
): DocumentFragment {
  const fragment = doc.createDocumentFragment();
  for (const piece of pieces(code)) {
    if (piece.mark === null) {
      fragment.appendChild(doc.createTextNode(piece.text));
      continue;
    }
    const mark = doc.createElement('span');
    mark.className = MARK_CLASS;
    mark.textContent = piece.mark;
    mark.title = trans.__('not shown as itself; runs as written');
    fragment.appendChild(mark);
  }
  return fragment;
}
