/**
 * Cell proposals under real-time collaboration: two pages show one shared
 * notebook. The page that runs the agent cell inserts a proposed cell once;
 * the second page shows the same proposal with its own Accept and Reject, a
 * decision made on either page answers the kernel, and the bar goes on both.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell,
 * cell 2 prints `y + 1`.
 */
import { Locator, Page } from '@playwright/test';

import {
  StandInItem,
  expect,
  readNotebookOnDisk,
  test,
  toolResults,
  waitForIdleKernel
} from '../tests/fixtures';

import { secondPage } from './second';

const NOTEBOOK = 'agent_cell.ipynb';

/** Two proposals in turn: the first is accepted on one page, the second rejected on the other. */
const PROPOSE_TWO: StandInItem[] = [
  {
    content: [
      { type: 'tool_use', name: 'add_cell', input: { source: 'z = 7' } }
    ]
  },
  {
    content: [
      { type: 'tool_use', name: 'add_cell', input: { source: 'w = 8' } }
    ]
  },
  { content: 'Proposed two cells.' }
];

/** The proposal bar of a page whose diff adds `source`, once it shows. */
async function barOn(page: Page, source: string): Promise<Locator> {
  const bar = page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .qloop-proposal')
    .filter({ hasText: `+${source}` });
  await expect(bar).toHaveCount(1, { timeout: 60000 });
  return bar;
}

/** How many cells of a page's notebook are proposed cells. */
function proposedCells(page: Page): Locator {
  return page.locator(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.qloop-proposed-cell'
  );
}

test('a proposal shows on both pages, and a decision on either answers and clears both', async ({
  page,
  browser,
  baseURL,
  openNotebook,
  runAll,
  standIn
}) => {
  await standIn.reset(PROPOSE_TWO);
  const serverPath = await openNotebook(NOTEBOOK);
  // Open before the turn: both pages get the kernel's comm when it opens.
  const second = await secondPage(browser, baseURL, serverPath);
  try {
    await page.notebook.activate(NOTEBOOK);
    await runAll({ wait: false });

    // One inserted cell, shown with its bar on both pages.
    const here = await barOn(page, 'z = 7');
    const there = await barOn(second.page, 'z = 7');
    await expect(proposedCells(page)).toHaveCount(1);
    await expect(proposedCells(second.page)).toHaveCount(1);

    // Accepted on the second page: the model is told, and the first page's bar goes.
    await there.locator('button.qloop-proposal-accept').click();
    await expect
      .poll(async () => (await standIn.requests()).length, { timeout: 30000 })
      .toBeGreaterThanOrEqual(2);
    const accepted = JSON.stringify(
      toolResults((await standIn.requests())[1])[0].content
    );
    expect(accepted).toMatch(
      /accepted: added cell \S+ after agent by the user/
    );
    await expect(here).toHaveCount(0, { timeout: 10000 });

    // The next one is rejected on the first page: the second page's bar goes.
    const next = await barOn(page, 'w = 8');
    await barOn(second.page, 'w = 8');
    await expect(proposedCells(second.page)).toHaveCount(1);
    await next.locator('button.qloop-proposal-reject').click();
    await next.locator('.qloop-proposal-reason-input').fill('not this one');
    await next.locator('button.qloop-proposal-confirm').click();
    await expect(
      second.page.locator(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .qloop-proposal'
      )
    ).toHaveCount(0, { timeout: 10000 });
    await waitForIdleKernel(page);
    const requests = await standIn.requests();
    expect(requests).toHaveLength(3);
    expect(JSON.stringify(toolResults(requests[2])[0].content)).toContain(
      'not this one'
    );

    // The file the server saves: the accepted cell once, with its provenance.
    await expect
      .poll(
        async () => {
          const file = readNotebookOnDisk(serverPath);
          if (file === null) {
            return 'unreadable';
          }
          return file.cells.map(cell => ({
            source: ([] as string[]).concat(cell.source ?? []).join(''),
            provenance: Boolean(cell.metadata.qloop_provenance),
            proposed: Boolean(cell.metadata.qloop_proposal)
          }));
        },
        { timeout: 20000 }
      )
      .toEqual([
        {
          source: '%load_ext qloop_kernel',
          provenance: false,
          proposed: false
        },
        { source: '%%agent\nSet y to 42.', provenance: false, proposed: false },
        { source: 'z = 7', provenance: true, proposed: false },
        { source: 'print(y + 1)', provenance: false, proposed: false }
      ]);
  } finally {
    await second.context.close();
  }
});
