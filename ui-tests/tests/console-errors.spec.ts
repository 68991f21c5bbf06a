/**
 * The extension logs no error while a notebook opens and while its cells are
 * deleted: agent cells with a transcript view, and a plain cell.
 *
 * mirror.ipynb: four code cells, the first three with a saved transcript in
 * an output.
 */
import { ConsoleMessage, Page } from '@playwright/test';

import { expect, test } from './fixtures';

/** Every error the page logs or throws from now on, as text with its source. */
function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message: ConsoleMessage) => {
    if (message.type() === 'error') {
      const { url, lineNumber } = message.location();
      errors.push(`${message.text()} (${url}:${lineNumber})`);
    }
  });
  page.on('pageerror', error => errors.push(error.stack ?? String(error)));
  return errors;
}

test('opening a notebook and deleting its cells logs no error', async ({
  page,
  openNotebook
}) => {
  const errors = collectErrors(page);
  await openNotebook('mirror.ipynb');
  const cells = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell');
  await expect(cells).toHaveCount(4);
  // The transcript views have rendered: the cells' clean-up has views to let go.
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .qloop-transcript')
  ).not.toHaveCount(0);

  // The second cell (a transcript), then the last one (plain), one at a time.
  for (const [index, left] of [
    [1, 3],
    [2, 2]
  ]) {
    await page.notebook.selectCells(index);
    await page.notebook.deleteCells();
    await expect(cells).toHaveCount(left);
  }
  // Handlers that run after a deletion (timers, signals) have had their turn.
  await page.waitForTimeout(500);
  expect(errors).toEqual([]);
});
