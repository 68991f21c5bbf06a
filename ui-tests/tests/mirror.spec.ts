/**
 * The output mirror is moved into `metadata.qloop` when a notebook opens.
 */
import {
  expect,
  isDirty,
  markerOf,
  reloadFromDisk,
  test,
  waitForIdleKernel
} from './fixtures';

const MIME = 'application/vnd.qloop.transcript+json';

test.describe('mirror to metadata', () => {
  test('copies the mirror where the metadata is missing or older', async ({
    page,
    openNotebook,
    saveAndRead
  }) => {
    const serverPath = await openNotebook('mirror.ipynb');

    await expect
      .poll(() => markerOf(page, 0))
      .toMatchObject({ marked: true, status: 'completed' });
    await expect
      .poll(() => markerOf(page, 2))
      .toMatchObject({ status: 'interrupted' });

    const file = await saveAndRead(serverPath);
    const [mirrorOnly, metadataNewer, mirrorNewer, plain] = file.cells;
    expect(mirrorOnly.metadata.qloop).toEqual(
      mirrorOnly.outputs![0].data![MIME]
    );
    expect(metadataNewer.metadata.qloop.prompt).toBe('Metadata newer (saved)');
    expect(mirrorNewer.metadata.qloop).toEqual(
      mirrorNewer.outputs![0].data![MIME]
    );
    expect(plain.metadata.qloop).toBeUndefined();
    expect((await markerOf(page, 1)).status).toBe('completed');
    expect((await markerOf(page, 3)).marked).toBe(false);
  });

  // Starting a kernel updates the notebook's language_info, which marks it
  // dirty too: these tests wait for the kernel, then reload from disk, so
  // that the dirty state comes from the mirror alone.

  test('copies the mirror again after a reload from disk, marking the notebook dirty', async ({
    page,
    openNotebook
  }) => {
    await openNotebook('mirror.ipynb');
    await waitForIdleKernel(page);

    await reloadFromDisk(page);
    await expect
      .poll(() => markerOf(page, 0))
      .toMatchObject({ marked: true, status: 'completed' });
    expect(await isDirty(page)).toBe(true);
  });

  test('leaves a notebook clean when metadata and mirror agree', async ({
    page,
    openNotebook
  }) => {
    await openNotebook('saved_turn.ipynb');
    await waitForIdleKernel(page);

    await reloadFromDisk(page);
    await expect.poll(() => markerOf(page, 0)).toMatchObject({ marked: true });
    expect(await isDirty(page)).toBe(false);
  });
});
