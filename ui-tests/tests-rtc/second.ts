/** What the specs under real-time collaboration share. */
import { Browser, BrowserContext, Page } from '@playwright/test';

/**
 * A second person: a page of its own browser context with the notebook at
 * `serverPath` open (JupyterLab as a user gets it, no Galata stand-ins).
 */
export async function secondPage(
  browser: Browser,
  baseURL: string | undefined,
  serverPath: string
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ baseURL });
  const page = await context.newPage();
  const tree = serverPath.split('/').map(encodeURIComponent).join('/');
  await page.goto(`/lab/workspaces/second/tree/${tree}`);
  await page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')
    .first()
    .waitFor({ timeout: 60000 });
  return { context, page };
}
