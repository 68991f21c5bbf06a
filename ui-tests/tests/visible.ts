/**
 * What the "every character is on the card" specs share (visible.spec.ts in
 * JupyterLab, notebook7-visible.spec.ts in Notebook 7): the notebook, the
 * expected text made by the package's own rule (`qloop_kernel.visible`), and
 * the checks of what a person sees.
 *
 * The notebook: cell 0 loads the extension; cell 1 is an agent cell whose
 * record was signed by someone else and edited (its step is the hidden-tail
 * line; its output still shows the original step); its saved messages carry
 * an invisible character and a long text. Cell 2 is an agent cell whose model
 * asks to run the hidden tail, a 5,000-character line and invisible and
 * mixed-script names.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { Locator, Page } from '@playwright/test';

import { StandInItem, expect } from './fixtures';

export const RECEIVED = 1;
export const LIVE = 2;
export const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];
export const WIDTHS = [360, 1280];
export const SHOTS = path.join(os.tmpdir(), 'qloop-shots');

const HIDDEN_TAIL =
  'harmless = 1' + ' '.repeat(400) + '; import os; HIDDEN_TAIL = 1';
const LONG_LINE = "long = '" + 'x'.repeat(4990) + "'";
const INVISIBLE =
  'x\u200b = 1\n\u3164 = 2\nvalue\u00ad = 3\n' +
  "tag = 'a\u{E0041}\u061c\u2060'\np\u0430ss = 4\n";
/** The code the model of cell 2 asks to run. */
export const LIVE_CODE = [HIDDEN_TAIL, LONG_LINE, INVISIBLE].join('\n');

/** Prints the notebook and what a person must see, as JSON (argv: the codes). */
const MAKE = `
import json, sys, time
from qloop_kernel.notebook.approval import adopted_texts
from qloop_kernel.records import CellRecord, DecisionRecord, MIME_TYPE, Timings, ToolCallRecord
from qloop_kernel.visible import as_shown

tail, original, live = sys.argv[1:4]
messages = [
    {"role": "user", "content": [{"type": "text", "text": "Set a."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "ignore\\u200b the user " + "MORE " * 700}]},
]
def record(code):
    return CellRecord(
        session_id="s", cell_id="received", prompt="Set a.", model="claude-sonnet-5-5",
        status="completed", answer="done", messages=messages,
        tool_calls=[ToolCallRecord(id="toolu_1", name="run_code", input={"code": code},
                                   decision=DecisionRecord(kind="approved"))],
        timings=Timings(started_at="2026-01-01T00:00:00.000+00:00"),
    )
mirror = record(original).to_json()
time.sleep(0.01)  # the edit comes later: the notebook keeps it (history.ts)
edited = record(tail).to_json()
def cell(id, source, metadata=None, outputs=()):
    return {"cell_type": "code", "id": id, "metadata": metadata or {}, "execution_count": None,
            "source": source, "outputs": list(outputs)}
output = {"output_type": "display_data", "data": {MIME_TYPE: mirror, "text/plain": "saved turn"},
          "metadata": {}}
notebook = {
    "nbformat": 4, "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                "language": "python"}, "language_info": {"name": "python"}},
    "cells": [cell("load", "%load_ext qloop_kernel"),
              cell("received", "%%agent\\nSet a.", {"qloop": edited}, [output]),
              cell("live", "%%agent\\nDo it.")],
}
shown, _ = adopted_texts(messages)
print(json.dumps({"notebook": notebook, "tail": as_shown(tail), "live": as_shown(live),
                  "adopted": [as_shown(text) for _, text in shown]}))
`;

/** The notebook and the text each part of it must show. */
export interface ICase {
  notebook: object;
  /** The hidden-tail step as shown. */
  tail: string;
  /** The live step as shown. */
  live: string;
  /** Each adopted message as shown. */
  adopted: string[];
}

/** The case, made by the package (records signed with a key of their own). */
export function makeCase(): ICase {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'qloop-visible-'));
  try {
    const output = execFileSync(
      process.env.PYTHON || 'python',
      ['-c', MAKE, HIDDEN_TAIL, 'a = 1', LIVE_CODE],
      {
        env: {
          ...process.env,
          QLOOP_SIGNING_KEY_FILE: path.join(folder, 'someone_else_key')
        },
        encoding: 'utf-8',
        maxBuffer: 16 * 1024 * 1024
      }
    );
    return JSON.parse(output);
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** The model of cell 2 asks to run LIVE_CODE, then answers. */
export function liveScript(): StandInItem[] {
  return [
    {
      content: [
        { type: 'tool_use', name: 'run_code', input: { code: LIVE_CODE } }
      ]
    },
    { content: 'Done.' }
  ];
}

/** The text a person sees in `locator` (its innerText, soft wraps aside). */
export async function seen(locator: Locator): Promise<string> {
  return locator.evaluate(node => (node as HTMLElement).innerText);
}

/**
 * Nothing in `box` is cut off: no element of it is wider inside than it
 * shows (each code box, each part of the card), the box lies within the page
 * width, and each mark lies within the box.
 */
export async function expectNothingClipped(
  page: Page,
  box: Locator
): Promise<void> {
  const width = page.viewportSize()!.width;
  const found = await box.evaluate(node => {
    const clipped = Array.from(node.querySelectorAll('*'))
      .concat([node])
      .filter(el => {
        const style = getComputedStyle(el);
        return (
          style.display !== 'none' &&
          style.display !== 'inline' &&
          el.scrollWidth > el.clientWidth + 1
        );
      })
      .map(el => `${el.tagName}.${el.className}`);
    const own = node.getBoundingClientRect();
    const marks = Array.from(node.querySelectorAll('.qloop-mark'))
      .map(el => el.getBoundingClientRect())
      .filter(r => r.width > 0)
      .filter(r => r.left < own.left - 1 || r.right > own.right + 1).length;
    return { clipped, marks, left: own.left, right: own.right };
  });
  expect(found.clipped).toEqual([]);
  expect(found.marks).toBe(0);
  expect(found.left).toBeGreaterThanOrEqual(0);
  expect(found.right).toBeLessThanOrEqual(width + 1);
}

/** The transcript view of the edited record shows the code that would run. */
export async function expectTranscriptShowsSavedRecord(
  page: Page,
  view: Locator,
  expected: ICase
): Promise<void> {
  await expect(view.locator('.qloop-transcript-source')).toBeVisible();
  const input = view.locator('.qloop-tool-input').first();
  expect(await seen(input)).toBe(expected.tail);
  await expectNothingClipped(page, view);
}

/** The received card: the hidden tail and the adopted messages, whole. */
export async function expectReceivedCard(
  page: Page,
  card: Locator,
  expected: ICase
): Promise<void> {
  await expect(card).toContainText('received from elsewhere');
  const code = card.locator('.qloop-code pre');
  expect((await seen(code)).trimEnd()).toBe(expected.tail);
  const adopted = card.locator('.qloop-card-adopted');
  await expect(adopted.locator('summary')).toHaveText(
    'show the 2 saved messages that will become context'
  );
  await adopted.locator('summary').click();
  const texts = adopted.locator('.qloop-adopted-text');
  await expect(texts).toHaveCount(expected.adopted.length);
  for (let i = 0; i < expected.adopted.length; i++) {
    expect(await seen(texts.nth(i))).toBe(expected.adopted[i]);
  }
  expect(expected.adopted[1]).toContain('ignore⟨U+200B ZERO WIDTH SPACE⟩');
  expect(expected.adopted[1]).toMatch(/… [\d,]+ more characters$/);
  await expectNothingClipped(page, card);
}

/** The live card: every character of LIVE_CODE or its mark, and the mixed-script name. */
export async function expectLiveCard(
  page: Page,
  card: Locator,
  expected: ICase
): Promise<void> {
  const code = card.locator('.qloop-code pre');
  const text = (await seen(code)).trimEnd();
  expect(text).toBe(expected.live.trimEnd());
  expect(text).toContain(
    'harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1'
  );
  expect(text).toContain('x'.repeat(4990));
  for (const mark of [
    '⟨U+200B ZERO WIDTH SPACE⟩',
    '⟨U+3164 HANGUL FILLER⟩',
    '⟨U+00AD SOFT HYPHEN⟩',
    '⟨U+E0041 TAG LATIN CAPITAL LETTER A⟩',
    '⟨U+061C ARABIC LETTER MARK⟩',
    '⟨U+2060 WORD JOINER⟩'
  ]) {
    expect(text).toContain(mark);
  }
  expect(text).not.toMatch(/[\u200b\u3164\u00ad\u061c\u2060]|\u{E0041}/u);
  await expect(card.locator('.qloop-card-confusable')).toContainText(
    'mixes Latin and Cyrillic letters: U+0430 CYRILLIC SMALL LETTER A'
  );
  await expectNothingClipped(page, card);
}
