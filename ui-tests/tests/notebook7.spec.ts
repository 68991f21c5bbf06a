/**
 * The agent cell in Notebook 7, in the Light and the Dark theme: the same
 * test server serves Notebook 7 at `/notebooks/<path>`, with this extension
 * loaded; the page is driven through its own menu bar and cells (nb7.ts).
 *
 * - the approval card of a `run_code` step holds the cell (the next cell
 *   waits); Approve runs the code, then the next cell; the decided card folds
 *   to one line;
 * - Deny with a reason runs nothing;
 * - Edit swaps the code for an editor; the edited code runs, and the folded
 *   card shows the change;
 * - a page reloaded while the card waits shows the card again, and its
 *   Approve ends the wait;
 * - a saved turn reopened shows one rendering of the turn, the transcript
 *   view, with no broken widget on screen;
 * - at 360 px the card's controls show whole and the decided card is one line;
 * - the card's code tokens, the status lines and the badges read well
 *   (contrast.ts), and so do the real card, status line and marker of the page.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell
 * "Set y to 42.", cell 2 prints `y + 1`.
 */
import { Locator, Page } from '@playwright/test';

import {
  CELL_FLOOR,
  SAMPLE,
  cellCodeContrast,
  describeContrast,
  expectReadable,
  minContrast,
  probeContrast
} from './contrast';
import { IStandIn, runCodeScript, toolResults } from './fixtures';
import {
  approvalCard,
  button,
  cell,
  expect,
  markerContrast,
  markerOf,
  notebookOf,
  promptOf,
  runAll,
  stderrOf,
  stdoutOf,
  test,
  waitForIdleKernel
} from './nb7';

const NOTEBOOK = 'agent_cell.ipynb';
const AGENT = 1;
const AFTER = 2;
const PROMPT = 'Set y to 42.';
const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];

const SET_Y = runCodeScript('y = 42', 'Done: `y` is **42**.');

/**
 * Run All, then wait for the agent cell's run_code card: the cell holds, so
 * the cell after it is queued and has not run.
 */
async function runAllUntilCard(page: Page): Promise<Locator> {
  await runAll(page, { wait: false });
  const card = approvalCard(page, AGENT).first();
  // Allow for the kernel start and the first model call.
  await expect(card).toBeVisible({ timeout: 60000 });
  await expect(card).toContainText('run_code wants to run — approve?');
  await expect(card.locator('.qloop-code')).toHaveText('y = 42');
  expect(await promptOf(page, AFTER)).toBe('*');
  expect(await stdoutOf(page, AFTER)).toBe('');
  return card;
}

/** The request log holds the two model calls of SET_Y, the code's result in the second. */
async function expectApprovedRun(standIn: IStandIn): Promise<void> {
  const requests = await standIn.requests();
  expect(requests.map(r => r.status)).toEqual([200, 200]);
  expect(requests[0].body.messages![0].content[0].text).toBe(PROMPT);
  const [result] = toolResults(requests[1]);
  expect(result.is_error ?? false).toBe(false);
}

/** Approve the card of SET_Y; returns once every cell has run. */
async function approveSetY(page: Page): Promise<Locator> {
  const card = await runAllUntilCard(page);
  await button(card, 'Approve').click();
  await waitForIdleKernel(page);
  await expect.poll(() => stdoutOf(page, AFTER)).toBe('43\n');
  return card;
}

/** The card is folded to its one-line summary `summary`; the whole card opens under it. */
async function expectFolded(card: Locator, summary: RegExp): Promise<void> {
  const folded = card.locator('.qloop-card-folded');
  await expect(folded.locator('summary')).toHaveText(summary);
  expect((await folded.locator('summary').boundingBox())!.height).toBeLessThan(
    30
  );
  await expect(card.locator('.qloop-card-buttons')).toBeHidden();
  await expect(card.locator('textarea')).toBeHidden();
  const details = folded.locator('.qloop-card-details');
  await expect(details).toBeHidden();
  await folded.locator('summary').click();
  await expect(details).toBeVisible();
  await expect(details).toContainText('y = 42');
  await folded.locator('summary').click();
  await expect(details).toBeHidden();
}

for (const theme of THEMES) {
  test.describe(`Notebook 7 (${theme})`, () => {
    test.use({ notebook7Theme: theme, viewport: { width: 1280, height: 900 } });

    test('Run All waits at the card; Approve runs the code, then the next cell; the card folds', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset(SET_Y);
      await notebook7.open(NOTEBOOK);

      const card = await runAllUntilCard(page);
      for (const name of ['Approve', 'Deny', 'Always allow', 'Edit']) {
        await expect(button(card, name)).toBeEnabled();
      }
      await expect
        .poll(() => markerOf(page, AGENT))
        .toEqual({ marked: true, status: 'running', badge: 'agent · running' });
      // What this page really shows reads well too: the card's code, the
      // status line and the marker badge.
      const code = await minContrast(
        page,
        '.qloop-approval-card .qloop-code',
        'span'
      );
      const status = await minContrast(
        page,
        '.qloop-live-status',
        '.qloop-live-status-text'
      );
      const marker = await markerContrast(page, AGENT);
      console.log(
        `Notebook 7, ${theme}, the page: card code ${code.min.toFixed(2)} ` +
          `(${code.worst}), status line ${status.min.toFixed(2)}, ` +
          `running marker ${marker.toFixed(2)}`
      );
      expect(code.min, code.worst).toBeGreaterThanOrEqual(CELL_FLOOR[theme]);
      expect(status.min, status.worst).toBeGreaterThanOrEqual(4.5);
      expect(marker).toBeGreaterThanOrEqual(4.5);
      // One model call so far: the turn waits for the click.
      expect(await standIn.requests()).toHaveLength(1);
      expect(await promptOf(page, AFTER)).toBe('*');

      await button(card, 'Approve').click();
      await waitForIdleKernel(page);
      await expect.poll(() => stdoutOf(page, AFTER)).toBe('43\n');
      expect(await promptOf(page, AFTER)).toMatch(/^\d+$/);
      await expect(card.locator('.qloop-card-decision')).toHaveText(
        '✔ approved'
      );
      await expectFolded(card, /^✔ approved · run_code · y = 42 · \d+\.\d s$/);
      await expectApprovedRun(standIn);
      // The streamed answer once; the saved transcript beside it is folded.
      const agent = cell(page, AGENT);
      const answer = agent
        .locator('.qloop-answer-body:visible')
        .filter({ hasText: 'is 42' });
      await expect(answer).toHaveCount(1);
      await expect(answer.locator('strong')).toHaveText('42');
      const live = agent.locator('.qloop-transcript');
      await expect(live).toHaveClass(/qloop-transcript-live/);
      await expect(live.locator('details.qloop-live-details')).toHaveCount(1);
      await expect(live.locator('.qloop-answer-body')).toBeHidden();
      // Stop goes away when the turn ends.
      await expect(agent.locator('button', { hasText: 'Stop' })).toBeHidden();
      await expect
        .poll(() => markerOf(page, AGENT))
        .toEqual({
          marked: true,
          status: 'completed',
          badge: 'agent · replayable'
        });
      expect(await markerContrast(page, AGENT)).toBeGreaterThanOrEqual(4.5);
    });

    test('Deny with a reason runs nothing and sends the reason to the model', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      const reason = 'not in this notebook';
      await standIn.reset(
        runCodeScript('y = 42', 'Understood, y is unchanged.')
      );
      await notebook7.open(NOTEBOOK);

      const card = await runAllUntilCard(page);
      // Typed key by key: Notebook 7's command-mode shortcuts leave the box alone.
      await card
        .getByPlaceholder('reason (optional, sent to the model)')
        .click();
      await page.keyboard.type(reason);
      await button(card, 'Deny').click();
      await waitForIdleKernel(page);

      await expect(card.locator('.qloop-card-decision')).toHaveText(
        `✘ denied: ${reason}`
      );
      await expectFolded(
        card,
        new RegExp(`^✘ denied: ${reason} · run_code · y = 42`)
      );
      // Nothing ran: the next cell finds no y.
      await expect(stderrOf(page, AFTER)).toContainText(
        "NameError: name 'y' is not defined"
      );
      expect(await stdoutOf(page, AFTER)).toBe('');
      await expect(page.locator('.jp-Notebook .jp-Cell')).toHaveCount(3);
      const requests = await standIn.requests();
      expect(requests).toHaveLength(2);
      const [result] = toolResults(requests[1]);
      expect(result.is_error).toBe(true);
      expect(JSON.stringify(result.content)).toContain(reason);
      const agent = cell(page, AGENT);
      await expect(
        agent.locator('.qloop-transcript .qloop-decision')
      ).toHaveText(`denied: ${reason}`);
      await expect(
        agent
          .locator('.qloop-answer-body:visible')
          .filter({ hasText: 'Understood' })
      ).toHaveText('Understood, y is unchanged.');
    });

    test('Edit swaps the code for an editor; the edit runs, and the folded card shows what changed', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset(SET_Y);
      await notebook7.open(NOTEBOOK);

      const card = await runAllUntilCard(page);
      await button(card, 'Edit').click();
      const editor = card.locator('textarea');
      await expect(editor).toBeVisible();
      // One version of the code on screen: the editor replaces the model's.
      await expect(card).toContainText('editing: the text below is what runs');
      await expect(card.locator('.qloop-code')).toBeHidden();
      await editor.click();
      await page.keyboard.press('Control+A');
      // Typed key by key: Notebook 7's command-mode shortcuts leave the box alone.
      await page.keyboard.type('y = 7');
      await button(card, 'Approve').click();
      await waitForIdleKernel(page);

      await expect.poll(() => stdoutOf(page, AFTER)).toBe('8\n');
      const folded = card.locator('.qloop-card-folded');
      await expect(folded.locator('summary')).toHaveText(
        /^✔ approved with your edits · run_code · y = 7 · \d+\.\d s$/
      );
      await expect(card.locator('textarea')).toBeHidden();
      await folded.locator('summary').click();
      const details = folded.locator('.qloop-card-details');
      await expect(details).toContainText(
        /your edit, which is what runs:\s*y = 7/
      );
      await expect(details.locator('.qloop-diff-del')).toHaveText('-y = 42');
      await expect(details.locator('.qloop-diff-add')).toHaveText('+y = 7');
      const requests = await standIn.requests();
      expect(requests).toHaveLength(2);
      const told = JSON.stringify(toolResults(requests[1])[0].content);
      expect(told).toContain('the user edited the input before approving');
    });

    test('a page reloaded while the card waits shows it again; its Approve runs the step', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset(SET_Y);
      await notebook7.open(NOTEBOOK);
      await runAllUntilCard(page);

      // Unsaved: the reloaded page gets nothing of the card from the file.
      await notebook7.reload({ idle: false });
      const card = approvalCard(page, AGENT).filter({
        hasText: 'run_code wants to run — approve?'
      });
      await expect(card).toBeVisible({ timeout: 30000 });
      await expect(card.locator('.qloop-code')).toHaveText('y = 42');
      await expect(cell(page, AGENT)).not.toContainText(
        'Error displaying widget'
      );
      await button(card, 'Approve').click();
      await expect(card.locator('.qloop-card-decision')).toHaveText(
        '✔ approved'
      );
      // The record reaches this page's cell metadata through the kernel's comm.
      await expect
        .poll(() => markerOf(page, AGENT), { timeout: 30000 })
        .toMatchObject({ status: 'completed' });
      await waitForIdleKernel(page);
      await expectApprovedRun(standIn);
      const saved = await notebook7.save(
        file => file.cells[AGENT].metadata.qloop?.status === 'completed'
      );
      expect(saved.cells[AGENT].metadata.qloop.tool_calls[0].input).toEqual({
        code: 'y = 42'
      });
    });

    test('a saved turn reopened shows the transcript view once, with no broken widget', async ({
      notebook7,
      standIn
    }) => {
      const page = notebook7.page;
      await standIn.reset(SET_Y);
      await notebook7.open(NOTEBOOK);
      await approveSetY(page);
      await expectApprovedRun(standIn);
      const saved = await notebook7.save(
        file => file.cells[AGENT].metadata.qloop?.status === 'completed'
      );
      expect(saved.cells[AGENT].metadata.qloop).toMatchObject({
        prompt: PROMPT,
        status: 'completed',
        answer: 'Done: `y` is **42**.'
      });

      // Reopened with the kernel still running, then with a new kernel,
      // which knows none of the saved widgets.
      for (const reopen of ['reload', 'new kernel']) {
        if (reopen === 'new kernel') {
          await notebook7.shutDownKernel();
        }
        await notebook7.reload();
        const agent = cell(page, AGENT);
        const area = agent.locator('.jp-OutputArea');
        const view = area.locator('.qloop-transcript');
        await expect(view).toHaveCount(1);
        await expect(view).toHaveAttribute('data-qloop-status', 'completed');
        await expect(view).not.toHaveClass(/qloop-transcript-live/);
        await expect(view.locator('pre.qloop-tool-input')).toHaveText('y = 42');
        await expect(view.locator('.qloop-decision')).toHaveText('approved');
        // One rendering: the view hides the saved live output it repeats.
        const children = area.locator(':scope > .jp-OutputArea-child');
        const superseded = area.locator(':scope > .qloop-superseded');
        const count = await children.count();
        expect(count, reopen).toBeGreaterThan(2);
        await expect(superseded).toHaveCount(count - 1);
        await expect(
          area.locator(':scope > .jp-OutputArea-child:visible')
        ).toHaveCount(1);
        await expect(
          area.locator('.qloop-answer-body strong:visible')
        ).toHaveCount(1);
        await expect(area.locator('.qloop-code:visible')).toHaveCount(0);
        // What is on screen: no widget that failed to show.
        expect(await page.locator('.jp-Notebook').innerText()).not.toContain(
          'Error displaying widget'
        );
        if (reopen === 'reload') {
          // The kernel still has the widgets: none failed at all.
          await expect(area).not.toContainText('Error displaying widget');
        }
        await expect
          .poll(() => markerOf(page, AGENT))
          .toEqual({
            marked: true,
            status: 'completed',
            badge: 'agent · replayable'
          });
        const badges = await minContrast(
          page,
          '.qloop-transcript',
          '.qloop-status, .qloop-decision'
        );
        expect(badges.min, badges.worst).toBeGreaterThanOrEqual(4.5);

        const toggle = view.locator('.qloop-live-toggle');
        await expect(toggle).toHaveText('show the live output of this turn');
        await toggle.click();
        await expect(toggle).toHaveAttribute('aria-pressed', 'true');
        const notCards = area.locator(
          ':scope > .qloop-superseded:not(.qloop-widget-view)'
        );
        await expect(notCards.first()).toBeVisible();
        if (reopen === 'reload') {
          // The kernel still has the card's widget: it shows again too.
          await expect(
            area.locator(':scope > .qloop-widget-view .qloop-approval-card')
          ).toBeVisible();
        }
        // Shown again, the live output has no card the kernel lost either.
        await expect(
          area.locator('.qloop-answer-body strong:visible')
        ).toHaveCount(2);
        expect(await page.locator('.jp-Notebook').innerText()).not.toMatch(
          /Error displaying widget|Loading widget/
        );
        await toggle.click();
        await expect(notCards.first()).toBeHidden();
      }

      // Copy to cell: the step becomes an ordinary cell below the agent cell.
      await cell(page, AGENT).locator('.qloop-copy-to-cell').click();
      await expect(page.locator('.jp-Notebook .jp-Cell')).toHaveCount(4);
      await expect(cell(page, AGENT + 1).locator('.cm-content')).toHaveText(
        'y = 42'
      );
    });

    test.describe('on a phone-sized page', () => {
      test.use({ viewport: { width: 360, height: 800 } });

      test('at 360 px every control of the card shows whole, and the decided card is one line', async ({
        notebook7,
        standIn
      }) => {
        const page = notebook7.page;
        const long =
          'revenue_by_region = df.groupby("region")["revenue"].sum().sort_values()';
        await standIn.reset(runCodeScript(long, 'Done.'));
        await notebook7.open(NOTEBOOK);

        await runAll(page, { wait: false });
        const card = approvalCard(page, AGENT).first();
        await expect(card).toBeVisible({ timeout: 60000 });
        const box = (await card.boundingBox())!;
        expect(box.x + box.width).toBeLessThanOrEqual(361);
        const controls = card.locator('.qloop-card-buttons > *');
        const count = await controls.count();
        expect(count).toBeGreaterThanOrEqual(5);
        for (let i = 0; i < count; i++) {
          const own = (await controls.nth(i).boundingBox())!;
          // Inside the card (the row wraps instead of cutting)...
          expect(own.x).toBeGreaterThanOrEqual(box.x - 1);
          expect(own.x + own.width).toBeLessThanOrEqual(box.x + box.width + 1);
          // ...and no label cut off.
          const cut = await controls
            .nth(i)
            .evaluate(node =>
              Array.from(node.querySelectorAll('button, select')).some(
                el => el.scrollWidth > el.clientWidth + 1
              )
            );
          expect(cut).toBe(false);
        }
        // A long line wraps inside the box: every character is on screen.
        const pre = card.locator('.qloop-code pre');
        expect(
          await pre.evaluate(node => getComputedStyle(node).whiteSpace)
        ).toBe('pre-wrap');
        expect(
          await pre.evaluate(node => (node as HTMLElement).innerText)
        ).toBe(long);
        expect(
          await pre.evaluate(node => node.scrollWidth <= node.clientWidth + 1)
        ).toBe(true);

        await button(card, 'Approve').click();
        await waitForIdleKernel(page);
        const summary = card.locator('.qloop-card-folded > summary');
        await expect(summary).toContainText(
          '✔ approved · run_code · revenue_by'
        );
        expect((await summary.boundingBox())!.height).toBeLessThan(30);
        expect((await card.boundingBox())!.width).toBeLessThanOrEqual(
          box.width + 1
        );
      });
    });

    test('card code, status lines and badges read well', async ({
      notebook7
    }) => {
      const page = notebook7.page;
      await notebook7.open('contrast.ipynb', notebookOf([SAMPLE]));
      // Wait for the editor's highlighter to mark every line.
      const content = cell(page, 0).locator('.cm-content');
      await expect(content.locator('.cm-line')).toHaveCount(6);
      await expect
        .poll(() => content.locator('.cm-line span').count())
        .toBeGreaterThan(20);
      const cellCode = await cellCodeContrast(page);
      const probe = await probeContrast(page);
      console.log(describeContrast(`Notebook 7, ${theme}`, cellCode, probe));
      expectReadable(theme, cellCode, probe);
    });
  });
}
