/**
 * The approval card is the contract, in a real browser: what runs is what the
 * card shows at the click, after an edit typed key by key; "Always allow"
 * grants the class of what ran, for the scope chosen on the card, and a grant
 * for "this notebook" is saved in the notebook, announced when it opens and
 * applied when its cells run again (here: the replay of the saved turn). The
 * edit and the 360 px page run in JupyterLab Light and Dark.
 *
 * approval_edit.ipynb: load, "%%agent Set a title.", print(title, subtitle).
 * approval_grants.ipynb: load, "%%agent Set n.", print(n).
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';

import {
  StandInItem,
  approvalCard,
  cell,
  expect,
  outputText,
  test,
  toolResults,
  waitForIdleKernel,
  waitForKernelReady
} from './fixtures';

const AGENT = 1;
const AFTER = 2;
const THEMES = ['JupyterLab Light', 'JupyterLab Dark'];

/** The model runs each of `codes` in turn, then answers. */
function script(...codes: string[]): StandInItem[] {
  return [
    ...codes.map(code => ({
      content: [{ type: 'tool_use', name: 'run_code', input: { code } }]
    })),
    { content: 'Done.' }
  ];
}

/** A button of an approval card, by its label (the icon glyph aside). */
function button(card: Locator, label: string): Locator {
  return card.locator('button').filter({ hasText: new RegExp(`^${label}$`) });
}

/** Run All and wait for the first approval card of the agent cell. */
async function firstCard(
  page: IJupyterLabPageFixture,
  runAll: (options?: { wait?: boolean }) => Promise<void>
): Promise<Locator> {
  await runAll({ wait: false });
  const card = (await approvalCard(page, AGENT)).first();
  await expect(card).toBeVisible({ timeout: 60000 });
  return card;
}

test.describe('the approval card is the contract', () => {
  test.use({ viewport: { width: 1280, height: 900 } });

  for (const theme of THEMES) {
    test(`an edit typed key by key, then Always allow, runs the edit and grants its class (${theme})`, async ({
      page,
      openNotebook,
      runAll,
      standIn
    }) => {
      await page.theme.setTheme(theme);
      await standIn.reset(
        script('title = "MODEL"', 'subtitle = title + "!"', 'del title')
      );
      await openNotebook('approval_edit.ipynb');

      const card = await firstCard(page, runAll);
      await expect(card).toContainText('title = "MODEL"');
      await expect(card.locator('.qloop-risk').first()).toHaveText('write');
      await expect(card.locator('.qloop-card-reasons')).toContainText(
        'line 1: creates title'
      );
      await expect(card.locator('select')).toHaveValue(/.+/);
      await button(card, 'Edit').click();
      const editor = card.locator('textarea');
      await expect(editor).toBeVisible();
      // One version of the code on screen: the editor replaces the model's.
      await expect(card).toContainText('editing: the text below is what runs');
      await expect(card).not.toContainText('title = "MODEL"');
      await editor.click();
      await page.keyboard.press('Control+A');
      await page.keyboard.type('title = "EDITED"');
      await button(card, 'Always allow').click();

      // The second step is 'write' too and runs under the grant; the third
      // deletes a variable, which the grant does not cover: it asks.
      const cards = await approvalCard(page, AGENT);
      await expect(cards).toHaveCount(2, { timeout: 60000 });
      await button(cards.nth(1), 'Deny').click();
      await waitForIdleKernel(page);

      await expect.poll(() => outputText(page, AFTER)).toBe('EDITED EDITED!\n');
      await expect(card.locator('.qloop-card-decision')).toHaveText(
        "✔ approved with your edits (run_code 'read' and 'write' steps always allowed for this session)"
      );
      // Folded to one line: the decision, the tool, the first line of what ran.
      const folded = card.locator('.qloop-card-folded');
      await expect(folded.locator('summary')).toHaveText(
        /^✔ approved with your edits .* · run_code · title = "EDITED" · \d+\.\d s$/
      );
      await expect(card.locator('.qloop-card-buttons')).toBeHidden();
      await expect(card.locator('textarea')).toBeHidden();
      const details = folded.locator('.qloop-card-details');
      await expect(details).toBeHidden();
      await folded.locator('summary').click();
      await expect(details).toBeVisible();
      await expect(details).toContainText(
        /your edit, which is what runs:\s*title = "EDITED"/
      );
      // The model's version is shown only as the line the edit removed.
      await expect(details.locator('.qloop-diff-del')).toHaveText(
        '-title = "MODEL"'
      );
      await expect(details.locator('.qloop-diff-add')).toHaveText(
        '+title = "EDITED"'
      );
      await expect(await cell(page, AGENT)).toContainText(
        "runs without asking: granted: run_code 'read' and 'write' steps, this session"
      );
      const requests = await standIn.requests();
      expect(requests).toHaveLength(4);
      const told = JSON.stringify(toolResults(requests[1])[0].content);
      expect(told).toContain('the user edited the input before approving');
      expect(told).toContain('EDITED');
    });
  }

  test('what is typed on the card reaches the kernel whole: two edits, a reason', async ({
    page,
    openNotebook,
    runAll,
    standIn
  }) => {
    await standIn.reset(script('title = "MODEL"', 'subtitle = "x"'));
    await openNotebook('approval_edit.ipynb');

    // Edit, leave the editor, come back and edit again: the second edit runs.
    const card = await firstCard(page, runAll);
    await button(card, 'Edit').click();
    const editor = card.locator('textarea');
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('title = "FIRST"');
    await card.locator('.qloop-card-assessment').click(); // the editor loses focus
    await expect(card).toContainText('class of your edit');
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('title = "SECOND"');
    await button(card, 'Approve').click();

    // A reason typed key by key goes to the model whole.
    const cards = await approvalCard(page, AGENT);
    await expect(cards).toHaveCount(2, { timeout: 60000 });
    const second = cards.nth(1);
    await second
      .getByPlaceholder('reason (optional, sent to the model)')
      .click();
    await page.keyboard.type('not this one');
    await button(second, 'Deny').click();
    await waitForIdleKernel(page);

    await expect(card.locator('.qloop-card-decision')).toHaveText(
      '✔ approved with your edits'
    );
    await expect(second.locator('.qloop-card-decision')).toHaveText(
      '✘ denied: not this one'
    );
    const requests = await standIn.requests();
    expect(JSON.stringify(toolResults(requests[1])[0].content)).toContain(
      'SECOND'
    );
    expect(JSON.stringify(toolResults(requests[2])[0].content)).toContain(
      'not this one'
    );
  });

  test.describe('with real kernel messages', () => {
    // Galata's kernel mock breaks on a restart.
    test.use({ kernels: null });

    test('a grant for this notebook is saved, announced on open and applied on the next run', async ({
      page,
      openNotebook,
      reloadPage,
      runAll,
      saveAndRead,
      standIn
    }) => {
      await standIn.reset(script('n = 1'));
      const serverPath = await openNotebook('approval_grants.ipynb');

      const card = await firstCard(page, runAll);
      await card.locator('select').selectOption({ label: 'for this notebook' });
      await button(card, 'Always allow').click();
      await waitForIdleKernel(page);
      await expect.poll(() => outputText(page, AFTER)).toBe('1\n');
      await expect(card.locator('.qloop-card-decision')).toContainText(
        'always allowed for this notebook'
      );

      const saved = (await saveAndRead(serverPath)).metadata.qloop_grants;
      expect(saved.grants).toMatchObject([{ tool: 'run_code', risk: 'write' }]);
      expect(saved.signature).toMatch(/^hmac-sha256:/);

      await reloadPage(serverPath);
      await expect(
        page.getByText(
          /This notebook saves approval grants: run_code 'write' steps/
        )
      ).toBeVisible();

      // A fresh kernel: Run All replays the saved turn, and the notebook's
      // grant covers its step, so no card is shown. (The reloaded page's
      // kernel answers first: a restart before can leave the page without one.)
      await waitForKernelReady(page);
      await page.menu.clickMenuItem('Kernel>Restart Kernel…');
      await page.locator('.jp-Dialog .jp-mod-accept').click();
      await waitForIdleKernel(page);
      await standIn.reset();
      await runAll();

      await expect.poll(() => outputText(page, AFTER)).toBe('1\n');
      await expect(await approvalCard(page, AGENT)).toHaveCount(0);
      const agent = await cell(page, AGENT);
      await expect(agent).toContainText("this notebook's saved grants apply");
      await expect(agent).toContainText(
        "replaying without a card: every step is covered by a grant (run_code 'read' and 'write' steps, this notebook)"
      );
      expect(await standIn.requests()).toHaveLength(0);
    });
  });

  test.describe('on a phone-sized page', () => {
    test.use({ viewport: { width: 360, height: 800 } });

    for (const theme of THEMES) {
      test(`at 360 px every control shows whole, and the decided card is one line (${theme})`, async ({
        page,
        openNotebook,
        runAll,
        standIn
      }) => {
        await page.theme.setTheme(theme);
        const long =
          'revenue_by_region = df.groupby("region")["revenue"].sum().sort_values()';
        await standIn.reset(script(long));
        await openNotebook('approval_edit.ipynb');

        await page.sidebar.close('left');
        await page.sidebar.close('right');
        const card = await firstCard(page, runAll);
        const box = await card.boundingBox();
        expect(box).not.toBeNull();
        const controls = card.locator('.qloop-card-buttons > *');
        const count = await controls.count();
        expect(count).toBeGreaterThanOrEqual(5);
        for (let i = 0; i < count; i++) {
          const control = controls.nth(i);
          const own = await control.boundingBox();
          expect(own).not.toBeNull();
          // Inside the card (the row wraps instead of cutting)...
          expect(own!.x).toBeGreaterThanOrEqual(box!.x - 1);
          expect(own!.x + own!.width).toBeLessThanOrEqual(
            box!.x + box!.width + 1
          );
          // ...and its label not cut off.
          const cut = await control.evaluate(
            node =>
              Array.from(node.querySelectorAll('button, select, input')).some(
                el => el.scrollWidth > el.clientWidth + 1
              ) && node.tagName !== 'INPUT'
          );
          expect(cut).toBe(false);
        }
        const reason = card.locator('.qloop-card-buttons input[type="text"]');
        expect((await reason.boundingBox())!.width).toBeGreaterThanOrEqual(120);
        // A long line wraps inside the box: every character is on screen.
        const pre = card.locator('.qloop-code pre');
        expect(
          await pre.evaluate(node => getComputedStyle(node).whiteSpace)
        ).toBe('pre-wrap');
        expect(
          await pre.evaluate(node => (node as HTMLElement).innerText)
        ).toBe(long);
        expect(
          await pre.evaluate(node => node.scrollWidth <= node.clientWidth + 1)
        ).toBe(true);

        await button(card, 'Approve').click();
        // (The narrow status bar hides the kernel's status: wait for the answer.)
        await expect(await cell(page, AGENT)).toContainText('Done.', {
          timeout: 60000
        });
        const summary = card.locator('.qloop-card-folded > summary');
        await expect(summary).toBeVisible();
        await expect(summary).toContainText(
          '✔ approved · run_code · revenue_by'
        );
        // One line: the summary is no taller than a line of its text.
        expect((await summary.boundingBox())!.height).toBeLessThan(30);
        expect((await card.boundingBox())!.height).toBeLessThan(40);
      });
    }
  });
});
