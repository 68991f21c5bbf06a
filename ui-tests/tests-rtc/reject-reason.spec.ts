/**
 * A proposal rejected with a reason on the page that did not propose it:
 * rejecting deletes the proposed cell, which the proposing page sees too,
 * and the model is told the reason the user typed, not that the cell was
 * deleted.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell,
 * cell 2 prints `y + 1`.
 */
import {
  StandInItem,
  expect,
  test,
  toolResults,
  waitForIdleKernel
} from '../tests/fixtures';

import { secondPage } from './second';

const NOTEBOOK = 'agent_cell.ipynb';
const BAR = '.jp-NotebookPanel:not(.lm-mod-hidden) .qloop-proposal';

const PROPOSE_ONE: StandInItem[] = [
  {
    content: [
      { type: 'tool_use', name: 'add_cell', input: { source: 'z = 7' } }
    ]
  },
  { content: 'Left it out.' }
];

test("a reason given on the other page reaches the model, not the cell's deletion", async ({
  page,
  browser,
  baseURL,
  openNotebook,
  runAll,
  standIn
}) => {
  await standIn.reset(PROPOSE_ONE);
  const serverPath = await openNotebook(NOTEBOOK);
  const second = await secondPage(browser, baseURL, serverPath);
  try {
    await page.notebook.activate(NOTEBOOK);
    await runAll({ wait: false });
    const here = page.locator(BAR).filter({ hasText: '+z = 7' });
    const there = second.page.locator(BAR).filter({ hasText: '+z = 7' });
    await expect(here).toHaveCount(1, { timeout: 60000 });
    await expect(there).toHaveCount(1, { timeout: 60000 });

    await there.locator('button.qloop-proposal-reject').click();
    await there
      .locator('.qloop-proposal-reason-input')
      .fill('use the cleaned frame');
    await there.locator('button.qloop-proposal-confirm').click();
    await expect(here).toHaveCount(0, { timeout: 10000 });
    await waitForIdleKernel(page);

    const requests = await standIn.requests();
    expect(requests).toHaveLength(2);
    const told = JSON.stringify(toolResults(requests[1])[0].content);
    expect(told).toContain('use the cleaned frame');
    expect(told).not.toContain('deleted');
    await expect(
      page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')
    ).toHaveCount(3);
  } finally {
    await second.context.close();
  }
});
