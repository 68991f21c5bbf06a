/**
 * Fix, Explain and Edit with agent from a cell, in JupyterLab and Notebook
 * 7: the Fix button shows only on the cell whose run failed; its turn runs
 * beside the cell (the "qloop assist" area), not as a new cell; the
 * proposal's diff is on the cell; a rejection's reason reaches the agent,
 * which tries again; Accept and run leaves the cell without an error and the
 * rest of the notebook as it was; the saved file keeps the turn's record in
 * the cell's `qloop_assist` metadata. Edit with agent (Accel K) sends the
 * instruction intact. Screenshots of both, Light and Dark, go to docs/.
 *
 * fix.ipynb: `load` loads qloop and sets d = {'a': 1}; `lookup` reads
 * d['b'] (a KeyError); `after` prints.
 */
import * as fs from 'fs';
import * as path from 'path';

import { Locator, Page } from '@playwright/test';

import {
  INotebookFile,
  IStandIn,
  NOTEBOOK_DIR,
  REPOSITORY_ROOT,
  StandInItem,
  expect,
  test,
  toolResults,
  waitForIdleKernel
} from './fixtures';
import {
  cell as cell7,
  runAll as runAll7,
  test as test7,
  waitForIdleKernel as waitForIdle7
} from './nb7';

const NOTEBOOK = 'fix.ipynb';
const FAILING = "value = d['b']\nprint('value', value)";
const FIRST_TRY = "value = d.get('b', 0)\nprint('value', value)";
const FIXED = "value = d['a']\nprint('value', value)";
const EDITED = "print('after:', value)";
const INSTRUCTION =
  'print "after:" and the value\nkeep it on {one} line \\ $please';

const edit = (cellId: string, source: string): StandInItem => ({
  content: [
    { type: 'text', text: 'Here is the change.' },
    { type: 'tool_use', name: 'edit_cell', input: { cell_id: cellId, source } }
  ]
});

/** A fix rejected with a reason, a second fix, then an edit of `after`. */
const SCRIPT: StandInItem[] = [
  edit('lookup', FIRST_TRY),
  edit('lookup', FIXED),
  { content: 'd has no key b: the cell reads key a.' },
  edit('after', EDITED),
  { content: 'It prints the value now.' }
];

function text(value: unknown): string {
  return ([] as string[]).concat((value as string | string[]) ?? []).join('');
}

/** The text of the tool results of the stand-in's request `index`. */
async function resultOf(standIn: IStandIn, index: number): Promise<string> {
  await expect
    .poll(async () => (await standIn.requests()).length, { timeout: 60000 })
    .toBeGreaterThan(index);
  return JSON.stringify(toolResults((await standIn.requests())[index]));
}

/** The task of the stand-in's request `index` (its first user message's text). */
async function taskOf(standIn: IStandIn, index: number): Promise<string> {
  const request = (await standIn.requests())[index];
  const user = (request.body.messages ?? []).filter(m => m.role === 'user');
  return JSON.stringify(user[user.length - 1].content);
}

/** The cells but `changed`, as the file in the repository has them. */
function unchanged(cells: INotebookFile['cells'], changed: string[]): object[] {
  return cells
    .filter(c => !changed.includes(c.id))
    .map(c => ({
      id: c.id,
      source: text(c.source),
      metadata: { ...c.metadata, trusted: undefined }
    }));
}

/** Check the saved `lookup` cell: no error, its fix's record beside its own metadata. */
function expectFixedAndSaved(file: INotebookFile): void {
  const lookup = file.cells.find(c => c.id === 'lookup')!;
  expect(text(lookup.source)).toBe(FIXED);
  const outputs = (lookup.outputs ?? []) as Record<string, any>[];
  expect(outputs.map(o => o.output_type)).toEqual(['stream']);
  expect(text(outputs[0].text)).toBe('value 1\n');
  expect(lookup.metadata.qloop).toBeUndefined(); // not an agent cell
  expect(lookup.metadata.qloop_provenance.agent_cell).toBe('lookup');
  const turns = lookup.metadata.qloop_assist.turns;
  expect(turns.map((t: any) => t.action)).toEqual(['fix']);
  expect(turns[0].record.cell_id).toBe('lookup');
  expect(turns[0].record.status).toBe('completed');
  expect(turns[0].record.digest).toBeTruthy();
  expect(turns[0].record.prompt).toContain(
    'Fix the error of notebook cell lookup.'
  );
}

/**
 * The Fix flow on a page: reject with a reason, then Accept and run the
 * second try; with `card`, the agent first reads d, approved on a card in
 * the assist area (its requests come one later).
 */
async function fixFlow(
  page: Page,
  lookup: Locator,
  standIn: IStandIn,
  shoot: (name: string) => Promise<void>,
  card = false
): Promise<void> {
  const later = card ? 1 : 0;
  const fixes = page.locator('.qloop-assist-fix:visible');
  await expect(fixes).toHaveCount(1, { timeout: 30000 });
  await expect(lookup.locator('.qloop-assist-fix')).toBeVisible();
  const cellsBefore = await page.locator('.jp-Notebook .jp-Cell').count();
  await lookup.locator('.qloop-assist-fix').click();
  if (card) {
    // The approval card is an ipywidget: the notebook's renderers show it.
    const shown = lookup.locator('.qloop-assist-area .qloop-approval-card');
    await expect(shown).toBeVisible({ timeout: 60000 });
    await expect(shown.locator('.qloop-code')).toHaveText('sorted(d)');
    await shown
      .locator('button')
      .filter({ hasText: /^Approve$/ })
      .click();
    expect(await resultOf(standIn, 1)).toContain("['a']");
  }
  const bar = lookup.locator('.qloop-proposal');
  await expect(bar).toBeVisible({ timeout: 60000 });
  await expect(lookup.locator('.qloop-assist-area')).toContainText(
    'qloop assist: Fix'
  );
  const diff = bar.locator('.qloop-proposal-diff');
  await expect(diff.locator('.qloop-diff-del')).toHaveText(["-value = d['b']"]);
  await expect(diff.locator('.qloop-diff-add')).toHaveText([
    "+value = d.get('b', 0)"
  ]);
  // Not run ahead: the default policy asks before write steps.
  await expect(bar.locator('.qloop-proposal-effect')).toHaveText(
    "not run ahead: the policy 'ask' asks before write steps"
  );
  // No cell was added for the turn.
  expect(await page.locator('.jp-Notebook .jp-Cell').count()).toBe(cellsBefore);
  await shoot('fix');
  await bar.locator('button.qloop-proposal-reject').click();
  await bar.locator('.qloop-proposal-reason-input').fill('keep reading a key');
  await bar.locator('button.qloop-proposal-confirm').click();
  expect(await resultOf(standIn, 1 + later)).toContain('keep reading a key');
  await expect(diff.locator('.qloop-diff-add')).toHaveText(
    ["+value = d['a']"],
    {
      timeout: 60000
    }
  );
  await bar.locator('button.qloop-proposal-accept-run').click();
  await expect(
    lookup.locator('.jp-Cell-outputWrapper .jp-OutputArea-output').last()
  ).toHaveText('value 1', { timeout: 60000 });
  await expect(
    lookup.locator('.jp-Cell-outputWrapper [data-mime-type*="error"]')
  ).toHaveCount(0);
  await expect(fixes).toHaveCount(0);
  expect(await resultOf(standIn, 2 + later)).toContain(
    'now has the proposed source'
  );
}

test.describe('the agent from a cell in JupyterLab', () => {
  test('Fix on the failed cell only, a reason that reaches the agent, Accept and run, the record saved; Edit with agent', async ({
    page,
    openNotebook,
    runAll,
    saveAndRead,
    standIn
  }) => {
    await standIn.reset(SCRIPT);
    const serverPath = await openNotebook(NOTEBOOK);
    await runAll();
    const cellOf = (index: number) =>
      page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').nth(index);
    const lookup = cellOf(1);
    const enabled = (index: number) =>
      page.evaluate(
        ([id, at]) => {
          const app = (window as any).jupyterapp;
          app.shell.currentWidget.content.activeCellIndex = at;
          return app.commands.isEnabled(id);
        },
        ['qloop:fix-cell', index] as [string, number]
      );
    await expect.poll(() => enabled(1), { timeout: 30000 }).toBe(true);
    expect(await enabled(0)).toBe(false);
    const shoot = async (name: string) => {
      for (const [theme, suffix] of [
        ['JupyterLab Light', 'light'],
        ['JupyterLab Dark', 'dark']
      ]) {
        await page.theme.setTheme(theme);
        await cellOf(name === 'fix' ? 1 : 2).screenshot({
          path: path.join(REPOSITORY_ROOT, 'docs', `${name}-${suffix}.png`)
        });
      }
    };
    await fixFlow(page, lookup, standIn, shoot);
    expect(await taskOf(standIn, 0)).toContain(
      'Fix the error of notebook cell lookup.'
    );
    await waitForIdleKernel(page);
    let file = await saveAndRead(serverPath);
    expectFixedAndSaved(file);
    const original: INotebookFile = JSON.parse(
      fs.readFileSync(path.join(NOTEBOOK_DIR, NOTEBOOK), 'utf-8')
    );
    expect(unchanged(file.cells, ['lookup', 'load'])).toEqual(
      unchanged(original.cells, ['lookup', 'load'])
    );

    // Edit with agent on `after`: Accel K opens the prompt box.
    const after = cellOf(2);
    await after.locator('.jp-InputPrompt').click();
    await page.keyboard.press('Control+k');
    const input = after.locator('.qloop-assist-input');
    await expect(input).toBeFocused();
    const [first, second] = INSTRUCTION.split('\n');
    await input.pressSequentially(first);
    await input.press('Shift+Enter');
    await input.pressSequentially(second);
    await input.press('Enter');
    const bar = after.locator('.qloop-proposal');
    await expect(bar).toBeVisible({ timeout: 60000 });
    await expect(after.locator('.qloop-assist-area')).toContainText(
      'qloop assist: Edit with agent'
    );
    await expect(bar.locator('.qloop-diff-add')).toHaveText([`+${EDITED}`]);
    expect(await taskOf(standIn, 3)).toContain(
      JSON.stringify(
        `Change notebook cell after as the user asks: ${INSTRUCTION}`
      ).slice(1, -1)
    );
    await shoot('edit');
    await bar.locator('button.qloop-proposal-accept').click();
    await expect(bar).toHaveCount(0);
    await waitForIdleKernel(page);
    file = await saveAndRead(serverPath);
    const saved = file.cells.find(c => c.id === 'after')!;
    expect(text(saved.source)).toBe(EDITED);
    expect(saved.metadata.qloop_assist.turns[0].action).toBe('edit');
  });
});

test7.describe('the agent from a cell in Notebook 7', () => {
  test7(
    'Fix on the failed cell only, its approval card beside the cell, Accept and run, the record saved',
    async ({ notebook7, standIn }) => {
      const read: StandInItem = {
        content: [
          { type: 'tool_use', name: 'run_code', input: { code: 'sorted(d)' } }
        ]
      };
      await standIn.reset([read, ...SCRIPT.slice(0, 3)]);
      await notebook7.open(NOTEBOOK);
      const page = notebook7.page;
      await runAll7(page);
      await fixFlow(page, cell7(page, 1), standIn, async () => undefined, true);
      await waitForIdle7(page);
      const file = await notebook7.save(saved =>
        Boolean(saved.cells[1]?.metadata?.qloop_assist)
      );
      expectFixedAndSaved(file);
    }
  );
});
