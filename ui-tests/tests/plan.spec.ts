/**
 * Plan first in JupyterLab: the "Plan first" toggle puts --plan on the agent
 * cell; its turn shows the plan as a list and runs nothing; Edit changes a
 * step; Run plan runs the edited plan in a cell below (the model receives it
 * as its instructions); Discard folds the list and the kernel forgets the
 * plan. Takes the Light and Dark screenshots of the list for docs/fix.md.
 * In Notebook 7: the list shows, and Run plan runs the plan in a cell below.
 *
 * plan.ipynb: cell 0 loads the extension and makes `df` (3 rows, one null),
 * cell 1 is the agent cell "Clean df and plot it." with --approve auto.
 */
import * as path from 'path';

import {
  REPOSITORY_ROOT,
  StandInItem,
  cell,
  expect,
  outputText,
  test,
  toolResults,
  waitForIdleKernel
} from './fixtures';
import {
  cell as nb7Cell,
  notebookOf,
  runAll as nb7RunAll,
  test as nb7Test
} from './nb7';

const PLAN = 'Drop the rows of df with nulls.';
const EDITED = 'Drop the rows of df where a is null.';
const SCRIPT: StandInItem[] = [
  // Not offered to a plan turn: refused, nothing runs.
  {
    content: [
      { type: 'tool_use', name: 'run_code', input: { code: 'df = None' } }
    ]
  },
  { content: `My plan:\n\n1. ${PLAN}\n2. Plot a by index.` },
  // The run of the plan.
  {
    content: [
      {
        type: 'tool_use',
        name: 'run_code',
        input: { code: 'df = df.dropna()' }
      }
    ]
  },
  { content: 'Done: 2 rows left.' }
];

/** The text of the newest user message of a request (a turn's task). */
function task(request: {
  body: { messages?: { role: string; content: any }[] };
}): string {
  const user = (request.body.messages ?? []).filter(m => m.role === 'user');
  const content = user[user.length - 1]?.content;
  return typeof content === 'string'
    ? content
    : (content ?? []).map((b: any) => b.text ?? '').join('');
}

test.describe('plan first', () => {
  test.use({ viewport: { width: 1100, height: 900 } });

  test('the plan shows as a list, runs nothing, and Run plan runs it as edited', async ({
    page,
    openNotebook,
    runAll,
    saveAndRead,
    standIn
  }) => {
    await standIn.reset(SCRIPT);
    const serverPath = await openNotebook('plan.ipynb');
    await page.notebook.selectCells(1);
    await page.evaluate(() =>
      (window as any).jupyterapp.commands.execute('qloop:toggle-plan-first')
    );
    expect(await page.notebook.getCellTextInput(1)).toBe(
      '%%agent --plan --approve auto\nClean df and plot it.'
    );

    await runAll();
    const list = (await cell(page, 1)).locator('.qloop-plan-output');
    await expect(list.locator('li')).toHaveText([PLAN, 'Plot a by index.']);
    // Nothing ran: run_code was not offered, and the call was refused.
    let requests = await standIn.requests();
    expect(requests).toHaveLength(2);
    expect(requests[0].body.tools.map((t: any) => t.name)).not.toContain(
      'run_code'
    );
    expect(toolResults(requests[1])[0].is_error).toBe(true);
    expect(await page.notebook.getCellCount()).toBe(2);

    await list.screenshot({
      path: path.join(REPOSITORY_ROOT, 'docs', 'plan-light.png')
    });
    await list.locator('.qloop-plan-edit').click();
    await list.locator('textarea').first().fill(EDITED);
    // The Dark screenshot shows the list being edited.
    await page.theme.setTheme('JupyterLab Dark');
    await list.screenshot({
      path: path.join(REPOSITORY_ROOT, 'docs', 'plan-dark.png')
    });
    await list.locator('.qloop-plan-run').click();
    await expect.poll(() => page.notebook.getCellCount()).toBe(3);
    const plan = `1. ${EDITED}\n2. Plot a by index.`;
    expect(await page.notebook.getCellTextInput(2)).toBe(
      `%%agent --run-plan --approve auto\n${plan}`
    );
    await expect
      .poll(async () => (await standIn.requests()).length, { timeout: 60000 })
      .toBe(4);
    await waitForIdleKernel(page);
    requests = await standIn.requests();
    expect(task(requests[2])).toBe(
      `Carry out this plan for the task: Clean df and plot it., step by step:\n\n${plan}`
    );
    expect(toolResults(requests[3])[0].is_error ?? false).toBe(false);

    await list.locator('.qloop-plan-discard').click();
    await expect(list).toHaveText('Plan discarded (2 steps)');
    await page.notebook.addCell('code', '%agent --run-plan');
    await page.notebook.runCell(3);
    await expect
      .poll(() => outputText(page, 3))
      .toContain('no plan in this session');
    expect(await standIn.requests()).toHaveLength(4);

    const file = await saveAndRead(serverPath);
    expect(file.cells[2].metadata.qloop.plan).toEqual({
      task: 'Clean df and plot it.',
      proposed: `1. ${PLAN}\n2. Plot a by index.`,
      run: plan
    });
  });
});

nb7Test(
  'Notebook 7: the plan list runs the plan in a cell below',
  async ({ notebook7, standIn }) => {
    await standIn.reset(SCRIPT);
    await notebook7.open(
      'plan7.ipynb',
      notebookOf([
        "%load_ext qloop_kernel\nimport pandas as pd\ndf = pd.DataFrame({'a': [1.0, None]})",
        '%%agent --plan --approve auto\nClean df and plot it.'
      ])
    );
    const page = notebook7.page;
    await nb7RunAll(page);
    const list = nb7Cell(page, 1).locator('.qloop-plan-output');
    await expect(list.locator('li')).toHaveText([PLAN, 'Plot a by index.']);
    expect(await standIn.requests()).toHaveLength(2);
    await list.locator('.qloop-plan-run').click();
    await expect(nb7Cell(page, 2)).toContainText(
      '%%agent --run-plan --approve auto'
    );
    await expect
      .poll(async () => (await standIn.requests()).length, { timeout: 60000 })
      .toBe(4);
    const requests = await standIn.requests();
    expect(task(requests[2])).toContain(`\n\n1. ${PLAN}\n2. Plot a by index.`);
  }
);
