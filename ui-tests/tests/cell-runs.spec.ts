/**
 * Cells the agent runs, in JupyterLab (Light and Dark) and Notebook 7: an
 * add_cell with `run` reads "Accept and run" and, accepted, runs as the cell,
 * its outputs in that cell and in what the model is told; run_cell asks on
 * the card with the cell's current source, and what is approved (an edit on
 * the card included) is the cell's source and what runs, its outputs landing
 * in that cell.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell,
 * cell 2 prints `y + 1`. agent_runs_cell.ipynb: cell 0 loads the extension,
 * cell 1 (id `show`) prints y, cell 2 is the agent cell.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator, Page } from '@playwright/test';

import {
  IStandIn,
  StandInItem,
  approvalCard,
  expect,
  test,
  toolResults,
  waitForIdleKernel
} from './fixtures';
import {
  runAll as runAll7,
  test as test7,
  waitForIdleKernel as waitForIdle7
} from './nb7';

const NOTEBOOK = 'agent_cell.ipynb';
const AGENT = 1;
const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];
const PROPOSED = 'z = 6 * 7\nprint("z is", z)';

const PROPOSE_AND_RUN: StandInItem[] = [
  {
    content: [
      { type: 'text', text: 'One cell, run when you accept it.' },
      {
        type: 'tool_use',
        name: 'add_cell',
        input: { source: PROPOSED, run: true }
      }
    ]
  },
  { content: 'It ran.' }
];

const RUN_THE_CELL: StandInItem[] = [
  {
    content: [{ type: 'tool_use', name: 'run_code', input: { code: 'y = 41' } }]
  },
  {
    content: [
      { type: 'tool_use', name: 'run_cell', input: { cell_id: 'show' } }
    ]
  },
  { content: 'Ran your cell.' }
];

/** The text of the tool result in request `index` to the stand-in. */
async function resultText(standIn: IStandIn, index: number): Promise<string> {
  await expect
    .poll(async () => (await standIn.requests()).length)
    .toBeGreaterThan(index);
  const [result] = toolResults((await standIn.requests())[index]);
  const content = result.content;
  return typeof content === 'string'
    ? content
    : content.map((block: { text?: string }) => block.text ?? '').join('');
}

/** A button of an approval card, by its label (the icon glyph aside). */
function button(card: Locator, label: string): Locator {
  return card.locator('button').filter({ hasText: new RegExp(`^${label}$`) });
}

/** The bar of the proposal that runs when accepted, once it shows. */
async function runningProposal(page: Page): Promise<Locator> {
  const bar = page.locator('.qloop-proposal');
  await expect(bar).toBeVisible({ timeout: 60000 });
  await expect(bar).toContainText(
    'Proposed by the agent · new cell, runs when accepted'
  );
  await expect(bar.locator('button.qloop-proposal-accept')).toHaveText(
    'Accept and run'
  );
  return bar;
}

/** Accept and run: the new cell shows its own output and the model reads it. */
async function acceptAndRun(page: Page, standIn: IStandIn): Promise<void> {
  const bar = await runningProposal(page);
  await bar.locator('button.qloop-proposal-accept').click();
  await expect(bar).toHaveCount(0);
  const text = await resultText(standIn, 1);
  expect(text).toMatch(
    /accepted: added cell \S+ after agent by the user; it ran/
  );
  expect(text).toContain('its outputs are in that cell');
  expect(text).toContain('z is 42');
  // The new cell, right after the agent cell.
  const added = page.locator('.jp-Notebook .jp-Cell').nth(2);
  await expect(added.locator('.jp-InputArea-editor')).toContainText(
    'z = 6 * 7'
  );
  await expect(added.locator('.jp-OutputArea-output')).toHaveText('z is 42', {
    timeout: 30000
  });
  // What the run did to the variables shows on the cell, until dismissed.
  const note = added.locator('.qloop-cell-effect');
  await expect(note).toContainText('Run by the agent');
  await expect(note).toContainText('z: created (int 42)');
  await note.getByRole('button', { name: 'Dismiss' }).click();
  await expect(note).toHaveCount(0);
}

for (const theme of THEMES) {
  test.describe(`JupyterLab: cells the agent runs (${theme})`, () => {
    test('an accepted add_cell with run runs as the cell: its output is the cell’s', async ({
      page,
      openNotebook,
      runAll,
      saveAndRead,
      standIn
    }) => {
      await standIn.reset(PROPOSE_AND_RUN);
      const serverPath = await openNotebook(NOTEBOOK);
      await page.theme.setTheme(theme);
      await runAll({ wait: false });
      await acceptAndRun(page, standIn);
      await waitForIdleKernel(page);
      const file = await saveAndRead(serverPath);
      expect(file.cells.map(c => c.id).slice(0, 2)).toEqual(['load', 'agent']);
      const kept = file.cells[2];
      expect(kept.metadata.qloop_provenance.agent_cell).toBe('agent');
      expect(JSON.stringify(kept.outputs)).toContain('z is 42');
      // The agent cell says what ran and what it did to the variables.
      const agentOutput = await (await cellAt(page, AGENT)).textContent();
      expect(agentOutput).toContain('its outputs are in that cell');
      expect(agentOutput).toContain('z');
    });
  });
}

test('Undo takes back an accepted cell that ran, with what it did to the variables', async ({
  page,
  openNotebook,
  runAll,
  saveAndRead,
  standIn
}) => {
  await standIn.reset(PROPOSE_AND_RUN);
  const serverPath = await openNotebook(NOTEBOOK);
  await runAll({ wait: false });
  await acceptAndRun(page, standIn);
  await waitForIdleKernel(page);
  const agent = await cellAt(page, AGENT);
  await expect(agent).toContainText(/added cell \S+/);
  await button(agent, 'Undo').click();
  await expect(agent).toContainText(/removed cell \S+ \(added by the step\)/, {
    timeout: 30000
  });
  await expect(agent).toContainText('removed z (created by the step)');
  await expect(
    page.locator('.jp-Notebook .jp-Cell').filter({ hasText: 'z = 6 * 7' })
  ).toHaveCount(1); // the agent cell's transcript only: the added cell is gone
  const file = await saveAndRead(serverPath);
  expect(file.cells.map(c => c.id)).toEqual(['load', 'agent', 'after']);
});

/** Cell `index` of the open JupyterLab notebook. */
async function cellAt(
  page: IJupyterLabPageFixture,
  index: number
): Promise<Locator> {
  return page.locator('.jp-Notebook .jp-Cell').nth(index);
}

test('run_cell: the card shows the cell’s source, and the edited source approved is the cell’s and what runs', async ({
  page,
  openNotebook,
  runAll,
  saveAndRead,
  standIn
}) => {
  await standIn.reset(RUN_THE_CELL);
  const serverPath = await openNotebook('agent_runs_cell.ipynb');
  await runAll({ wait: false });
  const show = await cellAt(page, 1);
  const cards = await approvalCard(page, 2);
  await expect(cards.first()).toBeVisible({ timeout: 60000 });
  await expect(show.locator('.jp-OutputArea-output')).toHaveText('y is None');
  await button(cards.first(), 'Approve').click();

  // The second card: run_cell, with the cell's source as the page holds it.
  await expect(cards).toHaveCount(2, { timeout: 60000 });
  const card = cards.nth(1);
  await expect(card).toContainText('run_cell');
  await expect(card).toContainText('print("y is", globals().get("y"))');
  await button(card, 'Edit').click();
  const editor = card.locator('textarea');
  await editor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.type('print("y + 2 is", y + 2)');
  await button(card, 'Approve').click();

  // Its outputs replace the cell's, and the approved source is the cell's.
  await expect(show.locator('.jp-OutputArea-output')).toHaveText(
    'y + 2 is 43',
    { timeout: 30000 }
  );
  await expect(show.locator('.jp-InputArea-editor')).toContainText(
    'print("y + 2 is", y + 2)'
  );
  const text = await resultText(standIn, 2);
  expect(text).toContain('cell show ran; its outputs are in that cell');
  expect(text).toContain('y + 2 is 43');
  expect(text).toContain('the user edited the input before approving');
  await waitForIdleKernel(page);
  const file = await saveAndRead(serverPath);
  const saved = file.cells.find(c => c.id === 'show')!;
  const source = saved.source ?? '';
  expect(Array.isArray(source) ? source.join('') : source).toBe(
    'print("y + 2 is", y + 2)'
  );
  expect(saved.outputs).toEqual([
    { output_type: 'stream', name: 'stdout', text: 'y + 2 is 43\n' }
  ]);
});

test7(
  'Notebook 7: an accepted add_cell with run runs as the cell, at 360 px',
  async ({ notebook7, standIn }) => {
    const page = notebook7.page;
    await page.setViewportSize({ width: 360, height: 800 });
    await standIn.reset(PROPOSE_AND_RUN);
    await notebook7.open(NOTEBOOK);
    await runAll7(page, { wait: false });
    const bar = await runningProposal(page);
    const box = await bar.boundingBox();
    expect(box!.width).toBeLessThanOrEqual(360);
    await acceptAndRun(page, standIn);
    await waitForIdle7(page);
  }
);
