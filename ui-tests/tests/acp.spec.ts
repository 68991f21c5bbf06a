/**
 * The agent chat panel ("Open agent chat"), with the scripted ACP agent the
 * test server declares (jupyter_server_test_config.py, tests/acp_agent.py):
 * in JupyterLab (Light and Dark, with the docs' screenshots) a chat whose
 * answer is rendered Markdown with its plan, a file write asked on two cards
 * (the agent's own permission request, then qloop's for the write) and
 * approved, and Stop; in Notebook 7 the panel beside the notebook, a chat and
 * a card denied with a reason that reaches the agent. A reloaded page goes on
 * with the chat open on the server.
 */
import * as path from 'path';

import { Locator, Page } from '@playwright/test';

import { minContrast } from './contrast';
import { REPOSITORY_ROOT, expect, test as labTest } from './fixtures';
import { button, notebookOf, test as nb7Test } from './nb7';

/** Run "Open agent chat" from the palette and start a chat with the scripted agent. */
async function openChat(page: Page): Promise<Locator> {
  await page.keyboard.press('Control+Shift+C');
  await page
    .locator('.lm-CommandPalette-input:visible')
    .fill('Open agent chat');
  await page
    .locator('.lm-CommandPalette-item:visible', { hasText: 'Open agent chat' })
    .click();
  const panel = page.locator('.qloop-acp');
  await expect(panel.locator('.qloop-acp-agents option')).toHaveText([
    'Scripted'
  ]);
  await panel.locator('.qloop-acp-start').click();
  await expect(panel).toHaveAttribute('data-qloop-acp-state', 'idle');
  return panel;
}

async function send(panel: Locator, text: string): Promise<void> {
  await panel.locator('.qloop-acp-prompt').fill(text);
  await panel.locator('.qloop-acp-send').click();
}

labTest.describe('the agent chat in JupyterLab', () => {
  labTest.use({ viewport: { width: 1280, height: 800 } });

  for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
    labTest(`chats, asks on cards and stops (${theme})`, async ({ page }) => {
      await page.theme.setTheme(theme);
      const panel = await openChat(page);
      await send(panel, 'hello world');
      const answer = panel.locator('.qloop-acp-agent').last();
      await expect(answer.locator('strong')).toHaveText('hello world');
      await expect(panel.locator('.qloop-acp-plan li')).toHaveText([
        'read the question',
        'answer it'
      ]);

      await send(panel, 'write acp-note.txt a note');
      const card = panel.locator('.qloop-outside').first();
      await expect(card).toContainText('ACP agent Scripted');
      await button(card, 'Approve').click();
      await expect(card).toContainText('fs/write_text_file');
      await expect(card).toContainText('external');
      const contrast = await minContrast(
        page,
        '.qloop-acp-log',
        'div, span, li, strong'
      );
      expect(contrast.min, `worst: ${contrast.worst}`).toBeGreaterThanOrEqual(
        4.5
      );
      const shot = theme.endsWith('Dark') ? 'acp-dark.png' : 'acp-light.png';
      await panel.screenshot({
        path: path.join(REPOSITORY_ROOT, 'docs', shot)
      });
      await button(card, 'Approve').click();
      await expect(panel.locator('.qloop-acp-agent').last()).toContainText(
        'wrote acp-note.txt'
      );
      await expect(panel.locator('.qloop-acp-decision').last()).toHaveText(
        'fs/write_text_file: approved by the user'
      );

      await send(panel, 'slow');
      await expect(panel.locator('.qloop-acp-agent').last()).toHaveText(
        'working slowly'
      );
      await panel.locator('.qloop-acp-stop-button').click();
      await expect(panel.locator('.qloop-acp-stop').last()).toHaveText(
        'Turn ended: cancelled'
      );
      await expect(panel).toHaveAttribute('data-qloop-acp-state', 'idle');
    });
  }
});

labTest('a reloaded page goes on with the open chat', async ({ page }) => {
  // A chat with a finished turn is open on the server; after a reload the
  // panel replays it, and a new chat started at once is not fed by it.
  let panel = await openChat(page);
  await send(panel, 'an earlier chat');
  await expect(panel).toHaveAttribute('data-qloop-acp-state', 'idle');
  await expect(panel.locator('.qloop-acp-agent strong')).toHaveText(
    'an earlier chat'
  );
  await page.reload();
  panel = await openChat(page);
  await expect(panel.locator('.qloop-acp-user')).toHaveCount(0);
  await send(panel, 'before the reload');
  await expect(panel.locator('.qloop-acp-agent strong')).toHaveText(
    'before the reload'
  );
  await page.reload();
  await page.keyboard.press('Control+Shift+C');
  await page
    .locator('.lm-CommandPalette-input:visible')
    .fill('Open agent chat');
  await page
    .locator('.lm-CommandPalette-item:visible', { hasText: 'Open agent chat' })
    .click();
  panel = page.locator('.qloop-acp');
  await expect(panel.locator('.qloop-acp-user')).toHaveText([
    'before the reload'
  ]);
  await send(panel, 'after it');
  await expect(panel.locator('.qloop-acp-agent strong')).toHaveText([
    'before the reload',
    'after it'
  ]);
});

nb7Test.describe('the agent chat in Notebook 7', () => {
  nb7Test(
    'chats beside the notebook; a denial reaches the agent',
    async ({ notebook7 }) => {
      await notebook7.open('acp.ipynb', notebookOf(['1 + 1']));
      const page = notebook7.page;
      const panel = await openChat(page);
      const notebook = page.locator('.jp-Notebook');
      const [left, right] = [
        await notebook.boundingBox(),
        await panel.boundingBox()
      ];
      expect(right!.x).toBeGreaterThanOrEqual(left!.x + left!.width - 1);
      await send(panel, 'hi');
      await expect(panel.locator('.qloop-acp-agent strong')).toHaveText('hi');
      await send(panel, 'run ls');
      const card = panel.locator('.qloop-outside').first();
      await expect(card).toContainText('terminal/create');
      await card.locator('input[aria-label="Reason"]').fill('not here');
      await button(card, 'Deny').click();
      await expect(panel.locator('.qloop-acp-agent').last()).toContainText(
        'denied by the user: not here'
      );
    }
  );
});
