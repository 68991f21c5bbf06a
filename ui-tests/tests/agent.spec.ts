/**
 * Real agent cells: the approval card of a `run_code` step, in a real
 * kernel, with the Messages API stand-in as the model.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell
 * "Set y to 42.", cell 2 prints `y + 1`. The reload while the card waits and
 * the reopened saved turn run in JupyterLab Light and Dark.
 */
import * as path from 'path';
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';

import {
  IStandIn,
  REPOSITORY_ROOT,
  approvalCard,
  cell,
  executionCount,
  expect,
  markerOf,
  outputText,
  runCodeScript,
  test,
  toolResults,
  waitForIdleKernel,
  waitForKernelReady
} from './fixtures';

const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];
const NOTEBOOK = 'agent_cell.ipynb';
const AGENT = 1;
const AFTER = 2;
const PROMPT = 'Set y to 42.';

const SET_Y = runCodeScript('y = 42', 'Done: `y` is **42**.');

/**
 * A button of an approval card, by its label. (Its accessible name starts
 * with the icon font's glyph, so the text content is matched instead.)
 */
function button(card: Locator, label: string): Locator {
  return card.locator('button').filter({ hasText: new RegExp(`^${label}$`) });
}

/** The stderr outputs (tracebacks) of cell `index`. */
async function errorOutput(
  page: IJupyterLabPageFixture,
  index: number
): Promise<Locator> {
  return (await cell(page, index)).locator(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
  );
}

/**
 * Run All, then wait for the agent cell's card titled `title`: the cell
 * blocks on it, so the cell after it must not have run yet.
 */
async function runAllUntilCard(
  page: IJupyterLabPageFixture,
  runAll: (options?: { wait?: boolean }) => Promise<void>,
  title: string
): Promise<Locator> {
  await runAll({ wait: false });
  const card = (await approvalCard(page, AGENT)).filter({ hasText: title });
  // Allow for the kernel start and the first model call.
  await expect(card).toBeVisible({ timeout: 60000 });
  await expect(card).toContainText(`${title} wants to run — approve?`);
  expect(await executionCount(page, AFTER)).toBeNull();
  expect(await outputText(page, AFTER)).toBe('');
  return card;
}

/** Approve the run_code card of SET_Y; returns once every cell has run. */
async function approveSetY(
  page: IJupyterLabPageFixture,
  runAll: (options?: { wait?: boolean }) => Promise<void>
): Promise<void> {
  const card = await runAllUntilCard(page, runAll, 'run_code');
  await button(card, 'Approve').click();
  await waitForIdleKernel(page);
  await expect.poll(() => outputText(page, AFTER)).toBe('43\n');
}

/** The request log holds one model call per script reply, the result of the code in the second. */
async function expectApprovedRun(standIn: IStandIn): Promise<void> {
  const requests = await standIn.requests();
  expect(requests.map(r => r.status)).toEqual([200, 200]);
  expect(requests[0].body.messages![0].content[0].text).toBe(PROMPT);
  const [result] = toolResults(requests[1]);
  expect(result.is_error ?? false).toBe(false);
}

test.describe('agent cell approval', () => {
  // Wide enough for the card's buttons and reason box to show in full in the
  // screenshot for the docs.
  test.use({ viewport: { width: 1280, height: 900 } });

  test('Run All waits at the card; Approve runs the code, then the next cell', async ({
    page,
    openNotebook,
    runAll,
    standIn
  }) => {
    await standIn.reset(SET_Y);
    await openNotebook(NOTEBOOK);

    const card = await runAllUntilCard(page, runAll, 'run_code');
    await expect(card.locator('.qloop-code')).toHaveText('y = 42');
    for (const name of ['Approve', 'Deny', 'Always allow', 'Edit']) {
      await expect(button(card, name)).toBeEnabled();
    }
    await card.screenshot({
      path: path.join(REPOSITORY_ROOT, 'docs', 'approval-card.png')
    });

    await button(card, 'Approve').click();
    await waitForIdleKernel(page);
    await expect.poll(() => outputText(page, AFTER)).toBe('43\n');
    expect(await executionCount(page, AFTER)).not.toBeNull();
    await expect(card.locator('.qloop-card-decision')).toHaveText('✔ approved');
    await expect(button(card, 'Approve')).toBeDisabled();
    await expectApprovedRun(standIn);
    // The streamed answer is the answer renderer's untrusted Markdown.
    const answer = (await cell(page, AGENT)).locator(
      '.qloop-answer-output .qloop-answer-body'
    );
    await expect(answer.locator('strong')).toHaveText('42');
    await expect(answer.locator('code')).toHaveText('y');
    // Next to the live output the saved transcript is folded, not repeated.
    const live = (await cell(page, AGENT)).locator('.qloop-transcript');
    await expect(live).toHaveClass(/qloop-transcript-live/);
    await expect(live.locator('details.qloop-live-details')).toHaveCount(1);
    await expect(live.locator('.qloop-answer-body')).toBeHidden();
  });

  test('Deny with a reason runs nothing and sends the reason to the model', async ({
    page,
    openNotebook,
    runAll,
    standIn
  }) => {
    const reason = 'not in this notebook';
    await standIn.reset(runCodeScript('y = 42', 'Understood, y is unchanged.'));
    await openNotebook(NOTEBOOK);

    const card = await runAllUntilCard(page, runAll, 'run_code');
    await card
      .getByPlaceholder('reason (optional, sent to the model)')
      .fill(reason);
    await button(card, 'Deny').click();
    await waitForIdleKernel(page);

    await expect(card.locator('.qloop-card-decision')).toHaveText(
      `✘ denied: ${reason}`
    );
    await expect(await errorOutput(page, AFTER)).toContainText(
      "NameError: name 'y' is not defined"
    );
    const requests = await standIn.requests();
    expect(requests).toHaveLength(2);
    const [result] = toolResults(requests[1]);
    expect(result.is_error).toBe(true);
    expect(JSON.stringify(result.content)).toContain(reason);
    const view = (await cell(page, AGENT)).locator('.qloop-transcript');
    await expect(view.locator('.qloop-decision')).toHaveText(
      `denied: ${reason}`
    );
    // The person reads their own words; the model's instructions stay in the result.
    const agent = await cell(page, AGENT);
    await expect(agent).toContainText(
      `✘ run_code: not run, denied by you: ${reason}`
    );
    await expect(agent).not.toContainText('The user denied');
    await expect(agent).not.toContainText('Take the reason into account');
  });

  test.describe('with real kernel messages', () => {
    // Galata's kernel mock breaks on an interrupt or a restart.
    test.use({ kernels: null });

    test('an interrupt while the card waits ends the cell and leaves the kernel usable', async ({
      page,
      openNotebook,
      runAll,
      standIn
    }) => {
      await standIn.reset(runCodeScript('y = 42', 'never sent'));
      await openNotebook(NOTEBOOK);

      const card = await runAllUntilCard(page, runAll, 'run_code');
      await page.menu.clickMenuItem('Kernel>Interrupt Kernel');
      await waitForIdleKernel(page);

      await expect(await errorOutput(page, AGENT)).toContainText(
        'KeyboardInterrupt'
      );
      await expect(card.locator('.qloop-card-decision')).toHaveText(
        'interrupted — not run'
      );
      // The card folds to its decision: no button is left to click.
      await expect(card.locator('.qloop-card-buttons')).toBeHidden();
      await expect(card.locator('.qloop-card-folded > summary')).toBeVisible();
      // Run All stops: the queued cell was aborted, not run.
      expect(await executionCount(page, AFTER)).toBeNull();
      expect(await outputText(page, AFTER)).toBe('');
      await expect
        .poll(() => markerOf(page, AGENT))
        .toMatchObject({ status: 'interrupted' });
      expect(await standIn.requests()).toHaveLength(1);

      await page.notebook.setCell(AFTER, 'code', "print('y' in dir(), 6 * 7)");
      await page.notebook.runCell(AFTER, { inplace: true });
      await expect.poll(() => outputText(page, AFTER)).toBe('False 42\n');
    });

    for (const theme of THEMES) {
      test(`a page reloaded while the card waits shows it again; its Approve runs the step (${theme})`, async ({
        page,
        openNotebook,
        reloadPage,
        runAll,
        standIn
      }) => {
        await page.theme.setTheme(theme);
        await standIn.reset(SET_Y);
        const serverPath = await openNotebook(NOTEBOOK);
        await runAllUntilCard(page, runAll, 'run_code');

        // Unsaved: the reloaded page gets nothing of the card from the file.
        await reloadPage(serverPath);
        const card = (await approvalCard(page, AGENT)).filter({
          hasText: 'run_code wants to run — approve?'
        });
        await expect(card).toBeVisible({ timeout: 30000 });
        await expect(card.locator('.qloop-code')).toHaveText('y = 42');
        const area = (await cell(page, AGENT)).locator('.jp-OutputArea');
        await expect(area).not.toContainText('Error displaying widget');
        await button(card, 'Approve').click();
        await expect(card.locator('.qloop-card-decision')).toHaveText(
          /approved/
        );
        // The record reaches this page's cell metadata through the kernel's comm.
        await expect
          .poll(() => markerOf(page, AGENT), { timeout: 30000 })
          .toMatchObject({ status: 'completed' });
        // ...and the finished turn shows from it at once, without reopening.
        const view = (await cell(page, AGENT)).locator('.qloop-transcript');
        await expect(view).toHaveCount(1);
        await expect(view).toHaveAttribute('data-qloop-status', 'completed');
        await expect(view.locator('.qloop-decision')).toHaveText('approved');
        await expect(view.locator('.qloop-answer-body strong')).toHaveText(
          '42'
        );
        await waitForIdleKernel(page);
        await page.notebook.setCell(AFTER, 'code', 'print(y + 1)');
        await page.notebook.runCell(AFTER, { inplace: true });
        await expect.poll(() => outputText(page, AFTER)).toBe('43\n');
        await expectApprovedRun(standIn);
      });
    }

    for (const theme of THEMES) {
      test(`a saved turn shows after a reload and replays after a restart without the model (${theme})`, async ({
        page,
        openNotebook,
        reloadPage,
        runAll,
        saveAndRead,
        standIn
      }) => {
        await page.theme.setTheme(theme);
        await standIn.reset(SET_Y);
        const serverPath = await openNotebook(NOTEBOOK);
        await approveSetY(page, runAll);
        await expectApprovedRun(standIn);

        const saved = (await saveAndRead(serverPath)).cells[AGENT];
        expect(saved.metadata.qloop).toMatchObject({
          schema_version: 2,
          cell_id: saved.id,
          prompt: PROMPT,
          status: 'completed',
          answer: 'Done: `y` is **42**.'
        });
        expect(saved.metadata.qloop.tool_calls[0].input).toEqual({
          code: 'y = 42'
        });

        await reloadPage(serverPath);
        const view = (await cell(page, AGENT)).locator('.qloop-transcript');
        await expect(view).toHaveAttribute('data-qloop-status', 'completed');
        await expect(view).not.toHaveClass(/qloop-transcript-live/); // in full after a reload
        await expect(view.locator('pre.qloop-tool-input')).toHaveText('y = 42');
        await expect(view.locator('.qloop-decision')).toHaveText('approved');
        await expect(view.locator('.qloop-answer-body strong')).toHaveText(
          '42'
        );
        // One rendering of the turn: the view hides the saved live output it repeats.
        const area = (await cell(page, AGENT)).locator('.jp-OutputArea');
        const children = area.locator(':scope > .jp-OutputArea-child');
        const superseded = area.locator(':scope > .qloop-superseded');
        expect(await children.count()).toBeGreaterThan(2);
        await expect(superseded).toHaveCount((await children.count()) - 1);
        await expect(
          area.locator(':scope > .jp-OutputArea-child:visible')
        ).toHaveCount(1);
        await expect(area).not.toContainText('Error displaying widget');
        await expect(
          area.locator('.qloop-answer-body strong:visible')
        ).toHaveCount(1);
        const toggle = view.locator('.qloop-live-toggle');
        await expect(toggle).toHaveText('show the live output of this turn');
        await toggle.click();
        await expect(toggle).toHaveAttribute('aria-pressed', 'true');
        await expect(superseded.first()).toBeVisible();
        await toggle.click();
        await expect(superseded.first()).toBeHidden();

        // Reopened with a new kernel, which knows none of the saved widgets:
        // the live output shown again has no card that fails to show.
        await page.menu.clickMenuItem('Kernel>Shut Down Kernel');
        await expect(
          page.locator('.jp-NotebookPanel-toolbar .jp-KernelName')
        ).toHaveText('No Kernel');
        await reloadPage(serverPath);
        const reopened = (await cell(page, AGENT)).locator('.jp-OutputArea');
        const again = reopened.locator('.qloop-transcript');
        await expect(again).toHaveAttribute('data-qloop-status', 'completed');
        await again.locator('.qloop-live-toggle').click();
        await expect(
          reopened
            .locator(':scope > .qloop-superseded:not(.qloop-widget-view)')
            .first()
        ).toBeVisible();
        await expect(
          reopened.locator('.qloop-answer-body strong:visible')
        ).toHaveCount(2);
        // No card that fails to show, or waits for a widget that never comes.
        expect(await page.locator('.jp-Notebook').innerText()).not.toMatch(
          /Error displaying widget|Loading widget/
        );
        await again.locator('.qloop-live-toggle').click();

        // A fresh namespace: only the replay can bring y back. (The kernel the
        // reopened page started answers first: a restart while it still
        // starts can leave the page without one.)
        await waitForKernelReady(page);
        await page.menu.clickMenuItem('Kernel>Restart Kernel…');
        await page.locator('.jp-Dialog .jp-mod-accept').click();
        await waitForIdleKernel(page);

        const card = await runAllUntilCard(
          page,
          runAll,
          'Replay 1 saved code step'
        );
        await expect(card.locator('.qloop-code')).toHaveText('y = 42');
        await expect(button(card, 'Always allow')).toHaveCount(0);
        // The line above the card: no model is called now, and what the
        // original turn cost.
        expect((await reopened.innerText()).replace(/\s+/g, ' ')).toMatch(
          /replaying the saved turn: 1 code step, no model call now \(the original turn: 2 model calls · [\d,]+ tokens( \([\d,]+ cached\))? · \$[\d.]+\)/
        );
        await button(card, 'Approve').click();
        await waitForIdleKernel(page);

        await expect.poll(() => outputText(page, AFTER)).toBe('43\n');
        await expect(await cell(page, AGENT)).toContainText('replay complete');
        await expect(reopened).not.toHaveAttribute(
          'data-qloop-superseded',
          /.*/
        ); // live again
        expect(await standIn.requests()).toHaveLength(2);
        const replayed = (await saveAndRead(serverPath)).cells[AGENT];
        expect(replayed.metadata.qloop).toEqual(saved.metadata.qloop);
      });
    }
  });
});
