/**
 * The agent-cell marker: class `qloop-agent-cell`, `data-qloop-status` and
 * the badge text on cells whose metadata holds a saved record.
 */
import { expect, markerOf, test } from './fixtures';

test.describe('agent-cell marker', () => {
  test('marks a cell with a saved record, and only that cell', async ({
    page,
    openNotebook
  }) => {
    await openNotebook('saved_turn.ipynb');
    await expect
      .poll(() => markerOf(page, 0))
      .toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable'
      });
    expect(await markerOf(page, 1)).toEqual({
      marked: false,
      status: null,
      badge: ''
    });
  });

  test('follows metadata changes and flags unreadable records', async ({
    page,
    openNotebook
  }) => {
    await openNotebook('malformed.ipynb');
    await expect
      .poll(() => markerOf(page, 3))
      .toEqual({
        marked: true,
        status: 'unreadable',
        badge: 'agent · unreadable record'
      });

    await page.evaluate(() => {
      const notebook = (window as any).jupyterapp.shell.currentWidget.content;
      notebook.widgets[3].model.setMetadata('qloop', {
        schema_version: 1,
        status: 'error'
      });
    });
    await expect
      .poll(() => markerOf(page, 3))
      .toEqual({
        marked: true,
        status: 'error',
        badge: 'agent · error'
      });

    await page.evaluate(() => {
      const notebook = (window as any).jupyterapp.shell.currentWidget.content;
      notebook.widgets[3].model.deleteMetadata('qloop');
    });
    await expect
      .poll(() => markerOf(page, 3))
      .toEqual({ marked: false, status: null, badge: '' });
  });
});
