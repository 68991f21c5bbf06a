/**
 * read_notebook answered by the extension of the page that runs the agent
 * cell, in JupyterLab and in Notebook 7: the model reads every cell in order,
 * with its id, the one running now marked, and the cells still queued shown
 * as not run.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell,
 * cell 2 prints `y + 1` (queued behind it during Run All).
 */
import {
  IStandIn,
  StandInItem,
  expect,
  test,
  toolResults
} from './fixtures';
import { runAll as runAllNotebook7, test as test7 } from './nb7';

const NOTEBOOK = 'agent_cell.ipynb';

const READ: StandInItem[] = [
  {
    content: [{ type: 'tool_use', name: 'read_notebook', input: {} }]
  },
  { content: 'The notebook loads the extension, then asks for y.' }
];

/** What the model was given for its read_notebook call. */
async function readResult(standIn: IStandIn): Promise<string> {
  const requests = await standIn.requests();
  expect(requests.map(r => r.status)).toEqual([200, 200]);
  const tools = (requests[0].body.tools ?? []) as { name: string }[];
  expect(tools.map(t => t.name)).toContain('read_notebook');
  const [result] = toolResults(requests[1]);
  expect(result.is_error ?? false).toBe(false);
  const content = result.content;
  return typeof content === 'string'
    ? content
    : content.map((block: { text?: string }) => block.text ?? '').join('');
}

function expectTheNotebook(text: string): void {
  expect(text).toMatch(/agent_cell\.ipynb: 3 cells/);
  expect(text).toContain('#1 id=load code, In [1]\n%load_ext qloop_kernel');
  expect(text).toMatch(/#2 id=agent code.*\(this agent cell, running now\)/);
  expect(text).toContain('%%agent\nSet y to 42.');
  expect(text).toContain('#3 id=after code, not run\nprint(y + 1)');
}

test('JupyterLab: the page answers read_notebook with the notebook as it shows it', async ({
  openNotebook,
  runAll,
  standIn
}) => {
  await standIn.reset(READ);
  await openNotebook(NOTEBOOK);
  await runAll();
  await expect.poll(async () => (await standIn.requests()).length).toBe(2);
  expectTheNotebook(await readResult(standIn));
});

test7(
  'Notebook 7: the page answers read_notebook with the notebook as it shows it',
  async ({ notebook7, standIn }) => {
    await standIn.reset(READ);
    await notebook7.open(NOTEBOOK);
    await runAllNotebook7(notebook7.page);
    await expect.poll(async () => (await standIn.requests()).length).toBe(2);
    expectTheNotebook(await readResult(standIn));
  }
);
