/**
 * Outside agents behind qloop's card, in JupyterLab (Light and Dark): the
 * official MCP SDK's client (outside_client.py) calls run_code on the test
 * server's qloop/mcp for the open notebook; the call waits until the card in
 * the page is clicked, gets the user's decision and reason, and the call is
 * saved in the notebook's metadata.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is an agent cell,
 * cell 2 prints `y + 1` (none is run here).
 */
import { Page } from '@playwright/test';
import { ChildProcess, spawn } from 'child_process';
import * as path from 'path';

import {
  REPOSITORY_ROOT,
  approvalCard,
  cell,
  expect,
  test,
  waitForIdleKernel,
  waitForKernelReady
} from './fixtures';
import { test as test7 } from './nb7';

const NOTEBOOK = 'agent_cell.ipynb';
const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];
const SERVER = `http://127.0.0.1:${process.env.QLOOP_UI_PORT || '8888'}/`;
const CLIENT = path.resolve(__dirname, '..', 'outside_client.py');

interface IOutcome {
  is_error: boolean;
  text: string;
}

/** Start an outside agent's call; its printed result once it ends. */
function outsideCall(
  tool: string,
  args: Record<string, unknown>
): { process: ChildProcess; done: Promise<IOutcome> } {
  const child = spawn(
    process.env.PYTHON || 'python',
    [CLIENT, SERVER, 'claude-code', tool, JSON.stringify(args)],
    { env: { ...process.env, NO_PROXY: '127.0.0.1,localhost' } }
  );
  let out = '';
  let err = '';
  child.stdout.on('data', chunk => (out += chunk));
  child.stderr.on('data', chunk => (err += chunk));
  const done = new Promise<IOutcome>((resolve, reject) => {
    child.on('exit', code =>
      code === 0
        ? resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}'))
        : reject(new Error(`the outside client failed (${code}): ${err}`))
    );
  });
  return { process: child, done };
}

for (const theme of THEMES) {
  test.describe(`outside agents (${theme})`, () => {
    test('run_code waits for the card, runs what was approved and is saved in the notebook', async ({
      page,
      openNotebook,
      saveAndRead
    }) => {
      await page.theme.setTheme(theme);
      const serverPath = await openNotebook(NOTEBOOK);
      await waitForKernelReady(page);
      const code = 'outside_total = 6 * 7\nprint("total", outside_total)';
      const call = outsideCall('run_code', { path: serverPath, code });
      try {
        const card = page.locator('.qloop-outside');
        await expect(card).toBeVisible({ timeout: 60000 });
        await expect(card.locator('.qloop-outside-title')).toHaveText(
          'claude-code wants to run code in this notebook — approve?'
        );
        await expect(card).toHaveAttribute('data-qloop-risk', 'write');
        await expect(card.locator('pre.qloop-outside-code')).toContainText(
          'outside_total = 6 * 7'
        );
        await expect(card.locator('.qloop-outside-reasons')).toContainText(
          'line 1: creates outside_total'
        );
        // The call waits for the click.
        await page.waitForTimeout(1500);
        const shot = theme.endsWith('Dark')
          ? 'outside-card-dark.png'
          : 'outside-card.png';
        await card.screenshot({
          path: path.join(REPOSITORY_ROOT, 'docs', shot)
        });
        expect(call.process.exitCode).toBeNull();
        await card.locator('input.qloop-outside-reason').fill('go ahead');
        await card.locator('.qloop-outside-approve').click();
        const outcome = await call.done;
        expect(outcome.is_error).toBe(false);
        expect(outcome.text).toContain('approved by the user');
        expect(outcome.text).toContain('go ahead');
        expect(outcome.text).toContain('total 42');
        await expect(card).toHaveCount(0);
      } finally {
        call.process.kill();
      }
      // Denied: nothing runs, and the agent is told why.
      const denied = outsideCall('run_code', {
        path: serverPath,
        code: 'del outside_total'
      });
      try {
        const card = page.locator('.qloop-outside');
        await expect(card).toBeVisible({ timeout: 60000 });
        await card.locator('input.qloop-outside-reason').fill('keep it');
        await card.locator('.qloop-outside-deny').click();
        const outcome = await denied.done;
        expect(outcome.is_error).toBe(true);
        expect(outcome.text).toBe('denied by the user: keep it');
      } finally {
        denied.process.kill();
      }
      // Both calls are saved in the notebook.
      await expect
        .poll(
          () =>
            page.evaluate(() => {
              const panel = (window as any).jupyterapp.shell.currentWidget;
              const saved = panel.context.model.getMetadata('qloop_outside');
              return (saved?.entries ?? []).length;
            }),
          { timeout: 30000 }
        )
        .toBe(2);
      const file = await saveAndRead(serverPath);
      const entries = (file.metadata as any).qloop_outside.entries;
      expect(entries.map((e: any) => [e.client, e.tool, e.decision])).toEqual([
        ['claude-code', 'run_code', 'approved by the user'],
        ['claude-code', 'run_code', 'denied by the user']
      ]);
      expect(entries[0].ran).toBe(code);
      expect(entries[0].signature).toMatch(/^hmac-sha256:/);
      expect(entries[1].ran).toBeNull();
    });
  });
}

test.describe('outside calls replayed', () => {
  // Galata's kernel mock breaks on a kernel restart.
  test.use({ kernels: null });
  test('the saved calls become an agent cell whose run replays them after its card', async ({
    page,
    openNotebook
  }) => {
    const serverPath = await openNotebook(NOTEBOOK);
    await waitForKernelReady(page);
    const code = 'outside_total = 6 * 7\nprint("total", outside_total)';
    const call = outsideCall('run_code', { path: serverPath, code });
    try {
      const card = page.locator('.qloop-outside');
      await expect(card).toBeVisible({ timeout: 60000 });
      await card.locator('.qloop-outside-approve').click();
      expect((await call.done).is_error).toBe(false);
    } finally {
      call.process.kill();
    }
    await page.evaluate(() =>
      (window as any).jupyterapp.commands.execute(
        'qloop-kernel:show-outside-calls'
      )
    );
    const view = page.locator('.qloop-outside-view');
    await expect(view.locator('.qloop-outside-entry')).toHaveCount(1, {
      timeout: 30000
    });
    await view.locator('.qloop-outside-view-replay').click();
    await expect(view.locator('.qloop-outside-view-replay-status')).toHaveText(
      'Added agent cell 4: running it replays 1 code step without the outside agent, after your approval (the kernel needs qloop loaded: %load_ext qloop_kernel).'
    );
    // Close the view: the notebook is the main area's again.
    await page.evaluate(() => {
      const shell = (window as any).jupyterapp.shell;
      const widgets = Array.from(shell.widgets('main') as Iterable<any>);
      widgets
        .find(widget => widget.node.querySelector('.qloop-outside-view'))
        .close();
      shell.activateById(
        widgets.find(widget => widget.context?.model?.sharedModel).id
      );
    });
    await expect
      .poll(() => sourcesOf(page).then(found => found.length))
      .toBe(4);
    const sources = await sourcesOf(page);
    expect(sources[3]).toBe(
      "%%agent\nReplay the calls claude-code made to this notebook's kernel over MCP."
    );
    // A fresh namespace: only the replay can bring outside_total back.
    await page.menu.clickMenuItem('Kernel>Restart Kernel…');
    await page.locator('.jp-Dialog .jp-mod-accept').click();
    await waitForIdleKernel(page);
    await page.notebook.runCell(0, { inplace: true });
    await page.evaluate(() => {
      const app = (window as any).jupyterapp;
      const panel = app.shell.currentWidget;
      panel.content.activeCellIndex = 3;
      void app.commands.execute('notebook:run-cell');
    });
    const replayCard = (await approvalCard(page, 3)).filter({
      hasText: 'Replay 1 saved code step'
    });
    await expect(replayCard).toBeVisible({ timeout: 60000 });
    await expect(replayCard.locator('.qloop-code')).toHaveText(code);
    await replayCard
      .locator('button')
      .filter({ hasText: /^Approve$/ })
      .click();
    await waitForIdleKernel(page);
    const agent = await cell(page, 3);
    await expect(agent).toContainText('replay complete');
    await expect(agent).toContainText('total 42');
  });
});

/** The active JupyterLab notebook's cell sources, from its model. */
async function sourcesOf(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const panel = (window as any).jupyterapp.shell.currentWidget;
    return panel.context.model.sharedModel.cells.map((c: any) => c.getSource());
  });
}

test('add_cell, edit_cell and run_cell are decided on cards and carried out by the page', async ({
  page,
  openNotebook
}) => {
  const serverPath = await openNotebook(NOTEBOOK);
  await waitForKernelReady(page);
  const before = await sourcesOf(page);
  const firstId = await page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.context.model.sharedModel
        .cells[0].id
  );
  const added = outsideCall('add_cell', {
    path: serverPath,
    source: 'doubled = y * 2',
    after_cell_id: firstId
  });
  try {
    const card = page.locator('.qloop-outside[data-qloop-outside-cell="add"]');
    await expect(card).toBeVisible({ timeout: 60000 });
    await expect(card.locator('.qloop-outside-where')).toHaveText(
      'New code cell, after cell 1'
    );
    await card.locator('.qloop-outside-edit').click();
    await card
      .locator('textarea.qloop-outside-editor')
      .fill('doubled = y * 2  # checked');
    await card.locator('.qloop-outside-run-edited').click();
    const outcome = await added.done;
    expect(outcome.is_error).toBe(false);
    expect(outcome.text).toContain('edited by the user: added as cell');
  } finally {
    added.process.kill();
  }
  await expect
    .poll(() => sourcesOf(page))
    .toEqual([before[0], 'doubled = y * 2  # checked', ...before.slice(1)]);
  const edited = outsideCall('edit_cell', {
    path: serverPath,
    cell_id: firstId,
    source: 'import os'
  });
  try {
    const card = page.locator('.qloop-outside[data-qloop-outside-cell="edit"]');
    await expect(card).toBeVisible({ timeout: 60000 });
    await expect(card.locator('.qloop-diff-add')).toContainText('import os');
    await card.locator('input.qloop-outside-reason').fill('not that cell');
    await card.locator('.qloop-outside-deny').click();
    const outcome = await edited.done;
    expect(outcome.text).toBe('denied by the user: not that cell');
  } finally {
    edited.process.kill();
  }
  expect((await sourcesOf(page))[0]).toBe(before[0]); // rejected: unchanged
  // run_cell: the card shows the cell's source; the page runs it, and its
  // outputs land in the cell and reach the client.
  await page.evaluate(() => {
    const model = (window as any).jupyterapp.shell.currentWidget.context.model;
    model.sharedModel.cells[1].setSource('print("ran by", "the page")');
  });
  const secondId = await page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.context.model.sharedModel
        .cells[1].id
  );
  const ran = outsideCall('run_cell', { path: serverPath, cell_id: secondId });
  try {
    const card = page.locator('.qloop-outside[data-qloop-outside-cell="run"]');
    await expect(card).toBeVisible({ timeout: 60000 });
    await expect(card.locator('.qloop-outside-where')).toHaveText(
      'Run of cell 2'
    );
    await expect(card.locator('pre.qloop-outside-code')).toHaveText(
      'print("ran by", "the page")'
    );
    await card.locator('.qloop-outside-approve').click();
    const outcome = await ran.done;
    expect(outcome.is_error).toBe(false);
    expect(outcome.text).toContain('ran cell');
    expect(outcome.text).toContain('ran by the page');
  } finally {
    ran.process.kill();
  }
  await expect(
    page.locator('.jp-Notebook .jp-Cell').nth(1).locator('.jp-OutputArea')
  ).toContainText('ran by the page');
});

test7(
  'Notebook 7: an outside call waits for the card at 360 px and runs when approved',
  async ({ notebook7 }) => {
    const page = notebook7.page;
    await page.setViewportSize({ width: 360, height: 800 });
    const serverPath = await notebook7.open(NOTEBOOK);
    const call = outsideCall('run_code', {
      path: serverPath,
      code: 'print("from outside")'
    });
    try {
      const card = page.locator('.qloop-outside');
      await expect(card).toBeVisible({ timeout: 60000 });
      const box = await card.boundingBox();
      expect(box!.width).toBeLessThanOrEqual(360);
      await expect(card).toHaveAttribute('data-qloop-risk', 'read');
      await card.locator('.qloop-outside-approve').click();
      const outcome = await call.done;
      expect(outcome.is_error).toBe(false);
      expect(outcome.text).toContain('from outside');
    } finally {
      call.process.kill();
    }
  }
);
