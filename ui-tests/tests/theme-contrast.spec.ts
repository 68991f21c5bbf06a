/**
 * Colours read in every theme: the contrast of the approval card's code
 * tokens, the status lines and the badges against their backgrounds, from
 * computed styles, in JupyterLab Light and Dark (see contrast.ts); and the
 * Dark screenshots of the card and of the transcript view for the docs.
 *
 * The card's code is the HTML `highlight()` makes (run in $PYTHON) styled by
 * the repository's labextension/style/base.css; its tokens must read at least
 * as well as the same code in one of JupyterLab's own code cells in that
 * theme (and at least the figures measured in those cells: 4.2:1 in Light,
 * 4.8:1 in Dark). Status lines and badges need 4.5:1.
 */
import * as path from 'path';

import {
  SAMPLE,
  cellCodeContrast,
  describeContrast,
  expectReadable,
  probeContrast
} from './contrast';
import {
  REPOSITORY_ROOT,
  approvalCard,
  cell,
  expect,
  test,
  waitForIdleKernel
} from './fixtures';

const DARK = 'JupyterLab Dark';

for (const theme of ['JupyterLab Light', DARK]) {
  test.describe(`theme colours (${theme})`, () => {
    test('card code, status lines and badges read well', async ({ page }) => {
      await page.theme.setTheme(theme);
      await page.notebook.createNew();
      await page.notebook.setCell(0, 'code', SAMPLE);
      await page.notebook.enterCellEditingMode(0);
      await page.notebook.leaveCellEditingMode(0);
      const cellCode = await cellCodeContrast(page);
      const probe = await probeContrast(page);
      console.log(describeContrast(theme, cellCode, probe));
      expectReadable(theme, cellCode, probe);
    });
  });
}

test.describe(`screenshots (${DARK})`, () => {
  test.beforeEach(async ({ page }) => {
    await page.theme.setTheme(DARK);
  });

  test.describe('the approval card', () => {
    // As wide as the Light screenshot of agent.spec.ts.
    test.use({ viewport: { width: 1280, height: 900 } });

    test('waits for a click in the Dark theme', async ({
      page,
      openNotebook,
      runAll,
      standIn
    }) => {
      await standIn.reset([
        {
          content: [
            { type: 'text', text: 'I will run one line.' },
            { type: 'tool_use', name: 'run_code', input: { code: 'y = 42' } }
          ]
        },
        { content: 'Done: `y` is **42**.' }
      ]);
      await openNotebook('agent_cell.ipynb');
      await runAll({ wait: false });
      const card = (await approvalCard(page, 1)).first();
      await expect(card).toBeVisible({ timeout: 60000 });
      await expect(card.locator('.qloop-code')).toHaveText('y = 42');
      await card.screenshot({
        path: path.join(REPOSITORY_ROOT, 'docs', 'approval-card-dark.png')
      });
      await card.locator('button').filter({ hasText: /^Approve$/ }).click();
      await waitForIdleKernel(page);
      await expect(card.locator('.qloop-card-decision')).toHaveText(
        '✔ approved'
      );
    });
  });

  test.describe('the transcript view', () => {
    // As tall as the Light screenshot of transcript.spec.ts.
    test.use({ viewport: { width: 1000, height: 1500 } });

    test('shows a saved turn in the Dark theme', async ({
      page,
      openNotebook
    }) => {
      await openNotebook('saved_turn.ipynb');
      const view = (await cell(page, 0)).locator('.qloop-transcript');
      await expect(view).toHaveAttribute('data-qloop-status', 'completed');
      await expect(view.locator('.qloop-tool-call')).toHaveCount(5);
      await (
        await cell(page, 0)
      ).screenshot({
        path: path.join(REPOSITORY_ROOT, 'docs', 'transcript-view-dark.png')
      });
    });
  });
});
