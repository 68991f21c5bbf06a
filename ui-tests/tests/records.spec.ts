/**
 * No record is ever lost: a papermill output whose mirror came from a run that
 * could not see the saved record keeps the approved record when opened, shows
 * the other one as an earlier record, and the user can restore it.
 */
import * as fs from 'fs';
import * as path from 'path';

import { Page } from '@playwright/test';

import { expect, markerOf, test } from './fixtures';

const MIME = 'application/vnd.qloop.transcript+json';
const AGENT_CELL = 2; // papermill put its error banner above the cells

function fixture(): { approved: string; blind: string } {
  const file = JSON.parse(
    fs.readFileSync(
      path.join(__dirname, '..', 'notebooks', 'papermill_output.ipynb'),
      'utf-8'
    )
  );
  const cell = file.cells[AGENT_CELL];
  const mirror = cell.outputs.find(
    (output: { data?: Record<string, unknown> }) => output.data?.[MIME]
  ).data[MIME];
  return { approved: cell.metadata.qloop.digest, blind: mirror.digest };
}

test.describe('records are never lost', () => {
  test('a papermill output keeps the approved record and can restore the other', async ({
    page,
    openNotebook,
    saveAndRead
  }) => {
    const { approved, blind } = fixture();
    expect(approved).not.toBe(blind);
    const serverPath = await openNotebook('papermill_output.ipynb');
    await expect
      .poll(() => markerOf(page, AGENT_CELL))
      .toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable · 1 earlier record'
      });
    let file = await saveAndRead(serverPath);
    let record = file.cells[AGENT_CELL].metadata.qloop;
    expect(record.digest).toBe(approved);
    expect(record.history.map((e: { digest: string }) => e.digest)).toEqual([
      blind
    ]);
    expect(record.history[0].metadata_unseen).toBe(true);

    await page.notebook.selectCells(AGENT_CELL);
    await page.evaluate(() => {
      void (window as any).jupyterapp.commands.execute('qloop:restore-record');
    });
    const dialog = page.locator('.jp-Dialog');
    await expect(dialog).toContainText('made without the saved record');
    await dialog.getByRole('button', { name: 'OK' }).click();
    await expect
      .poll(() => markerOf(page, AGENT_CELL))
      .toMatchObject({
        badge:
          'agent · not replayable (its code steps were denied) · 1 earlier record'
      });
    file = await saveAndRead(serverPath);
    record = file.cells[AGENT_CELL].metadata.qloop;
    expect(record.digest).toBe(blind);
    expect(record.history[0].digest).toBe(approved);
  });
});

test.describe('copy to cell', () => {
  test('each approved step of the transcript view becomes a code cell below, in order', async ({
    page,
    openNotebook,
    saveAndRead
  }) => {
    const serverPath = await openNotebook('saved_turn.ipynb');
    const buttons = page.locator('.qloop-transcript .qloop-copy-to-cell');
    await expect(buttons).toHaveCount(3); // the denied step has none
    await buttons.nth(0).click();
    await buttons.nth(1).click();
    const file = await saveAndRead(serverPath);
    const sources = file.cells.map(c => {
      const source = (c as { source?: string | string[] }).source ?? '';
      return Array.isArray(source) ? source.join('') : source;
    });
    expect(sources.slice(1, 3)).toEqual([
      'df.isna().sum()',
      "df = df.dropna(subset=['price'])\nlen(df)"
    ]);
    expect(file.cells[1].cell_type).toBe('code');
    expect(file.cells[3].cell_type).toBe('markdown');
  });
});

/** Set a cell's source through its model, as an edit does (no editor auto-closing). */
async function setSource(page: Page, index: number, source: string) {
  await page.evaluate(
    ([i, text]) => {
      const panel = (window as any).jupyterapp.shell.currentWidget;
      panel.content.widgets[i].model.sharedModel.setSource(text);
    },
    [index, source] as [number, string]
  );
}

test.describe('stale marker', () => {
  test('an agent cell turns stale when a cell its turn read is edited', async ({
    page,
    tmpPath
  }) => {
    const serverPath = `${tmpPath}/demo.ipynb`;
    const demo = path.join(__dirname, '..', '..', 'notebooks', 'demo.ipynb');
    await page.contents.uploadFile(demo, serverPath);
    expect(await page.notebook.openByPath(serverPath)).toBe(true);
    await page.notebook.activate('demo.ipynb');
    // Cell 1 defines df, which both agent cells (2 and 3) read.
    await expect
      .poll(() => markerOf(page, 2))
      .toMatchObject({ badge: 'agent · replayable' });
    const cells = JSON.parse(fs.readFileSync(demo, 'utf-8')).cells;
    const source: string = [].concat(cells[1].source).join('');
    await setSource(page, 1, source.replace('n = 600', 'n = 800'));
    for (const index of [2, 3]) {
      await expect
        .poll(() => markerOf(page, index))
        .toMatchObject({
          badge: 'agent · replayable · stale: a cell it read was edited'
        });
    }
    await setSource(page, 1, source); // edited back: not stale
    await expect
      .poll(() => markerOf(page, 2))
      .toMatchObject({ badge: 'agent · replayable' });
  });
});
