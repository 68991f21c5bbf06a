/**
 * Every character that will run is on the card, or a visible mark for it, in
 * Notebook 7, Light and Dark, on a 360 px page and a full-width one: the same
 * notebook and checks as visible.spec.ts (JupyterLab), in Notebook 7's page.
 */
import * as path from 'path';

import { approvalCard, button, cell, expect, runAll, test } from './nb7';
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
    test.describe(`Notebook 7, ${theme}, ${width} px`, () => {
      test.use({ notebook7Theme: theme, viewport: { width, height: 900 } });

      test('the received card, the live card and the transcript view show every character', async ({
        notebook7,
        standIn
      }) => {
        const page = notebook7.page;
        await standIn.reset(liveScript());
        await notebook7.open('visible.ipynb', EXPECTED.notebook);
        const view = cell(page, RECEIVED).locator('.qloop-transcript');
        await expect(view).toBeVisible();
        await expectTranscriptShowsSavedRecord(page, view, EXPECTED);

        await runAll(page, { wait: false });
        const received = approvalCard(page, RECEIVED).first();
        await expect(received).toBeVisible({ timeout: 60000 });
        await expectReceivedCard(page, received, EXPECTED);
        await received.locator('.qloop-card-adopted summary').click();
        await received.scrollIntoViewIfNeeded();
        await received.screenshot({
          path: path.join(
            SHOTS,
            `nb7-${theme.replace(/ /g, '-')}-${width}-received.png`
          )
        });
        await button(received, 'Deny').click();

        const live = approvalCard(page, LIVE).first();
        await expect(live).toBeVisible({ timeout: 60000 });
        await expectLiveCard(page, live, EXPECTED);
        await button(live, 'Deny').click();
        await expect(live.locator('.qloop-card-decision')).toContainText(
          'denied'
        );
      });
    });
  }
}
