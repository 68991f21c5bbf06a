/**
 * What a person reads in an agent cell in Notebook 7, in the Light and the
 * Dark theme (messages.spec.ts is the same for JupyterLab):
 *
 * - a policy denial in the user's words, and a status line that counts model
 *   calls as such;
 * - an API error shown once, with the way to list the models;
 * - a typo of a sub-command caught before any model call;
 * - `%config QloopAgent.*` taking effect, and `%config` listing QloopAgent;
 * - Stop ending a step that loops, saying so, and going away;
 * - the replay of a saved turn after a restart saying that no model is
 *   called now and what the original turn cost.
 *
 * Each test writes its own notebook; a cell runs on its own (clicked, then
 * Ctrl+Enter), so a cell that fails stops nothing else.
 */
import { Locator, Page } from '@playwright/test';

import { IStandIn, runCodeScript } from './fixtures';
import {
  approvalCard,
  button,
  cell,
  expect,
  notebookOf,
  promptOf,
  test,
  waitForIdleKernel
} from './nb7';

const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];

/**
 * Run cell `index` on its own (click into it, Ctrl+Enter) and, unless `wait`
 * is false, wait until it has run and the kernel is idle; returns its outputs.
 */
async function runCell(
  page: Page,
  index: number,
  options: { wait?: boolean } = {}
): Promise<Locator> {
  const target = cell(page, index);
  await target.locator('.cm-content').click();
  await page.keyboard.press('Control+Enter');
  if (options.wait ?? true) {
    await expect
      .poll(() => promptOf(page, index), { timeout: 60000 })
      .toMatch(/^\d+$/);
    await waitForIdleKernel(page);
  }
  return target.locator('.jp-OutputArea');
}

/** The one-line text of `outputs`, white space collapsed. */
async function textOf(outputs: Locator): Promise<string> {
  return (await outputs.innerText()).replace(/\s+/g, ' ');
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

/** Run the cell loading the extension: no model call. */
async function loadExtension(page: Page, standIn: IStandIn): Promise<void> {
  await runCell(page, 0);
  expect(await standIn.requests()).toHaveLength(0);
}

for (const theme of THEMES) {
  test.describe(`Notebook 7 messages for people (${theme})`, () => {
    test.use({ notebook7Theme: theme, viewport: { width: 1280, height: 900 } });
    // Galata's kernel mock breaks on an interrupt; Stop interrupts the step.
    test.use({ kernels: null });

    test('a policy denial, an API error and a typo each read as one line with the fix, and config works', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset([
        {
          content: [
            { type: 'tool_use', name: 'run_code', input: { code: 'y = 42' } }
          ]
        },
        { content: 'I could not set it.' }
      ]);
      await notebook7.open(
        'messages.ipynb',
        notebookOf([
          '%load_ext qloop_kernel',
          '%%agent --new --approve readonly\nSet y to 42.',
          '%%agent --new --model claude-nope\nhello',
          '%agent stauts',
          "%config QloopAgent.model = 'claude-haiku-4-5'\n%agent status",
          '%config'
        ])
      );
      await loadExtension(page, standIn);

      const denied = await runCell(page, 1);
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

      const failed = await runCell(page, 2);
      await expect(failed).toContainText(
        '`%agent models` lists the known ones'
      );
      expect(
        occurrences(await textOf(failed), 'model claude-nope not found')
      ).toBe(1);

      const typo = await runCell(page, 3);
      await expect(typo).toContainText('did you mean `%agent status`?');
      // Only the unknown model's request was added: the typo reached no model.
      expect(await standIn.requests()).toHaveLength(3);

      const config = await runCell(page, 4);
      await expect(config).toContainText('model=claude-haiku-4-5');
      const listed = await runCell(page, 5);
      await expect(listed).toContainText('QloopAgent');
      expect(await standIn.requests()).toHaveLength(3);
    });

    test('Stop ends a step that loops, says so, and goes away', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
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
      await notebook7.open(
        'stop.ipynb',
        notebookOf([
          '%load_ext qloop_kernel',
          '%%agent --new --approve auto\nLoop.',
          'first = laps\nprint(first > 0)',
          'time.sleep(0.3)\nprint(laps == first)'
        ])
      );
      await loadExtension(page, standIn);

      // Run without waiting for the end: the step loops until Stop.
      await runCell(page, 1, { wait: false });
      const agent = cell(page, 1);
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

      await expect(await runCell(page, 2)).toHaveText('True');
      // The loop is not running any more.
      await expect(await runCell(page, 3)).toHaveText('True');
    });

    test('a saved turn replayed after a restart says no model is called now and what the original turn cost', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset(runCodeScript('y = 42', 'Done: `y` is **42**.'));
      await notebook7.open(
        'replay.ipynb',
        notebookOf([
          '%load_ext qloop_kernel',
          '%%agent --approve auto\nSet y to 42.',
          'print(y + 1)'
        ])
      );
      await loadExtension(page, standIn);
      const ran = await runCell(page, 1);
      await expect(ran.locator('.qloop-live-status-text')).toContainText(
        /model call 2\/20/
      );
      expect(await standIn.requests()).toHaveLength(2);

      // A new kernel: only the replay can bring y back.
      await notebook7.save(file => Boolean(file.cells[1].metadata.qloop));
      await notebook7.shutDownKernel();
      await notebook7.reload();
      await runCell(page, 0);
      // The replay asks first (the cell's --approve is not the replay's):
      // the line above the card already says what runs and what it cost.
      await runCell(page, 1, { wait: false });
      const card = approvalCard(page, 1).first();
      await expect(card).toBeVisible({ timeout: 60000 });
      await expect(card).toContainText('Replay 1 saved code step');
      const outputs = cell(page, 1).locator('.jp-OutputArea');
      expect(await textOf(outputs)).toMatch(
        /replaying the saved turn: 1 code step, no model call now \(the original turn: 2 model calls · [\d,]+ tokens( \([\d,]+ cached\))? · \$[\d.]+\)/
      );
      await button(card, 'Approve').click();
      await waitForIdleKernel(page);
      await expect(outputs).toContainText('replay complete');
      const text = await textOf(outputs);
      // Nothing in the cell reads as money spent now.
      expect(text).not.toContain('→ agent completed');
      await expect(await runCell(page, 2)).toHaveText('43');
      expect(await standIn.requests()).toHaveLength(2); // no model call now
    });
  });
}
