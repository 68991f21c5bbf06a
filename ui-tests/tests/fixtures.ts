/**
 * Fixtures and helpers shared by the qloop-kernel browser tests.
 *
 * A spec imports `test` and `expect` from here instead of from Galata:
 *
 *   const path = await openNotebook('saved_turn.ipynb');  // a fresh copy, opened
 *   await runAll();                                        // Run > Run All Cells
 *   const file = await saveAndRead(path);                  // the .ipynb on disk
 *   await standIn.reset([reply]);                          // what the "model" answers
 */
import {
  expect,
  IJupyterLabPageFixture,
  JupyterLabPage,
  test as galataTest
} from '@jupyterlab/galata';
import { APIRequestContext, Locator } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

export { expect };

/** The notebooks the specs open, copied into the test's server folder. */
export const NOTEBOOK_DIR = path.resolve(__dirname, '..', 'notebooks');
export const REPOSITORY_ROOT = path.resolve(__dirname, '..', '..');

/** The parts of an .ipynb file the specs look at. */
export interface INotebookFile {
  cells: {
    id: string;
    cell_type: string;
    source?: string | string[];
    metadata: Record<string, any>;
    outputs?: { output_type: string; data?: Record<string, any> }[];
  }[];
  metadata: Record<string, any>;
}

/** What the marker of a cell shows. */
export interface IMarker {
  marked: boolean;
  status: string | null;
  badge: string;
}

/** One item of a stand-in script, in its JSON form (see docs/testing.md). */
export type StandInItem = Record<string, unknown>;

/** The model asks to run `code`, then ends the turn with `answer`. */
export function runCodeScript(code: string, answer: string): StandInItem[] {
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

/** One entry of the stand-in's request log (`GET /_qloop/requests`). */
export interface IStandInRequest {
  method: string;
  path: string;
  body: { messages?: { role: string; content: any }[] } & Record<string, any>;
  status: number | null;
  error: string | null;
}

/** The Messages API stand-in the kernels of the test server call. */
export interface IStandIn {
  /** Its base URL, `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** Start afresh: serve `script`, with an empty request log. */
  reset: (script?: StandInItem[]) => Promise<void>;
  /** The requests received since the last reset, oldest first. */
  requests: () => Promise<IStandInRequest[]>;
}

interface IQloopFixtures {
  /** Copy `notebooks/<name>` to the test's server folder and open it; returns its server path. */
  openNotebook: (name: string) => Promise<string>;
  /** Save the active notebook and return the file as the server stores it. */
  saveAndRead: (serverPath: string) => Promise<INotebookFile>;
  /** Reload the page; the restored layout shows the notebook at `serverPath` again. */
  reloadPage: (serverPath: string) => Promise<void>;
  /**
   * Run every cell through the menu (Run > Run All Cells), which, unlike
   * `page.notebook.run()`, returns while a cell blocks; `wait` (the default)
   * then waits until the kernel is idle again.
   */
  runAll: (options?: { wait?: boolean }) => Promise<void>;
  /** The Messages API stand-in, reset to an empty script for the test. */
  standIn: IStandIn;
}

/** Read a notebook file through the server's contents API. */
export async function readNotebook(
  request: APIRequestContext,
  serverPath: string
): Promise<INotebookFile> {
  const file = await readNotebookWhenReadable(request, serverPath);
  expect(file, `the contents API reads ${serverPath}`).not.toBeNull();
  return file!;
}

/** The contents API's URL of a file on the server. */
export function contentsUrl(serverPath: string): string {
  return `/api/contents/${serverPath.split('/').map(encodeURIComponent).join('/')}`;
}

/**
 * Read a notebook file that may be in the middle of a write: `null` when the
 * contents API does not answer ok, for a poll to try again.
 */
export async function readNotebookWhenReadable(
  request: APIRequestContext,
  serverPath: string
): Promise<INotebookFile | null> {
  const response = await request.get(
    `${contentsUrl(serverPath)}?content=1&type=notebook`
  );
  if (!response.ok()) {
    return null;
  }
  return (await response.json()).content as INotebookFile;
}

/**
 * The notebook file in the server's folder as it is on disk now, or `null`
 * while it is missing or half written, for a poll to try again. Text split in
 * lines on disk is joined as the contents API joins it (a cell's source, a
 * stream's text, the non-JSON values of an output's data).
 *
 * For polls while a collaborative server saves the file: a contents API read
 * that meets a half-written file puts the server's copy from before the save
 * back over it (jupyter_server's recovery of atomic writes), and one that races
 * the end of that save can leave no file at all. Reading the disk changes
 * nothing.
 */
export function readNotebookOnDisk(serverPath: string): INotebookFile | null {
  const root = process.env.JUPYTERLAB_GALATA_ROOT_DIR;
  expect(root, 'JUPYTERLAB_GALATA_ROOT_DIR is not set').toBeTruthy();
  let file: INotebookFile;
  try {
    file = JSON.parse(fs.readFileSync(path.join(root!, serverPath), 'utf-8'));
  } catch {
    return null;
  }
  if (!Array.isArray(file?.cells)) {
    return null;
  }
  const joined = (value: unknown): unknown =>
    Array.isArray(value) ? value.join('') : value;
  for (const cell of file.cells) {
    cell.source = joined(cell.source) as string;
    for (const output of (cell.outputs ?? []) as Record<string, any>[]) {
      if ('text' in output) {
        output.text = joined(output.text);
      }
      for (const mime of Object.keys(output.data ?? {})) {
        if (!mime.endsWith('json')) {
          output.data[mime] = joined(output.data[mime]);
        }
      }
    }
  }
  return file;
}

/** Wait until the active notebook's kernel has nothing left to run. */
export async function waitForIdleKernel(
  page: IJupyterLabPageFixture
): Promise<void> {
  await expect(
    page.locator(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator'
    )
  ).toHaveAttribute('data-status', 'idle', { timeout: 60000 });
}

/**
 * Wait until the active notebook has a kernel that answered the page and is
 * idle. (The execution indicator says "idle" before the page has a kernel:
 * a page just reloaded must not restart or run anything before this.)
 */
export async function waitForKernelReady(
  page: IJupyterLabPageFixture
): Promise<void> {
  await expect
    .poll(
      () =>
        page.evaluate(() => {
          const panel = (window as any).jupyterapp.shell.currentWidget;
          const kernel = panel?.sessionContext?.session?.kernel;
          return kernel ? `${kernel.connectionStatus} ${kernel.status}` : '';
        }),
      { timeout: 60000 }
    )
    .toBe('connected idle');
}

/** The locator of cell `index` in the active notebook. */
export async function cell(
  page: IJupyterLabPageFixture,
  index: number
): Promise<Locator> {
  const locator = await page.notebook.getCellLocator(index);
  expect(locator).not.toBeNull();
  return locator!;
}

/** The marker state of cell `index`, including the badge text the stylesheet shows. */
export async function markerOf(
  page: IJupyterLabPageFixture,
  index: number
): Promise<IMarker> {
  return (await cell(page, index)).evaluate(node => {
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

/** Whether the active notebook has unsaved changes. */
export async function isDirty(page: IJupyterLabPageFixture): Promise<boolean> {
  return page.evaluate(() => {
    const widget = (window as any).jupyterapp.shell.currentWidget;
    return widget.context.model.dirty as boolean;
  });
}

/**
 * File > Reload Notebook from Disk, confirming when there are unsaved
 * changes; returns once the notebook model holds the cells read from disk.
 */
export async function reloadFromDisk(
  page: IJupyterLabPageFixture
): Promise<void> {
  const confirm = await isDirty(page);
  await page.evaluate(() => {
    const model = (window as any).jupyterapp.shell.currentWidget.context.model;
    (window as any).qloopCellBeforeReload = model.cells.get(0);
  });
  await page.menu.clickMenuItem('File>Reload Notebook from Disk');
  if (confirm) {
    await page.locator('.jp-Dialog .jp-mod-accept').click();
  }
  await expect
    .poll(() =>
      page.evaluate(() => {
        const model = (window as any).jupyterapp.shell.currentWidget.context
          .model;
        return model.cells.get(0) !== (window as any).qloopCellBeforeReload;
      })
    )
    .toBe(true);
}

/** The execution count of cell `index` in the active notebook (null: not run). */
export async function executionCount(
  page: IJupyterLabPageFixture,
  index: number
): Promise<number | null> {
  return page.evaluate(
    i =>
      (window as any).jupyterapp.shell.currentWidget.content.widgets[i].model
        .executionCount as number | null,
    index
  );
}

/** The approval card in the outputs of cell `index`. */
export async function approvalCard(
  page: IJupyterLabPageFixture,
  index: number
): Promise<Locator> {
  return (await cell(page, index)).locator('.qloop-approval-card');
}

/** The tool results in the newest message of a request to the stand-in. */
export function toolResults(request: IStandInRequest): Record<string, any>[] {
  const messages = request.body.messages ?? [];
  const content = messages[messages.length - 1]?.content;
  return Array.isArray(content)
    ? content.filter(block => block.type === 'tool_result')
    : [];
}

/** The plain-text outputs of cell `index`, joined. */
export async function outputText(
  page: IJupyterLabPageFixture,
  index: number
): Promise<string> {
  return ((await page.notebook.getCellTextOutput(index)) ?? []).join('');
}

/** The version in the extension's package.json, which `hello` must report. */
export function extensionVersion(): string {
  const file = path.join(REPOSITORY_ROOT, 'labextension', 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf-8')).version;
}

/** Talk to the stand-in's control endpoints at `url`. */
function connectStandIn(request: APIRequestContext, url: string): IStandIn {
  return {
    url,
    reset: async (script = []) => {
      const response = await request.post(`${url}/_qloop/reset`, {
        data: script
      });
      expect(response.ok(), await response.text()).toBe(true);
    },
    requests: async () => {
      const response = await request.get(`${url}/_qloop/requests`);
      expect(response.ok()).toBe(true);
      return (await response.json()) as IStandInRequest[];
    }
  };
}

/** Bring the open notebook at `serverPath` to the front and wait for its cells. */
async function showNotebook(
  page: IJupyterLabPageFixture,
  serverPath: string
): Promise<void> {
  expect(await page.notebook.activate(path.basename(serverPath))).toBe(true);
  await page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')
    .first()
    .waitFor();
}

export const test = galataTest.extend<IQloopFixtures>({
  openNotebook: async ({ page, tmpPath }, use) => {
    await use(async name => {
      const serverPath = `${tmpPath}/${name}`;
      await page.contents.uploadFile(path.join(NOTEBOOK_DIR, name), serverPath);
      expect(await page.notebook.openByPath(serverPath)).toBe(true);
      await showNotebook(page, serverPath);
      return serverPath;
    });
  },
  reloadPage: async ({ page }, use) => {
    await use(async serverPath => {
      // Galata's readiness check expects the Launcher in front, not the
      // restored notebook. (The fixture's type shows Playwright's `reload`.)
      await (page as unknown as JupyterLabPage).reload({
        waitForIsReady: false
      });
      await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
      await expect
        .poll(() => page.notebook.isOpen(path.basename(serverPath)))
        .toBe(true);
      await showNotebook(page, serverPath);
    });
  },
  saveAndRead: async ({ page, request }, use) => {
    await use(async serverPath => {
      expect(await page.notebook.save()).toBe(true);
      await expect.poll(() => isDirty(page)).toBe(false);
      return readNotebook(request, serverPath);
    });
  },
  runAll: async ({ page }, use) => {
    await use(async (options = {}) => {
      await page.menu.clickMenuItem('Run>Run All Cells');
      if (options.wait ?? true) {
        await waitForIdleKernel(page);
      }
    });
  },
  standIn: async ({ request }, use) => {
    // Set from the stand-in's first line of output (see playwright.config.js).
    const url = process.env.QLOOP_STANDIN_URL;
    expect(url, 'QLOOP_STANDIN_URL is not set').toBeTruthy();
    const standIn = connectStandIn(request, url!);
    await standIn.reset();
    await use(standIn);
  }
});
