/**
 * Cell proposals in JupyterLab and Notebook 7, Light and Dark (and the bar's
 * contrast in Dark High Contrast too): the agent's
 * add_cell shows a new cell with its diff and Accept / Reject; what the user
 * changes in the cell before accepting is what the model is told, and the
 * accepted cell is an ordinary cell that keeps its provenance; a rejected
 * proposal leaves the notebook's cells as they were, and its reason reaches
 * the model.
 *
 * agent_cell.ipynb: cell 0 loads the extension, cell 1 is the agent cell,
 * cell 2 prints `y + 1`.
 */
import * as fs from 'fs';
import * as path from 'path';

import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator, Page } from '@playwright/test';

import {
  INotebookFile,
  IStandIn,
  NOTEBOOK_DIR,
  StandInItem,
  expect,
  test,
  toolResults,
  waitForIdleKernel,
  waitForKernelReady
} from './fixtures';
import {
  runAll as runAll7,
  test as test7,
  waitForIdleKernel as waitForIdle7
} from './nb7';

const NOTEBOOK = 'agent_cell.ipynb';
const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];
const PROPOSED = 'z = 7';

const PROPOSE: StandInItem[] = [
  {
    content: [
      { type: 'text', text: 'I propose one cell.' },
      { type: 'tool_use', name: 'add_cell', input: { source: PROPOSED } }
    ]
  },
  { content: 'Proposed.' }
];

/** The text of the first tool result the model was sent. */
async function resultText(standIn: IStandIn): Promise<string> {
  await expect.poll(async () => (await standIn.requests()).length).toBe(2);
  const [result] = toolResults((await standIn.requests())[1]);
  const content = result.content;
  return typeof content === 'string'
    ? content
    : content.map((block: { text?: string }) => block.text ?? '').join('');
}

/** Run the agent cell (cell 1) and wait for its proposal bar. */
async function proposalOf(
  page: Page,
  runAgentCell: () => Promise<void>
): Promise<Locator> {
  await runAgentCell();
  const bar = page.locator('.qloop-proposal');
  await expect(bar).toBeVisible({ timeout: 60000 });
  await expect(bar).toContainText('Proposed by the agent · new cell');
  await expect(bar.locator('.qloop-proposal-diff')).toContainText(
    `+${PROPOSED}`
  );
  return bar;
}

/** The sources of the notebook's cells, as the page's model holds them. */
async function sources(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const cells = Array.from(
      document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputArea-editor')
    );
    return cells.map(cell => (cell.textContent ?? '').trim());
  });
}

async function acceptWithAnEdit(page: Page, standIn: IStandIn): Promise<void> {
  const bar = page.locator('.qloop-proposal');
  const proposed = page.locator('.jp-Cell.qloop-proposed-cell');
  // The user changes the proposed cell before accepting it.
  await proposed.locator('.cm-content').click();
  await page.keyboard.press('End');
  await page.keyboard.type(' + 1');
  await bar.locator('button.qloop-proposal-accept').click();
  await expect(bar).toHaveCount(0);
  const text = await resultText(standIn);
  expect(text).toContain('the user edited the input before approving');
  expect(text).toContain('z = 7 + 1');
  expect(text).toMatch(/accepted: added cell \S+ after agent by the user/);
  await expect(page.locator('.jp-Cell.qloop-proposed-cell')).toHaveCount(0);
  expect(await sources(page)).toContain('z = 7 + 1');
}

async function rejectWithAReason(page: Page, standIn: IStandIn): Promise<void> {
  const bar = page.locator('.qloop-proposal');
  const before = (await sources(page)).filter(s => s !== PROPOSED);
  await bar.locator('button.qloop-proposal-reject').click();
  await bar.locator('.qloop-proposal-reason-input').fill('not needed');
  await bar.locator('button.qloop-proposal-confirm').click();
  await expect(bar).toHaveCount(0);
  expect(await resultText(standIn)).toContain('not needed');
  expect(await sources(page)).toEqual(before);
}

/** What a JupyterLab test of proposals starts with. */
interface ILabFixtures {
  page: IJupyterLabPageFixture;
  openNotebook: (name: string) => Promise<string>;
  runAll: (options?: { wait?: boolean }) => Promise<void>;
  standIn: IStandIn;
}

/** Open the notebook (in `theme`) and run all until the proposal shows; its server path. */
async function startProposing(
  { page, openNotebook, runAll, standIn }: ILabFixtures,
  theme?: string
): Promise<string> {
  await standIn.reset(PROPOSE);
  const serverPath = await openNotebook(NOTEBOOK);
  if (theme) {
    await page.theme.setTheme(theme);
  }
  await proposalOf(page, () => runAll({ wait: false }));
  return serverPath;
}

for (const theme of THEMES) {
  test.describe(`JupyterLab proposals (${theme})`, () => {
    test('accepting a proposed cell with an edit tells the model what was kept', async ({
      page,
      openNotebook,
      runAll,
      saveAndRead,
      standIn
    }) => {
      const serverPath = await startProposing(
        { page, openNotebook, runAll, standIn },
        theme
      );
      await acceptWithAnEdit(page, standIn);
      await waitForIdleKernel(page);
      // An ordinary cell right after the agent cell, with its signed provenance.
      const file = await saveAndRead(serverPath);
      const ids = file.cells.map(c => c.id);
      expect(ids.slice(0, 2)).toEqual(['load', 'agent']);
      expect(ids[ids.length - 1]).toBe('after');
      const kept = file.cells[2];
      expect(kept.cell_type).toBe('code');
      expect(kept.metadata.qloop_proposal).toBeUndefined();
      expect(kept.metadata.qloop_provenance.agent_cell).toBe('agent');
      expect(kept.metadata.qloop_provenance.signature).toBeTruthy();
    });

    test('rejecting a proposed cell leaves the cells as they were', async ({
      page,
      openNotebook,
      runAll,
      saveAndRead,
      standIn
    }) => {
      const serverPath = await startProposing(
        { page, openNotebook, runAll, standIn },
        theme
      );
      await rejectWithAReason(page, standIn);
      await waitForIdleKernel(page);
      const file = await saveAndRead(serverPath);
      expect(file.cells.map(c => c.id)).toEqual(['load', 'agent', 'after']);
      for (const cell of file.cells) {
        expect(cell.metadata.qloop_proposal).toBeUndefined();
        expect(cell.metadata.qloop_provenance).toBeUndefined();
      }
      // Every cell but the agent cell (its record, its outputs) is as in the
      // file before: the same source and the same metadata (but the `trusted`
      // flag JupyterLab itself writes for a cell it ran).
      const original = JSON.parse(
        fs.readFileSync(path.join(NOTEBOOK_DIR, NOTEBOOK), 'utf-8')
      );
      const kept = (cells: INotebookFile['cells']) =>
        cells
          .filter(c => c.id !== 'agent')
          .map(c => ({
            id: c.id,
            source: ([] as string[]).concat(c.source ?? []).join(''),
            metadata: { ...c.metadata, trusted: undefined }
          }));
      expect(kept(file.cells)).toEqual(kept(original.cells));
    });
  });
}

/** Two proposals in one response: they wait together. */
const PROPOSE_TWO: StandInItem[] = [
  {
    content: [
      { type: 'text', text: 'Two cells.' },
      { type: 'tool_use', name: 'add_cell', input: { source: 'z = 7' } },
      { type: 'tool_use', name: 'add_cell', input: { source: 'w = z + 1' } }
    ]
  },
  { content: 'Proposed two.' }
];

test.describe('with real kernel messages', () => {
  // Galata's kernel mock breaks on a restart.
  test.use({ kernels: null });

  test('an accepted cell is an ordinary cell: it runs after a kernel restart without qloop', async ({
    page,
    openNotebook,
    runAll,
    standIn
  }) => {
    const kept = 'print("kept", 6 * 7)';
    await standIn.reset([
      {
        content: [
          { type: 'tool_use', name: 'add_cell', input: { source: kept } }
        ]
      },
      { content: 'Proposed.' }
    ]);
    await openNotebook(NOTEBOOK);
    await runAll({ wait: false });
    const bar = page.locator('.qloop-proposal');
    await expect(bar).toBeVisible({ timeout: 60000 });
    await bar.locator('button.qloop-proposal-accept').click();
    await expect(bar).toHaveCount(0);
    await waitForIdleKernel(page);

    await waitForKernelReady(page);
    await page.menu.clickMenuItem('Kernel>Restart Kernel…');
    await page.locator('.jp-Dialog .jp-mod-accept').click();
    await waitForIdleKernel(page);
    // Only the accepted cell runs: qloop is not loaded in the fresh kernel.
    await page.notebook.runCell(2, { inplace: true });
    await expect
      .poll(async () =>
        ((await page.notebook.getCellTextOutput(2)) ?? []).join('')
      )
      .toBe('kept 42\n');
    expect(await standIn.requests()).toHaveLength(2);
  });
});

/** The results of the two proposals the model is sent, once it is sent them. */
async function bothResults(standIn: IStandIn): Promise<string[]> {
  await expect
    .poll(async () => (await standIn.requests()).length, { timeout: 30000 })
    .toBe(2);
  return toolResults((await standIn.requests())[1]).map(r =>
    JSON.stringify(r.content)
  );
}

test.describe('the proposals of one response', () => {
  test('wait together, in order, and Accept all keeps both', async ({
    page,
    openNotebook,
    runAll,
    saveAndRead,
    standIn
  }) => {
    await standIn.reset(PROPOSE_TWO);
    const serverPath = await openNotebook(NOTEBOOK);
    await runAll({ wait: false });
    const bars = page.locator('.qloop-proposal');
    await expect(bars).toHaveCount(2, { timeout: 60000 });
    const all = bars.first().locator('button.qloop-proposal-accept-all');
    await expect(all).toBeVisible();
    await all.click();
    await expect(bars).toHaveCount(0);
    const told = await bothResults(standIn);
    expect(told[0]).toMatch(/accepted: added cell \S+ after agent by the user/);
    expect(told[1]).toMatch(/accepted: added cell \S+ after \S+ by the user/);
    await waitForIdleKernel(page);
    const file = await saveAndRead(serverPath);
    const sources = file.cells.map(c =>
      ([] as string[]).concat(c.source ?? []).join('')
    );
    expect(sources.slice(2, 4)).toEqual(['z = 7', 'w = z + 1']);
    for (const cell of file.cells.slice(2, 4)) {
      expect(cell.metadata.qloop_provenance.agent_cell).toBe('agent');
    }
  });

  test('Reject all leaves the cells as they were, and the model reads the reason for each', async ({
    page,
    openNotebook,
    runAll,
    saveAndRead,
    standIn
  }) => {
    await standIn.reset(PROPOSE_TWO);
    const serverPath = await openNotebook(NOTEBOOK);
    await runAll({ wait: false });
    const bars = page.locator('.qloop-proposal');
    await expect(bars).toHaveCount(2, { timeout: 60000 });
    const last = bars.last();
    await last.locator('button.qloop-proposal-reject-all').click();
    await last.locator('.qloop-proposal-reason-input').fill('not now');
    await last.locator('button.qloop-proposal-confirm').click();
    await expect(bars).toHaveCount(0);
    for (const result of await bothResults(standIn)) {
      expect(result).toContain('not now');
    }
    await waitForIdleKernel(page);
    const file = await saveAndRead(serverPath);
    expect(file.cells.map(c => c.id)).toEqual(['load', 'agent', 'after']);
  });
});

/**
 * The lowest contrast ratio (WCAG) between the text of the bar's label, diff
 * lines and buttons and the first opaque background behind each.
 */
async function lowestContrast(bar: Locator): Promise<number> {
  return bar.evaluate((root: HTMLElement) => {
    // [r, g, b] in 0–255 and alpha in 0–1, from rgb()/rgba() or color(srgb …).
    const parse = (colour: string): [number[], number] => {
      const found = (colour.match(/-?[\d.]+/g) ?? []).map(Number);
      const srgb = colour.startsWith('color(');
      const rgb = found.slice(0, 3).map(v => (srgb ? v * 255 : v));
      return [rgb, found.length > 3 ? found[3] : 1];
    };
    const over = (top: number[], alpha: number, below: number[]): number[] =>
      top.map((v, i) => v * alpha + below[i] * (1 - alpha));
    // The colour behind `node`: its backgrounds composited down to an opaque one.
    const background = (node: Element | null): number[] => {
      const layers: [number[], number][] = [];
      for (let at = node; at; at = at.parentElement) {
        const [rgb, alpha] = parse(getComputedStyle(at).backgroundColor);
        if (alpha > 0) {
          layers.push([rgb, alpha]);
          if (alpha >= 1) {
            break;
          }
        }
      }
      let colour = [255, 255, 255];
      for (const [rgb, alpha] of layers.reverse()) {
        colour = over(rgb, alpha, colour);
      }
      return colour;
    };
    const luminance = (rgb: number[]): number => {
      const [R, G, B] = rgb.map(v => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
      });
      return 0.2126 * R + 0.7152 * G + 0.0722 * B;
    };
    const texts = root.querySelectorAll(
      '.qloop-proposal-label, .qloop-proposal-diff span, button'
    );
    let lowest = Infinity;
    for (const node of Array.from(texts)) {
      if (!(node as HTMLElement).offsetParent || !node.textContent?.trim()) {
        continue;
      }
      const back = background(node);
      const [fore, alpha] = parse(getComputedStyle(node).color);
      const a = luminance(over(fore, alpha, back));
      const b = luminance(back);
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      lowest = Math.min(lowest, ratio);
    }
    return lowest;
  });
}

test.describe('the proposal bar reads in every theme', () => {
  for (const theme of [...THEMES, 'JupyterLab Dark High Contrast']) {
    test(`its text keeps a contrast of at least 4.5 (${theme})`, async ({
      page,
      openNotebook,
      runAll,
      standIn
    }) => {
      await startProposing({ page, openNotebook, runAll, standIn }, theme);
      const bar = page.locator('.qloop-proposal');
      expect(await lowestContrast(bar)).toBeGreaterThanOrEqual(4.5);
      await rejectWithAReason(page, standIn);
      await waitForIdleKernel(page);
    });
  }
});

test('the bar works from the keyboard: Reject with a reason, then Accept, by Enter', async ({
  page,
  openNotebook,
  runAll,
  standIn
}) => {
  await standIn.reset(PROPOSE_TWO);
  await openNotebook(NOTEBOOK);
  await runAll({ wait: false });
  const bars = page.locator('.qloop-proposal');
  await expect(bars).toHaveCount(2, { timeout: 60000 });
  // The first: Reject, a reason typed, Enter confirms.
  const first = bars.first();
  await first.locator('button.qloop-proposal-reject').focus();
  await page.keyboard.press('Enter');
  const reason = first.locator('.qloop-proposal-reason-input');
  await expect(reason).toBeVisible();
  await reason.focus();
  await page.keyboard.type('by keyboard');
  await page.keyboard.press('Enter');
  await expect(bars).toHaveCount(1);
  // The second: Accept, focused, takes Enter.
  const accept = bars.first().locator('button.qloop-proposal-accept');
  await accept.focus();
  await expect(accept).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(bars).toHaveCount(0);
  const told = await bothResults(standIn);
  expect(told[0]).toContain('by keyboard');
  expect(told[1]).toMatch(/accepted: added cell \S+ after \S+ by the user/);
  await waitForIdleKernel(page);
});

test('a page reloaded while a proposal waits shows it again, once, and its Accept ends the wait', async ({
  page,
  openNotebook,
  reloadPage,
  runAll,
  saveAndRead,
  standIn
}) => {
  const serverPath = await startProposing({
    page,
    openNotebook,
    runAll,
    standIn
  });
  // Saved while it waits: the reloaded page finds the proposed cell in the file.
  await saveAndRead(serverPath);
  await reloadPage(serverPath);
  const bar = page.locator('.qloop-proposal');
  await expect(bar).toBeVisible({ timeout: 30000 });
  await expect(bar.locator('.qloop-proposal-diff')).toContainText(
    `+${PROPOSED}`
  );
  expect((await sources(page)).filter(s => s === PROPOSED)).toHaveLength(1);
  await bar.locator('button.qloop-proposal-accept').click();
  await expect(bar).toHaveCount(0);
  expect(await resultText(standIn)).toMatch(
    /accepted: added cell \S+ after agent by the user/
  );
  await waitForIdleKernel(page);
  const file = await saveAndRead(serverPath);
  expect(file.cells.map(c => c.id).slice(0, 2)).toEqual(['load', 'agent']);
  expect(file.cells).toHaveLength(4);
  expect(file.cells[2].metadata.qloop_proposal).toBeUndefined();
  expect(file.cells[2].metadata.qloop_provenance.agent_cell).toBe('agent');
});

test7(
  'Notebook 7: a proposed cell is accepted with an edit, at 360 px',
  async ({ notebook7, standIn }) => {
    const page = notebook7.page;
    await page.setViewportSize({ width: 360, height: 800 });
    await standIn.reset(PROPOSE);
    await notebook7.open(NOTEBOOK);
    await proposalOf(page, () => runAll7(page, { wait: false }));
    const bar = page.locator('.qloop-proposal');
    const box = await bar.boundingBox();
    expect(box!.width).toBeLessThanOrEqual(360);
    await acceptWithAnEdit(page, standIn);
    await waitForIdle7(page);
  }
);
