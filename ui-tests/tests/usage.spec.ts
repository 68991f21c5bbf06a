/**
 * The usage panel, opened from the command palette ("Show qloop usage") in
 * JupyterLab (Light and Dark, with the docs' screenshots) and in Notebook 7
 * (Dark, in its side panel): the figures of a ledger two kernels wrote, by
 * day, notebook and model, the lines that could not be read, the no-cap
 * line; ledger text shown as text; the text reads well in both themes.
 *
 * The server and its kernels keep their ledger in $QLOOP_UI_USAGE_FILE
 * (playwright.config.js); this spec writes it.
 */
import * as fs from 'fs';
import * as path from 'path';

import { Page } from '@playwright/test';

import { minContrast } from './contrast';
import { REPOSITORY_ROOT, expect, test as labTest } from './fixtures';
import { notebookOf, test as nb7Test } from './nb7';

const DAY_MS = 24 * 3600 * 1000;
const TODAY = new Date().toISOString().slice(0, 10);
const YESTERDAY = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const ODD_NAME = 'q3/<b>bold</b>.ipynb';

function call(
  day: string,
  notebook: string,
  session: string,
  model: string,
  cost: number | null,
  steps: number
): string {
  return JSON.stringify({
    day,
    at: `${day}T10:00:00+00:00`,
    model,
    notebook,
    session,
    cost_usd: cost,
    steps,
    input_tokens: 1200,
    output_tokens: 300,
    cache_read_input_tokens: 4000,
    cache_creation_input_tokens: 500
  });
}

/** Two kernels' calls (sales.ipynb, and a notebook named like HTML), and two lines no kernel writes. */
function writeLedger(): void {
  const ledger = process.env.QLOOP_UI_USAGE_FILE;
  expect(ledger, 'QLOOP_UI_USAGE_FILE is not set').toBeTruthy();
  const lines = [
    call(YESTERDAY, 'sales.ipynb', 's1', 'claude-sonnet-5-5', 0.5, 3),
    call(TODAY, 'sales.ipynb', 's1', 'claude-haiku-5-5', 0.125, 1),
    call(TODAY, ODD_NAME, 's2', 'claude-sonnet-5-5', 0.25, 2),
    call(TODAY, ODD_NAME, 's2', 'claude-haiku-5-5', null, 0),
    '{"day": "2026-12-0',
    'not a line of the ledger'
  ];
  fs.writeFileSync(ledger!, lines.join('\n') + '\n');
}

/** Run "Show qloop usage" from the command palette; the panel once it shows the report. */
async function openFromPalette(
  page: Page
): Promise<ReturnType<Page['locator']>> {
  await page.keyboard.press('Control+Shift+C');
  const input = page.locator('.lm-CommandPalette-input:visible');
  await input.fill('Show qloop usage');
  await page
    .locator('.lm-CommandPalette-item:visible', { hasText: 'Show qloop usage' })
    .click();
  const panel = page.locator('.qloop-usage');
  await expect(panel).toHaveAttribute('data-qloop-usage-state', 'ready');
  return panel;
}

/** The figures of the ledger, as the panel shows them, and its text's contrast. */
async function checkFigures(
  page: Page,
  panel: ReturnType<Page['locator']>
): Promise<void> {
  await expect(panel.locator('.qloop-usage-totals')).toContainText(
    '$0.8750 + 1 unpriced over 4 model calls and 6 steps; 4,800 input, 1,200 output, 16,000 cache read and 2,000 cache write tokens.'
  );
  const byNotebook = panel.locator('.qloop-usage-by-notebook tbody tr');
  await expect(byNotebook.locator('th')).toHaveText([
    ODD_NAME,
    'sales.ipynb',
    'Total'
  ]);
  await expect(byNotebook.nth(0).locator('td').first()).toHaveText(
    '$0.2500 + 1 unpriced'
  );
  await expect(panel.locator('b')).toHaveCount(0); // the name is text
  await expect(panel.locator('.qloop-usage-by-day tbody tr th')).toHaveText([
    YESTERDAY,
    TODAY,
    'Total'
  ]);
  await expect(
    panel.locator('.qloop-usage-by-model tbody tr').nth(1).locator('td')
  ).toHaveText(['$0.7500', '2', '5', '2,400', '600', '8,000', '1,000']);
  await expect(panel.locator('.qloop-usage-unreadable')).toHaveText(
    '2 lines of the ledger could not be read (skipped).'
  );
  await expect(panel.locator('.qloop-usage-cap')).toHaveText(
    'No daily spend cap is set by the admin.'
  );
  const contrast = await minContrast(
    page,
    '.qloop-usage',
    'th, td, caption, p, option, button'
  );
  expect(contrast.min, `worst: ${contrast.worst}`).toBeGreaterThanOrEqual(4.5);
}

labTest.describe('the usage panel in JupyterLab', () => {
  labTest.use({ viewport: { width: 1280, height: 800 } });

  for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
    labTest(`shows the ledger's figures (${theme})`, async ({ page }) => {
      writeLedger();
      await page.theme.setTheme(theme);
      const panel = await openFromPalette(page);
      await checkFigures(page, panel);
      // The days selector and Refresh ask again.
      await panel.locator('.qloop-usage-days').selectOption('7');
      await expect(panel.locator('.qloop-usage-totals')).toContainText(
        'Last 7 days'
      );
      await panel.locator('.qloop-usage-days').selectOption('30');
      await expect(panel.locator('.qloop-usage-totals')).toContainText(
        'Last 30 days'
      );
      const name = theme.endsWith('Dark')
        ? 'usage-dark.png'
        : 'usage-light.png';
      await panel.screenshot({
        path: path.join(REPOSITORY_ROOT, 'docs', name)
      });
    });
  }
});

nb7Test.describe('the usage panel in Notebook 7', () => {
  nb7Test.use({ notebook7Theme: 'JupyterLab Dark' });

  nb7Test(
    'shows the ledger beside the notebook (Dark)',
    async ({ notebook7 }) => {
      writeLedger();
      await notebook7.open('usage.ipynb', notebookOf(['1 + 1']));
      const panel = await openFromPalette(notebook7.page);
      await checkFigures(notebook7.page, panel);
      // Beside the notebook, which keeps the main area.
      const notebook = notebook7.page.locator('.jp-Notebook');
      const [left, right] = [
        await notebook.boundingBox(),
        await panel.boundingBox()
      ];
      expect(right!.x).toBeGreaterThanOrEqual(left!.x + left!.width - 1);
    }
  );
});
