/**
 * What a person reads in an agent cell, in JupyterLab Light and Dark: a
 * policy denial in the user's words, an API error once with its fix, a typo
 * of a sub-command caught before any model call, `%config QloopAgent.*`
 * taking effect, and Stop ending a step that loops.
 *
 * agent_cell.ipynb: cell 0 loads the extension; cells 1 and 2 are rewritten
 * by each test.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';

import { IStandIn, cell, expect, test, waitForIdleKernel } from './fixtures';

const NOTEBOOK = 'agent_cell.ipynb';
const AGENT = 1;
const AFTER = 2;

/** Put `source` in cell `index`, run it and wait until the kernel is idle. */
async function runCell(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<Locator> {
  await page.notebook.setCell(index, 'code', source);
  await page.notebook.runCell(index, { inplace: true });
  await waitForIdleKernel(page);
  return (await cell(page, index)).locator('.jp-OutputArea');
}

/** Run the cell loading the extension. */
async function loadExtension(
  page: IJupyterLabPageFixture,
  standIn: IStandIn
): Promise<void> {
  await page.notebook.runCell(0, { inplace: true });
  await waitForIdleKernel(page);
  expect(await standIn.requests()).toHaveLength(0);
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
  test.describe(`messages for people (${theme})`, () => {
    // Galata's kernel mock breaks on an interrupt; Stop interrupts the step.
    test.use({ kernels: null });

    test.beforeEach(async ({ page }) => {
      await page.theme.setTheme(theme);
    });

    test('a policy denial, an API error and a typo each read as one line with the fix', async ({
      page,
      openNotebook,
      standIn
    }) => {
      await standIn.reset([
        {
          content: [
            { type: 'tool_use', name: 'run_code', input: { code: 'y = 42' } }
          ]
        },
        { content: 'I could not set it.' }
      ]);
      await openNotebook(NOTEBOOK);
      await loadExtension(page, standIn);

      const denied = await runCell(
        page,
        AGENT,
        '%%agent --new --approve readonly\nSet y to 42.'
      );
      await expect(denied).toContainText(
        "denied by the approval policy 'readonly'"
      );
      await expect(denied).not.toContainText('The user denied');
      await expect(denied).not.toContainText('Take the reason into account');
      // The status line counts model calls as such (no "turn 2/20").
      await expect(denied.locator('.qloop-live-status-text')).toContainText(
        /model call 2\/20/
      );
      await expect(denied).not.toContainText(/turn \d+\/\d+/);
      expect(await standIn.requests()).toHaveLength(2);

      const failed = await runCell(
        page,
        AGENT,
        '%%agent --new --model claude-nope\nhello'
      );
      await expect(failed).toContainText(
        '`%agent models` lists the known ones'
      );
      const text = (await failed.innerText()).replace(/\s+/g, ' ');
      expect(occurrences(text, 'model claude-nope not found')).toBe(1);

      const typo = await runCell(page, AFTER, '%agent stauts');
      await expect(typo).toContainText('did you mean `%agent status`?');
      // Only the unknown model's request was added: the typo reached no model.
      expect(await standIn.requests()).toHaveLength(3);

      const config = await runCell(
        page,
        AFTER,
        "%config QloopAgent.model = 'claude-haiku-4-5'\n%agent status"
      );
      await expect(config).toContainText('model=claude-haiku-4-5');
      const listed = await runCell(page, AFTER, '%config');
      await expect(listed).toContainText('QloopAgent');
      expect(await standIn.requests()).toHaveLength(3);
    });

    test('Stop ends a step that loops, says so, and goes away', async ({
      page,
      openNotebook,
      standIn
    }) => {
      const loop =
        'import time\nlaps = 0\nwhile True:\n    laps += 1\n    time.sleep(0.05)';
      await standIn.reset([
        {
          content: [
            { type: 'tool_use', name: 'run_code', input: { code: loop } }
          ]
        },
        { content: 'never sent' }
      ]);
      await openNotebook(NOTEBOOK);
      await loadExtension(page, standIn);

      await page.notebook.setCell(
        AGENT,
        'code',
        '%%agent --new --approve auto\nLoop.'
      );
      // Run without waiting for the end: the step loops until Stop.
      await page.notebook.enterCellEditingMode(AGENT);
      await page.keyboard.press('Control+Enter');
      const agent = await cell(page, AGENT);
      await expect(agent).toContainText('runs without asking', {
        timeout: 60000
      });
      await page.waitForTimeout(500); // the step is under way
      const stop = agent
        .locator('.qloop-live-status button')
        .filter({ hasText: /^Stop$/ });
      await expect(stop).toBeVisible();
      await stop.click();
      await expect(agent).toContainText(
        'stopped with the Stop button: the step was interrupted',
        { timeout: 10000 }
      );
      await waitForIdleKernel(page);
      await expect(stop).toBeHidden(); // the turn ended: nothing left to stop
      expect(await standIn.requests()).toHaveLength(1);

      const laps = await runCell(page, AFTER, 'first = laps\nprint(first > 0)');
      await expect(laps).toHaveText('True');
      const still = await runCell(
        page,
        AFTER,
        'time.sleep(0.3)\nprint(laps == first)'
      );
      await expect(still).toHaveText('True'); // the loop is not running any more
    });
  });
}
