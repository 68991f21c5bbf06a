/**
 * The transcript view of saved turns, and how it copes with bad records.
 */
import * as path from 'path';

import { REPOSITORY_ROOT, cell, expect, test } from './fixtures';

test.describe('transcript view', () => {
  // Tall enough for the whole cell to show in the screenshot for the docs.
  test.use({ viewport: { width: 1000, height: 1500 } });

  test('renders a saved turn after a page reload', async ({
    page,
    openNotebook,
    reloadPage
  }) => {
    const serverPath = await openNotebook('saved_turn.ipynb');
    await reloadPage(serverPath);

    const outputArea = (await cell(page, 0)).locator('.jp-OutputArea');
    const view = outputArea.locator('.qloop-transcript');
    await expect(view).toHaveAttribute('data-qloop-status', 'completed');
    // The view replaces the text/markdown and text/plain fallbacks.
    await expect(outputArea.locator('.jp-OutputArea-output')).toHaveCount(1);
    await expect(
      outputArea.locator('.jp-RenderedMarkdown, .jp-RenderedText')
    ).toHaveCount(0);

    const header = view.locator('.qloop-transcript-header');
    await expect(header.locator('.qloop-status')).toHaveText('completed');
    await expect(header).toContainText('claude-sonnet-4-5');
    await expect(header).toContainText('4 model calls');
    await expect(header).toContainText('5 tool calls');
    await expect(header).toContainText(
      'tokens: 5,123 in · 842 out · 20,480 cache read · 1,024 cache write'
    );
    await expect(header).toContainText('$0.0213');
    await expect(view.locator('.qloop-prompt-text')).toHaveText(
      'Clean df: drop rows without a price, then plot the price by region.'
    );

    const cards = view.locator('.qloop-tool-call');
    await expect(cards).toHaveCount(5);
    await expect(cards.locator('.qloop-decision')).toHaveText([
      'auto-approved',
      'approved after edit',
      'denied: do not touch files',
      'approved',
      'read-only, no approval needed'
    ]);
    await expect(cards.nth(1).locator('pre.qloop-tool-input')).toHaveText(
      "df = df.dropna(subset=['price'])\nlen(df)"
    );
    await expect(cards.nth(2)).toHaveClass(/qloop-tool-call-error/);
    await expect(cards.nth(3).locator('.qloop-image-placeholder')).toHaveText(
      'image, 23 kB, sha256 ab12cd34…'
    );
    await expect(cards.nth(4).locator('pre.qloop-tool-input')).toHaveText(
      '{\n  "include_private": false\n}'
    );

    const answer = view.locator('.qloop-answer-body');
    await expect(answer.locator('strong')).toHaveText('3 rows');
    await expect(answer.locator('table td').first()).toHaveText('north');

    await (
      await cell(page, 0)
    ).screenshot({
      path: path.join(REPOSITORY_ROOT, 'docs', 'transcript-view.png')
    });
  });

  test('shows why a record is unreadable and never breaks the page', async ({
    page,
    openNotebook
  }) => {
    const pageErrors: Error[] = [];
    page.on('pageerror', error => pageErrors.push(error));
    await openNotebook('malformed.ipynb');

    const viewOf = async (index: number) =>
      (await cell(page, index)).locator('.qloop-transcript');
    await expect(await viewOf(0)).toHaveText(
      'unreadable qloop record: expected a JSON object, got string'
    );
    await expect(await viewOf(1)).toHaveText(
      'unreadable qloop record: unsupported schema_version 3 (this view reads versions 1, 2)'
    );

    const tolerant = await viewOf(2);
    await expect(tolerant).toHaveAttribute('data-qloop-status', 'unknown');
    await expect(tolerant.locator('.qloop-status')).toHaveText(
      'unknown status'
    );
    await expect(tolerant).toContainText('model unknown');
    await expect(tolerant).toContainText('tokens unknown');
    await expect(tolerant).toContainText('cost unknown');
    await expect(tolerant.locator('.qloop-tool-call')).toHaveCount(3);
    await expect(tolerant.locator('.qloop-tool-name')).toHaveText([
      'unnamed tool',
      'unnamed tool',
      'unnamed tool'
    ]);
    await expect(
      tolerant.locator('.qloop-tool-call').nth(2).locator('pre')
    ).toHaveText('"rm -rf /"');
    await expect(tolerant.locator('.qloop-image-placeholder')).toHaveText([
      'image, size unknown',
      'image, size unknown'
    ]);
    expect(pageErrors).toEqual([]);
  });

  test('treats record text as untrusted', async ({ page, openNotebook }) => {
    await openNotebook('malformed.ipynb');
    const view = (await cell(page, 4)).locator('.qloop-transcript');
    await expect(view).toHaveAttribute('data-qloop-status', 'completed');

    // Text fields are shown as text, not as HTML.
    await expect(view.locator('.qloop-prompt-text')).toHaveText(
      '<b>not bold</b>'
    );
    await expect(view.locator('.qloop-tool-name')).toHaveText('<i>tool</i>');
    await expect(view.locator('.qloop-tool-output')).toHaveText(
      '<img src=x onerror="window.qloopInjected = true">'
    );
    // One call of each, in the singular; the unused cache is left out.
    const facts = view.locator('.qloop-transcript-header .qloop-fact');
    await expect(facts).toHaveText([
      'claude-sonnet-4-5',
      '1 model call',
      '1 tool call',
      'tokens: 10 in · 5 out',
      '$0.0001',
      '1.0 s',
      'approval: ask'
    ]);
    // The Markdown answer is sanitized: no script, no event handler, nothing ran.
    const answer = view.locator('.qloop-answer-body');
    await expect(answer).toContainText('Done.');
    await expect(view.locator('script, [onerror], b, i')).toHaveCount(0);
    expect(
      await page.evaluate(() => (window as any).qloopInjected)
    ).toBeUndefined();
  });
});
