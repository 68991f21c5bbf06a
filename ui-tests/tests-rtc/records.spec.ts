/**
 * Records under real-time collaboration (jupyter-collaboration, RTC on): every
 * page edits the server's shared copy of the notebook, and the server saves
 * it to disk. No spec here clicks Save: what reaches the file, the server
 * wrote.
 *
 * - an agent cell's record reaches the cell metadata, the marker and the file;
 * - a papermill output keeps its approved record (the disagreeing mirror goes
 *   into `history`, and the file has it so), also when papermill writes the
 *   file while it is open and the server loads it into the open notebook;
 * - a second page on the notebook, opened later or at the same time, adds no
 *   history entry and writes no metadata; a record restored on one page shows
 *   on the other; turns run while a second page is open (opened before the
 *   turn, or while its card waits) keep one record, one history entry and one
 *   output per card widget.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell
 * "Set y to 42.", cell 2 prints `y + 1`. papermill_output.ipynb: cell 2 is an
 * agent cell with an approved record and a mirror from a run that could not
 * see it.
 */
import * as fs from 'fs';
import * as path from 'path';

import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { APIRequestContext, Locator, Page } from '@playwright/test';

import {
  IMarker,
  INotebookFile,
  NOTEBOOK_DIR,
  StandInItem,
  approvalCard,
  contentsUrl,
  expect,
  markerOf,
  outputText,
  readNotebook,
  readNotebookOnDisk,
  test,
  waitForIdleKernel,
  waitForKernelReady
} from '../tests/fixtures';

import { secondPage } from './second';

const MIME = 'application/vnd.qloop.transcript+json';
const UNREADABLE = 'the file on disk is missing or half written';
const PAPERMILL = 'papermill_output.ipynb';
const PAPERMILL_AGENT = 2; // papermill put its error banner above the cells
const AGENT_NOTEBOOK = 'agent_cell.ipynb';
const AGENT = 1;
const AFTER = 2;
const KEPT = 'agent · replayable · 1 earlier record';
const RESTORED =
  'agent · not replayable (its code steps were denied) · 1 earlier record';
/**
 * How long a page has, once its marker shows, to write anything it would
 * write (the server saves a change after 1 s).
 */
const SETTLE_MS = 2500;

/** The model asks to run `code`, then ends the turn with `answer`. */
function runCodeScript(code: string, answer: string): StandInItem[] {
  return [
    {
      content: [
        { type: 'text', text: 'I will run one line.' },
        { type: 'tool_use', name: 'run_code', input: { code } }
      ]
    },
    { content: answer }
  ];
}

/** The digests of papermill_output.ipynb's approved record and of its mirror. */
function papermillDigests(): { approved: string; blind: string } {
  const file = JSON.parse(
    fs.readFileSync(path.join(NOTEBOOK_DIR, PAPERMILL), 'utf-8')
  );
  const cell = file.cells[PAPERMILL_AGENT];
  const mirror = cell.outputs.find(
    (output: { data?: Record<string, unknown> }) => output.data?.[MIME]
  ).data[MIME];
  return { approved: cell.metadata.qloop.digest, blind: mirror.digest };
}

/**
 * papermill_output.ipynb as it was before papermill ran it: its mirror holds
 * the approved record, as the approved run left it.
 */
function papermillBefore(): INotebookFile {
  const file = JSON.parse(
    fs.readFileSync(path.join(NOTEBOOK_DIR, PAPERMILL), 'utf-8')
  );
  const cell = file.cells[PAPERMILL_AGENT];
  const mirror = cell.outputs.find(
    (output: { data?: Record<string, unknown> }) => output.data?.[MIME]
  );
  mirror.data[MIME] = cell.metadata.qloop;
  return file;
}

/** A record's digest and the digests of its history, newest first. */
function digests(record: any): { digest: string; history: string[] } {
  return {
    digest: record?.digest,
    history: (record?.history ?? []).map((e: { digest: string }) => e.digest)
  };
}

/** A button of an approval card, by its label (its name starts with an icon glyph). */
function button(card: Locator, label: string): Locator {
  return card.locator('button').filter({ hasText: new RegExp(`^${label}$`) });
}

/** Wait until the file on disk, as the server saved it, passes `check`. */
async function expectOnDisk(
  serverPath: string,
  check: (file: INotebookFile) => unknown,
  expected: unknown
): Promise<void> {
  await expect
    .poll(
      async () => {
        // The server may be writing the file: a read that fails is retried.
        const file = readNotebookOnDisk(serverPath);
        return file === null ? UNREADABLE : check(file);
      },
      { timeout: 20000 }
    )
    .toEqual(expected);
}

/**
 * Wait until the server has saved everything the page changed on opening (the
 * kernel's metadata, saved 1 s after the change): the file's modification time
 * stays the same for SETTLE_MS.
 */
async function settledOnDisk(
  request: APIRequestContext,
  serverPath: string
): Promise<void> {
  const url = `${contentsUrl(serverPath)}?content=0`;
  const modified = async (): Promise<string | null> => {
    const response = await request.get(url);
    return response.ok() ? (await response.json()).last_modified : null;
  };
  const deadline = Date.now() + 30000;
  let before = await modified();
  for (;;) {
    await new Promise(resolve => setTimeout(resolve, SETTLE_MS));
    const now = await modified();
    if (now !== null && now === before) {
      return;
    }
    expect(Date.now(), `${serverPath} keeps changing on disk`).toBeLessThan(
      deadline
    );
    before = now;
  }
}

/** The active notebook of a page is a shared (collaborative) document. */
async function isShared(page: Page): Promise<boolean> {
  return page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.context.model
        .collaborative === true
  );
}

/** The marker of cell `index` of the notebook a plain page shows (markerOf for Galata's page). */
async function markerOn(page: Page, index: number): Promise<IMarker> {
  const node = page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')
    .nth(index);
  return node.evaluate(element => {
    const wrapper = element.querySelector('.jp-Cell-inputWrapper');
    const content = wrapper
      ? getComputedStyle(wrapper, '::after').content
      : 'none';
    return {
      marked: element.classList.contains('qloop-agent-cell'),
      status: element.getAttribute('data-qloop-status'),
      badge: content === 'none' ? '' : JSON.parse(content)
    };
  });
}

/** The `metadata.qloop` of cell `index` as a page's notebook model holds it. */
async function recordOn(page: Page, index: number): Promise<any> {
  return page.evaluate(
    i =>
      (window as any).jupyterapp.shell.currentWidget.content.widgets[
        i
      ].model.getMetadata('qloop') ?? null,
    index
  );
}

/** The digest of the newest output mirror of cell `index` as a page's model holds it. */
async function mirrorDigestOn(
  page: Page,
  index: number
): Promise<string | null> {
  return page.evaluate(
    ([i, mime]) => {
      const outputs = (window as any).jupyterapp.shell.currentWidget.content
        .widgets[i].model.outputs;
      let digest: string | null = null;
      for (let n = 0; n < outputs.length; n++) {
        digest = outputs.get(n).data[mime]?.digest ?? digest;
      }
      return digest;
    },
    [index, MIME] as [number, string]
  );
}

/**
 * Count, from now on, the changes of `metadata.qloop` of cell `index` that
 * reach a page (its own and every other page's); `writes` reads the count.
 */
async function countWrites(page: Page, index: number): Promise<void> {
  await page.evaluate(i => {
    const model = (window as any).jupyterapp.shell.currentWidget.content
      .widgets[i].model;
    (window as any).qloopWrites = 0;
    model.metadataChanged.connect((_: unknown, change: { key: string }) => {
      if (change.key === 'qloop') {
        (window as any).qloopWrites += 1;
      }
    });
  }, index);
}

async function writes(page: Page): Promise<number> {
  return page.evaluate(() => (window as any).qloopWrites as number);
}

/** Restore the agent cell's earliest record through the command, on any page. */
async function restoreEarlier(page: Page, index: number): Promise<void> {
  await page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')
    .nth(index)
    .locator('.jp-InputPrompt')
    .click();
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute('qloop:restore-record');
  });
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('made without the saved record');
  await dialog.getByRole('button', { name: 'OK' }).click();
}

/** Run All on Galata's page until the agent cell's run_code card waits. */
async function runUntilCard(
  page: IJupyterLabPageFixture,
  runAll: (options?: { wait?: boolean }) => Promise<void>
): Promise<Locator> {
  await runAll({ wait: false });
  const card = (await approvalCard(page, AGENT)).filter({
    hasText: 'run_code wants to run — approve?'
  });
  await expect(card).toBeVisible({ timeout: 60000 });
  return card;
}

/** Approve the waiting card and wait for the end of Run All. */
async function approve(
  page: IJupyterLabPageFixture,
  card: Locator
): Promise<void> {
  await button(card, 'Approve').click();
  await waitForIdleKernel(page);
  await expect.poll(() => outputText(page, AFTER)).toBe('43\n');
}

/** How many outputs of cell `index` show a widget (the approval card), as a page's model holds them. */
async function widgetOutputsOn(page: Page, index: number): Promise<number> {
  return page.evaluate(i => {
    const outputs = (window as any).jupyterapp.shell.currentWidget.content
      .widgets[i].model.outputs;
    let count = 0;
    for (let n = 0; n < outputs.length; n++) {
      if (outputs.get(n).data['application/vnd.jupyter.widget-view+json']) {
        count += 1;
      }
    }
    return count;
  }, index);
}

test.describe('records under real-time collaboration', () => {
  test("an agent cell's record reaches the metadata, the marker and the file the server saves", async ({
    page,
    openNotebook,
    request,
    runAll,
    standIn
  }) => {
    await standIn.reset(runCodeScript('y = 42', 'Done: `y` is **42**.'));
    const serverPath = await openNotebook(AGENT_NOTEBOOK);
    expect(await isShared(page)).toBe(true);

    await approve(page, await runUntilCard(page, runAll));
    await expect
      .poll(() => markerOf(page, AGENT), { timeout: 30000 })
      .toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable'
      });
    const inPage = await recordOn(page, AGENT);
    expect(inPage).toMatchObject({
      cell_id: 'agent',
      prompt: 'Set y to 42.',
      status: 'completed'
    });
    // The server saves the shared document: the file holds the same record.
    await expectOnDisk(
      serverPath,
      file => file.cells[AGENT].metadata.qloop?.digest ?? null,
      inPage.digest
    );
    const saved = (await readNotebook(request, serverPath)).cells[AGENT];
    expect(saved.metadata.qloop).toEqual(inPage);
    expect(saved.metadata.qloop.tool_calls[0]).toMatchObject({
      name: 'run_code',
      input: { code: 'y = 42' },
      decision: { kind: 'approved' }
    });
    expect(saved.metadata.qloop.history ?? []).toEqual([]);
    expect(saved.outputs!.some(output => output.data?.[MIME])).toBe(true);
    expect((await standIn.requests()).map(r => r.status)).toEqual([200, 200]);
  });

  test('a papermill output keeps the approved record, in the page and in the file', async ({
    page,
    openNotebook,
    request
  }) => {
    const { approved, blind } = papermillDigests();
    expect(approved).not.toBe(blind);
    const serverPath = await openNotebook(PAPERMILL);
    expect(await isShared(page)).toBe(true);
    await expect
      .poll(() => markerOf(page, PAPERMILL_AGENT))
      .toEqual({ marked: true, status: 'completed', badge: KEPT });
    expect(digests(await recordOn(page, PAPERMILL_AGENT))).toEqual({
      digest: approved,
      history: [blind]
    });
    await expectOnDisk(
      serverPath,
      file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
      { digest: approved, history: [blind] }
    );
    const record = (await readNotebook(request, serverPath)).cells[
      PAPERMILL_AGENT
    ].metadata.qloop;
    expect(record.history[0].metadata_unseen).toBe(true);
    // The mirror stays as papermill wrote it: nothing is overwritten.
    const outputs = (await readNotebook(request, serverPath)).cells[
      PAPERMILL_AGENT
    ].outputs!;
    expect(
      outputs.find(output => output.data?.[MIME])!.data![MIME].digest
    ).toBe(blind);
  });

  test('a headless run rewriting the open notebook puts its mirror in the history', async ({
    page,
    tmpPath,
    request
  }) => {
    const { approved, blind } = papermillDigests();
    const root = process.env.JUPYTERLAB_GALATA_ROOT_DIR;
    expect(root, 'JUPYTERLAB_GALATA_ROOT_DIR is not set').toBeTruthy();
    // Before the run: the approved record, in the metadata and the mirror.
    const serverPath = `${tmpPath}/${PAPERMILL}`;
    expect(
      await page.contents.uploadContent(
        JSON.stringify(papermillBefore()),
        'text',
        serverPath
      )
    ).toBe(true);
    expect(await page.notebook.openByPath(serverPath)).toBe(true);
    expect(await page.notebook.activate(PAPERMILL)).toBe(true);
    await expect
      .poll(() => markerOf(page, PAPERMILL_AGENT), { timeout: 30000 })
      .toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable'
      });

    // The page is done writing (a save of the kernel's metadata landing
    // after the new file would put the old content back over it).
    await waitForKernelReady(page);
    await settledOnDisk(request, serverPath);
    // `papermill IN IN` (no qloop engine) writes the file while it is open:
    // the server loads it into the shared document, cell by cell. The new
    // content arrives whole (written aside, then renamed), so the server's
    // poll never reads a half-written file.
    const target = path.join(root!, serverPath);
    const partial = path.join(
      path.dirname(target),
      `.${path.basename(target)}.partial`
    );
    fs.copyFileSync(path.join(NOTEBOOK_DIR, PAPERMILL), partial);
    fs.renameSync(partial, target);
    await expect
      .poll(() => mirrorDigestOn(page, PAPERMILL_AGENT), { timeout: 30000 })
      .toBe(blind);
    await expect
      .poll(() => markerOf(page, PAPERMILL_AGENT), { timeout: 30000 })
      .toEqual({ marked: true, status: 'completed', badge: KEPT });
    expect(digests(await recordOn(page, PAPERMILL_AGENT))).toEqual({
      digest: approved,
      history: [blind]
    });
    await expectOnDisk(
      serverPath,
      file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
      { digest: approved, history: [blind] }
    );
  });

  test('a second page adds no history entry and writes nothing; a restore on it shows on the first', async ({
    page,
    browser,
    baseURL,
    openNotebook,
    request
  }) => {
    const { approved, blind } = papermillDigests();
    const serverPath = await openNotebook(PAPERMILL);
    await expect
      .poll(() => markerOf(page, PAPERMILL_AGENT))
      .toMatchObject({ badge: KEPT });
    await expectOnDisk(
      serverPath,
      file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
      { digest: approved, history: [blind] }
    );
    await countWrites(page, PAPERMILL_AGENT);

    const second = await secondPage(browser, baseURL, serverPath);
    try {
      expect(await isShared(second.page)).toBe(true);
      await expect
        .poll(() => markerOn(second.page, PAPERMILL_AGENT))
        .toEqual({ marked: true, status: 'completed', badge: KEPT });
      await second.page.waitForTimeout(SETTLE_MS);
      // Its mirror sync found the mirror in the history: no write at all.
      expect(await writes(page)).toBe(0);
      for (const p of [page, second.page]) {
        expect(digests(await recordOn(p, PAPERMILL_AGENT))).toEqual({
          digest: approved,
          history: [blind]
        });
      }
      await expectOnDisk(
        serverPath,
        file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
        { digest: approved, history: [blind] }
      );

      // A restore on the second page is one write, and the first page shows it.
      await restoreEarlier(second.page, PAPERMILL_AGENT);
      await expect
        .poll(() => markerOf(page, PAPERMILL_AGENT))
        .toMatchObject({ status: 'completed', badge: RESTORED });
      expect(await writes(page)).toBe(1);
      await expectOnDisk(
        serverPath,
        file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
        { digest: blind, history: [approved] }
      );

      // Reopened, the second page's sync agrees with the restored record.
      await second.page.reload();
      await expect
        .poll(() => markerOn(second.page, PAPERMILL_AGENT), { timeout: 60000 })
        .toMatchObject({ badge: RESTORED });
      await second.page.waitForTimeout(SETTLE_MS);
      expect(await writes(page)).toBe(1);
      expect(digests(await recordOn(page, PAPERMILL_AGENT))).toEqual({
        digest: blind,
        history: [approved]
      });
    } finally {
      await second.context.close();
    }
  });

  test('two pages opening a papermill output at once keep one history entry', async ({
    page,
    browser,
    baseURL,
    tmpPath,
    request
  }) => {
    const { approved, blind } = papermillDigests();
    const serverPath = `${tmpPath}/${PAPERMILL}`;
    await page.contents.uploadFile(
      path.join(NOTEBOOK_DIR, PAPERMILL),
      serverPath
    );
    const [opened, second] = await Promise.all([
      page.notebook.openByPath(serverPath),
      secondPage(browser, baseURL, serverPath)
    ]);
    try {
      expect(opened).toBe(true);
      expect(await page.notebook.activate(PAPERMILL)).toBe(true);
      for (const marker of [
        () => markerOf(page, PAPERMILL_AGENT),
        () => markerOn(second.page, PAPERMILL_AGENT)
      ]) {
        await expect
          .poll(marker, { timeout: 30000 })
          .toEqual({ marked: true, status: 'completed', badge: KEPT });
      }
      await second.page.waitForTimeout(SETTLE_MS);
      for (const p of [page, second.page]) {
        expect(digests(await recordOn(p, PAPERMILL_AGENT))).toEqual({
          digest: approved,
          history: [blind]
        });
      }
      await expectOnDisk(
        serverPath,
        file => digests(file.cells[PAPERMILL_AGENT].metadata.qloop),
        { digest: approved, history: [blind] }
      );
    } finally {
      await second.context.close();
    }
  });

  test('turns run with a second page open keep one record and one history entry, and one card per widget', async ({
    page,
    browser,
    baseURL,
    openNotebook,
    request,
    runAll,
    standIn
  }) => {
    await standIn.reset([
      ...runCodeScript('y = 42', 'Done: `y` is **42**.'),
      ...runCodeScript('y = 42', 'Done again: `y` is **42**.')
    ]);
    const serverPath = await openNotebook(AGENT_NOTEBOOK);
    // Open before the turn: both pages get the kernel's comm when it opens.
    let second = await secondPage(browser, baseURL, serverPath);
    try {
      await page.notebook.activate(AGENT_NOTEBOOK);
      await approve(page, await runUntilCard(page, runAll));
      const onSecond = () => markerOn(second.page, AGENT);
      await expect.poll(onSecond, { timeout: 30000 }).toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable'
      });
      const first = await recordOn(page, AGENT);
      expect(await recordOn(second.page, AGENT)).toEqual(first);
      expect(first.history ?? []).toEqual([]);
      await expectOnDisk(
        serverPath,
        file => digests(file.cells[AGENT].metadata.qloop),
        { digest: first.digest, history: [] }
      );
      await second.context.close();

      // A changed prompt is a new turn: the first record is its one history
      // entry. Opened while its card waits, the second page takes over the
      // kernel's comms and finds the card already in the shared outputs.
      await page.notebook.setCell(AGENT, 'code', '%%agent\nSet y to 42 again.');
      const card = await runUntilCard(page, runAll);
      const widgets = await widgetOutputsOn(page, AGENT);
      second = await secondPage(browser, baseURL, serverPath);
      // Its widget manager restored the waiting card from the kernel, and the
      // first turn's transcript view does not hide it.
      await expect(
        second.page.locator('.qloop-approval-card').filter({
          hasText: 'run_code wants to run — approve?'
        })
      ).toBeVisible({ timeout: 30000 });
      await second.page.waitForTimeout(SETTLE_MS);
      expect(await widgetOutputsOn(second.page, AGENT)).toBe(widgets);
      expect(await widgetOutputsOn(page, AGENT)).toBe(widgets);
      await approve(page, card);
      await expect
        .poll(async () => (await recordOn(second.page, AGENT))?.prompt, {
          timeout: 30000
        })
        .toBe('Set y to 42 again.');
      await second.page.waitForTimeout(SETTLE_MS);
      const next = await recordOn(page, AGENT);
      expect(next.status).toBe('completed');
      expect(digests(next)).toEqual({
        digest: next.digest,
        history: [first.digest]
      });
      expect(await recordOn(second.page, AGENT)).toEqual(next);
      await expect
        .poll(() => markerOn(second.page, AGENT))
        .toMatchObject({ badge: 'agent · replayable · 1 earlier record' });
      await expectOnDisk(
        serverPath,
        file => ({
          ...digests(file.cells[AGENT].metadata.qloop),
          cards: file.cells[AGENT].outputs!.filter(
            output => output.data?.['application/vnd.jupyter.widget-view+json']
          ).length
        }),
        {
          digest: next.digest,
          history: [first.digest],
          cards: await widgetOutputsOn(page, AGENT)
        }
      );
      expect(await standIn.requests()).toHaveLength(4);
    } finally {
      await second.context.close();
    }
  });
});
