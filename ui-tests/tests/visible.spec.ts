/**
 * Every character that will run is on the card, or a visible mark for it, in
 * JupyterLab Light and Dark, on a 360 px page and a full-width one: the
 * received card of an edited record (its hidden-tail step and the saved
 * messages it adopts), the live card of a step with the hidden tail, a
 * 5,000-character line and invisible and mixed-script names, and the
 * transcript view, which shows the step the card will run. What is read is
 * what a person sees (innerText), and nothing may be cut off.
 * The notebook and the expected text: visible.ts.
 */
import * as path from 'path';

import { approvalCard, cell, expect, test } from './fixtures';
import {
  LIVE,
  RECEIVED,
  SHOTS,
  THEMES,
  WIDTHS,
  expectLiveCard,
  expectReceivedCard,
  expectTranscriptShowsSavedRecord,
  liveScript,
  makeCase
} from './visible';

const EXPECTED = makeCase();

for (const theme of THEMES) {
  for (const width of WIDTHS) {
    test.describe(`JupyterLab, ${theme}, ${width} px`, () => {
      test.use({ viewport: { width, height: 900 } });

      test('the received card, the live card and the transcript view show every character', async ({
        page,
        runAll,
        standIn,
        tmpPath
      }) => {
        await page.theme.setTheme(theme);
        await standIn.reset(liveScript());
        const serverPath = `${tmpPath}/visible.ipynb`;
        expect(
          await page.contents.uploadContent(
            JSON.stringify(EXPECTED.notebook),
            'text',
            serverPath
          )
        ).toBe(true);
        expect(await page.notebook.openByPath(serverPath)).toBe(true);
        expect(await page.notebook.activate('visible.ipynb')).toBe(true);
        if (width < 600) {
          await page.sidebar.close('left');
          await page.sidebar.close('right');
        }
        const view = (await cell(page, RECEIVED)).locator('.qloop-transcript');
        await expect(view).toBeVisible();
        await expectTranscriptShowsSavedRecord(page, view, EXPECTED);

        await runAll({ wait: false });
        const received = (await approvalCard(page, RECEIVED)).first();
        await expect(received).toBeVisible({ timeout: 60000 });
        await expectReceivedCard(page, received, EXPECTED);
        await received.locator('.qloop-card-adopted summary').click();
        await received.scrollIntoViewIfNeeded();
        await received.screenshot({
          path: path.join(
            SHOTS,
            `lab-${theme.replace(/ /g, '-')}-${width}-received.png`
          )
        });
        await received
          .locator('button')
          .filter({ hasText: /^Deny$/ })
          .click();

        const live = (await approvalCard(page, LIVE)).first();
        await expect(live).toBeVisible({ timeout: 60000 });
        await expectLiveCard(page, live, EXPECTED);
        // The end of the card: the invisible and mixed-script names.
        await live.locator('.qloop-card-confusable').scrollIntoViewIfNeeded();
        await page.screenshot({
          path: path.join(
            SHOTS,
            `lab-${theme.replace(/ /g, '-')}-${width}-live-end.png`
          )
        });
        await live
          .locator('button')
          .filter({ hasText: /^Deny$/ })
          .click();
        await expect(live.locator('.qloop-card-decision')).toContainText(
          'denied'
        );
      });
    });
  }
}
