/**
 * The comm bridge: a kernel opens the `qloop` comm and writes cell metadata.
 *
 * comm_bridge.ipynb: cell 1 ("probe") opens the comm and sends requests, the
 * last of them a `set_metadata` of its own record; cell 2 prints the acks
 * the kernel received; cell 3 writes a newer record (status `interrupted`).
 * The kernel only sends `hello` and `set_metadata`: other operations, such as
 * reading or deleting metadata, are refused.
 */
import {
  expect,
  extensionVersion,
  markerOf,
  outputText,
  test,
  waitForIdleKernel
} from './fixtures';
import { IJupyterLabPageFixture } from '@jupyterlab/galata';

const PROBE = 1;
const ACKS = 2;
const NEWER = 3;

type Ack = Record<string, any>;

/** Run the acks cell until the kernel has received `count` acks; return them by request id. */
async function acksReceived(
  page: IJupyterLabPageFixture,
  count: number
): Promise<Map<string, Ack>> {
  let acks: Ack[] = [];
  await expect
    .poll(async () => {
      await page.notebook.runCell(ACKS, { inplace: true });
      acks = JSON.parse((await outputText(page, ACKS)) || '[]');
      return acks.length;
    })
    .toBeGreaterThanOrEqual(count);
  return new Map(acks.map(ack => [String(ack.request_id), ack]));
}

test.describe('comm bridge', () => {
  test('answers kernel requests and saves the record into the cell metadata', async ({
    page,
    openNotebook,
    saveAndRead
  }) => {
    const serverPath = await openNotebook('comm_bridge.ipynb');
    expect((await markerOf(page, PROBE)).marked).toBe(false);

    await page.notebook.runCell(PROBE, { inplace: true });
    await expect
      .poll(() => markerOf(page, PROBE))
      .toEqual({
        marked: true,
        status: 'completed',
        badge: 'agent · replayable'
      });

    const acks = await acksReceived(page, 12);
    expect(acks.get('open-hello')).toMatchObject({
      op: 'ack',
      request_id: 'open-hello',
      ok: true,
      frontend: 'jupyterlab',
      version: extensionVersion(),
      notebook_grants: null // this notebook saved no grants
    });
    expect(String(acks.get('open-hello')?.notebook_path)).toMatch(
      /comm_bridge\.ipynb$/
    );
    expect(acks.get('hello')).toMatchObject({
      ok: true,
      frontend: 'jupyterlab'
    });
    expect(acks.get('set')).toEqual({ op: 'ack', request_id: 'set', ok: true });
    const refusals: [string, string][] = [
      ['get-before', 'unknown op "get_metadata"'],
      ['other-key', "key 'tags' is not writable"],
      ['no-cell', 'no cell with id no-such-cell'],
      ['not-object', "'value' must be a JSON object"],
      ['bad-cell-id', "'cell_id' must be a non-empty string"],
      ['delete-other', 'unknown op "delete_metadata"'],
      ['unknown-op', 'unknown op "launch"'],
      ['no-op', 'unknown op null'],
      ['null', 'a request must be a JSON object']
    ];
    for (const [requestId, error] of refusals) {
      expect(acks.get(requestId), requestId).toMatchObject({
        op: 'ack',
        ok: false
      });
      expect(acks.get(requestId)!.error, requestId).toContain(error);
    }

    const file = await saveAndRead(serverPath);
    const probe = file.cells[PROBE];
    expect(probe.metadata.qloop).toMatchObject({
      schema_version: 1,
      cell_id: probe.id,
      status: 'completed',
      prompt: 'Summarise the sales table'
    });
    expect(probe.metadata.tags).toBeUndefined();

    await page.notebook.runCell(NEWER, { inplace: true });
    await expect
      .poll(async () => (await markerOf(page, PROBE)).status)
      .toBe('interrupted');
    const after = await acksReceived(page, 13);
    expect(after.get('set-again')).toEqual({
      op: 'ack',
      request_id: 'set-again',
      ok: true
    });
    expect(
      (await saveAndRead(serverPath)).cells[PROBE].metadata.qloop
    ).toMatchObject({
      status: 'interrupted',
      prompt: 'Summarise the sales table'
    });
  });

  test.describe('with real kernel messages', () => {
    // Galata's kernel tracking loses the kernel status across a restart.
    test.use({ kernels: null });

    test('keeps working after a kernel restart', async ({
      page,
      openNotebook,
      runAll
    }) => {
      await openNotebook('comm_bridge.ipynb');
      await page.notebook.runCell(PROBE, { inplace: true });
      await expect
        .poll(async () => (await markerOf(page, PROBE)).marked)
        .toBe(true);

      await page.menu.clickMenuItem('Kernel>Restart Kernel…');
      await page.locator('.jp-Dialog .jp-mod-accept').click();
      await waitForIdleKernel(page);

      // Probe, print, then write a newer record: all through the comm
      // target registered before the restart.
      await runAll();
      await expect
        .poll(async () => (await markerOf(page, PROBE)).status)
        .toBe('interrupted');
      const acks = await acksReceived(page, 13);
      expect(acks.get('hello')).toMatchObject({
        ok: true,
        frontend: 'jupyterlab'
      });
      expect(acks.get('set')).toMatchObject({ ok: true });
      expect(acks.get('set-again')).toEqual({
        op: 'ack',
        request_id: 'set-again',
        ok: true
      });
    });

    test('registers on a new kernel after a kernel change', async ({
      page,
      openNotebook
    }) => {
      await openNotebook('comm_bridge.ipynb');
      await waitForIdleKernel(page);
      const kernelIds = await page.evaluate(async () => {
        const context = (window as any).jupyterapp.shell.currentWidget
          .sessionContext;
        const before = context.session.kernel.id;
        await context.changeKernel({ name: 'python3' });
        return [before, context.session.kernel.id];
      });
      expect(kernelIds[1]).not.toEqual(kernelIds[0]);
      await waitForIdleKernel(page);

      await page.notebook.runCell(PROBE, { inplace: true });
      await expect
        .poll(() => markerOf(page, PROBE))
        .toMatchObject({ status: 'completed' });
      const acks = await acksReceived(page, 12);
      expect(acks.get('set')).toEqual({
        op: 'ack',
        request_id: 'set',
        ok: true
      });
    });
  });
});
