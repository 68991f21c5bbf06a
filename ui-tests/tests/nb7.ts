/**
 * Helpers of the Notebook 7 browser tests.
 *
 * The test server (`jupyter lab`) also serves Notebook 7, at
 * `/notebooks/<path>`. These helpers drive that page with plain Playwright
 * (its menu bar, its cells, its toolbar) and read nothing from the
 * JupyterLab shell: Notebook 7 does not expose its application object.
 * Galata's fixtures stay underneath for what does not assume the Lab shell:
 * the server folder of the test (`tmpPath`), the in-memory settings (so a
 * theme set here is never written to the user's settings on disk) and the
 * kernels the page starts, shut down when the test ends.
 *
 *   test.use({ notebook7Theme: 'JupyterLab Dark' });  // the pages' theme
 *   const serverPath = await notebook7.open('agent_cell.ipynb');
 *   await runAll(notebook7.page);                     // Run > Run All Cells
 */
import { JupyterLabPage } from '@jupyterlab/galata';
import { Locator, Page, WebSocket } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import {
  INotebookFile,
  NOTEBOOK_DIR,
  contentsUrl,
  expect,
  readNotebookWhenReadable,
  test as qloopTest
} from './fixtures';

export { expect };

/** JupyterLab's theme setting, which Notebook 7 follows. */
export const THEMES_PLUGIN = '@jupyterlab/apputils-extension:themes';

/** A Notebook 7 page of the test server. */
export interface INotebook7 {
  /** The Playwright page, without Galata's JupyterLab helpers. */
  readonly page: Page;
  /**
   * Copy `notebooks/<name>` (or write `content`) to the test's server folder
   * and open it in Notebook 7; returns its server path.
   */
  open: (name: string, content?: object) => Promise<string>;
  /**
   * Reload the page and wait for the notebook's cells and, unless `idle` is
   * false (a cell still runs), for its kernel to be idle.
   */
  reload: (options?: { idle?: boolean }) => Promise<void>;
  /** Kernel > Shut Down Kernel; returns once the page shows no kernel. */
  shutDownKernel: () => Promise<void>;
  /**
   * File > Save, then read the file from the server until `saved` holds for
   * it (the save is done); returns the file.
   */
  save: (saved: (file: INotebookFile) => boolean) => Promise<INotebookFile>;
}

interface INotebook7Fixtures {
  notebook7: INotebook7;
}

interface INotebook7Options {
  /**
   * The theme of the test's pages: JupyterLab's theme setting as a user who
   * chose it has it when the page loads (Galata keeps it in memory for the
   * page; nothing is written to the settings on disk). `open` checks the page
   * shows it. Null: JupyterLab's default.
   */
  notebook7Theme: string | null;
}

/** The notebook's cell `index`. */
export function cell(page: Page, index: number): Locator {
  return page.locator('.jp-Notebook .jp-Cell').nth(index);
}

/** A notebook of code cells with these sources. */
export function notebookOf(sources: string[]): object {
  return {
    cells: sources.map((source, index) => ({
      cell_type: 'code',
      execution_count: null,
      id: `cell-${index}`,
      metadata: {},
      outputs: [],
      source
    })),
    metadata: {
      kernelspec: {
        display_name: 'Python 3 (ipykernel)',
        language: 'python',
        name: 'python3'
      },
      language_info: { name: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** The approval cards in the outputs of cell `index`. */
export function approvalCard(page: Page, index: number): Locator {
  return cell(page, index).locator('.qloop-approval-card');
}

/** A button of an approval card, by its label (the icon glyph aside). */
export function button(card: Locator, label: string): Locator {
  return card.locator('button').filter({ hasText: new RegExp(`^${label}$`) });
}

/** What the input prompt of cell `index` shows: `' '` (never run), `'*'` (queued or running) or the count. */
export async function promptOf(page: Page, index: number): Promise<string> {
  const text = await cell(page, index).locator('.jp-InputPrompt').innerText();
  const match = /\[(.*)\]/.exec(text);
  expect(match, `input prompt "${text}"`).not.toBeNull();
  return match![1] === '' ? ' ' : match![1];
}

/** The stdout text of cell `index`, joined. */
export async function stdoutOf(page: Page, index: number): Promise<string> {
  const outputs = cell(page, index).locator(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]'
  );
  return (await outputs.allInnerTexts()).join('');
}

/** The stderr outputs (tracebacks) of cell `index`. */
export function stderrOf(page: Page, index: number): Locator {
  return cell(page, index).locator(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
  );
}

/** The marker state of cell `index`, with the badge text the stylesheet shows. */
export async function markerOf(
  page: Page,
  index: number
): Promise<{ marked: boolean; status: string | null; badge: string }> {
  return cell(page, index).evaluate(node => {
    const wrapper = node.querySelector('.jp-Cell-inputWrapper');
    const content = wrapper
      ? getComputedStyle(wrapper, '::after').content
      : 'none';
    return {
      marked: node.classList.contains('qloop-agent-cell'),
      status: node.getAttribute('data-qloop-status'),
      badge: content === 'none' ? '' : JSON.parse(content)
    };
  });
}

/**
 * The contrast ratio of the marker badge of cell `index` (its text and
 * background are those of a pseudo-element, which `minContrast` cannot see).
 */
export async function markerContrast(
  page: Page,
  index: number
): Promise<number> {
  return cell(page, index)
    .locator('.jp-Cell-inputWrapper')
    .evaluate(wrapper => {
      const canvas = document.createElement('canvas');
      canvas.width = canvas.height = 1;
      const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
      const rgba = (css: string): number[] => {
        ctx.clearRect(0, 0, 1, 1);
        ctx.fillStyle = '#000';
        ctx.fillStyle = css;
        ctx.fillRect(0, 0, 1, 1);
        const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
        return [r, g, b, a / 255];
      };
      const over = (top: number[], under: number[]): number[] =>
        [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
      // The badge's own background over the first opaque one under it.
      let under = [255, 255, 255];
      for (
        let node: Element | null = wrapper;
        node;
        node = node.parentElement
      ) {
        const colour = rgba(getComputedStyle(node).backgroundColor);
        if (colour[3] >= 1) {
          under = colour;
          break;
        }
      }
      const badge = getComputedStyle(wrapper, '::after');
      const bg = over(rgba(badge.backgroundColor), under);
      const fg = over(rgba(badge.color), bg);
      const luminance = (c: number[]): number => {
        const [r, g, b] = c.map(v => {
          const s = v / 255;
          return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
      return (hi + 0.05) / (lo + 0.05);
    });
}

/** Wait until the notebook's kernel has nothing left to run. */
export async function waitForIdleKernel(page: Page): Promise<void> {
  await expect(page.locator('.jp-Notebook-ExecutionIndicator')).toHaveAttribute(
    'data-status',
    'idle',
    { timeout: 60000 }
  );
}

/** Click `item` in the menu `menu` of Notebook 7's menu bar. */
export async function clickMenu(
  page: Page,
  menu: string,
  item: string
): Promise<void> {
  await page
    .locator('.lm-MenuBar-item')
    .filter({ has: page.locator('.lm-MenuBar-itemLabel', { hasText: menu }) })
    .first()
    .click();
  await page
    .locator('.lm-Menu:visible .lm-Menu-item')
    .filter({
      has: page.locator('.lm-Menu-itemLabel', {
        hasText: new RegExp(`^${item}$`)
      })
    })
    .click();
}

/**
 * Run > Run All Cells: returns while a cell blocks; `wait` (the default)
 * then waits until the kernel is idle again.
 */
export async function runAll(
  page: Page,
  options: { wait?: boolean } = {}
): Promise<void> {
  await clickMenu(page, 'Run', 'Run All Cells');
  if (options.wait ?? true) {
    await waitForIdleKernel(page);
  }
}

/** The Notebook 7 URL of a server path. */
function notebookUrl(serverPath: string): string {
  return `/notebooks/${serverPath.split('/').map(encodeURIComponent).join('/')}`;
}

/**
 * Resolves once a kernel connection of `page` receives a kernel_info_reply:
 * from then on the page's kernel runs what it is sent. (The toolbar's kernel
 * indicator says "idle" before the page has any kernel, and a cell run before
 * the kernel answers may be dropped: jupyterlab/jupyterlab#15420.) Call it
 * before the page loads.
 */
function kernelInfoReceived(page: Page): Promise<void> {
  return new Promise(resolve => {
    const listen = (socket: WebSocket) => {
      if (!/\/api\/kernels\/[^/]+\/channels/.test(socket.url())) {
        return;
      }
      socket.on('framereceived', frame => {
        if (frame.payload.toString().includes('kernel_info_reply')) {
          page.off('websocket', listen);
          resolve();
        }
      });
    };
    page.on('websocket', listen);
  });
}

/**
 * Load the page with `load`, then wait for the notebook's cells, its kernel's
 * answer and, if `idle`, for the kernel to be idle.
 */
async function loadNotebook(
  page: Page,
  load: () => Promise<unknown>,
  idle = true
): Promise<void> {
  const connected = kernelInfoReceived(page);
  await load();
  await page
    .locator('.jp-Notebook .jp-Cell')
    .first()
    .waitFor({ timeout: 60000 });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error('the kernel did not answer the page in 60 s')),
      60000
    );
  });
  await Promise.race([connected, late]).finally(() => clearTimeout(timer));
  if (idle) {
    await waitForIdleKernel(page);
  }
}

export const test = qloopTest.extend<INotebook7Fixtures & INotebook7Options>({
  // The fixtures open Notebook 7 pages themselves, not JupyterLab's.
  autoGoto: false,
  notebook7Theme: [null, { option: true }],
  // The theme is among the settings the page reads as it loads: the page opens
  // in it, as a user's page opens in the theme they chose.
  mockSettings: async ({ mockSettings, notebook7Theme }, use) => {
    if (!notebook7Theme || !mockSettings) {
      await use(mockSettings);
      return;
    }
    const settings = mockSettings === true ? {} : mockSettings;
    await use({
      ...settings,
      [THEMES_PLUGIN]: {
        ...(settings[THEMES_PLUGIN] as object | undefined),
        theme: notebook7Theme
      }
    });
  },
  notebook7: async ({ page, request, tmpPath, notebook7Theme }, use) => {
    const raw = (page as unknown as JupyterLabPage).page;
    await use({
      page: raw,
      open: async (name, content) => {
        const serverPath = `${tmpPath}/${name}`;
        const body =
          content ??
          JSON.parse(fs.readFileSync(path.join(NOTEBOOK_DIR, name), 'utf-8'));
        const response = await request.put(contentsUrl(serverPath), {
          data: { type: 'notebook', format: 'json', content: body }
        });
        expect(response.ok(), await response.text()).toBe(true);
        await loadNotebook(raw, () => raw.goto(notebookUrl(serverPath)));
        if (notebook7Theme) {
          await expect(raw.locator('body')).toHaveAttribute(
            'data-jp-theme-name',
            notebook7Theme
          );
        }
        return serverPath;
      },
      reload: async (options = {}) => {
        await loadNotebook(raw, () => raw.reload(), options.idle ?? true);
      },
      shutDownKernel: async () => {
        await clickMenu(raw, 'Kernel', 'Shut Down Kernel');
        await expect(raw.locator('.jp-KernelName')).toHaveText('No Kernel');
      },
      save: async saved => {
        const serverPath = decodeURIComponent(
          new URL(raw.url()).pathname.replace(/^\/notebooks\//, '')
        );
        await clickMenu(raw, 'File', 'Save Notebook');
        let file: INotebookFile | null = null;
        // What is awaited may reach the page's model after a save on a busy
        // machine: a check that fails saves again before the next one.
        await expect
          .poll(
            async () => {
              file = await readNotebookWhenReadable(request, serverPath);
              const ok = file !== null && saved(file);
              if (!ok) {
                await clickMenu(raw, 'File', 'Save Notebook');
              }
              return ok;
            },
            { timeout: 30000 }
          )
          .toBe(true);
        return file!;
      }
    });
  }
});
