/**
 * The restore dialog's lines and the restore itself on a real cell model.
 */
import { CodeCellModel } from '@jupyterlab/cells';
import { nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';

import { historyLabels } from '../src/restore';
import { restored } from '../src/history';

const trans = nullTranslator.load('qloop-kernel');

describe('historyLabels', () => {
  it('names each earlier record by time, status and prompt', () => {
    const current = {
      schema_version: 2,
      digest: 'sha256:now',
      history: [
        {
          digest: 'sha256:one',
          status: 'completed',
          prompt: 'Clean the dates',
          updated_at: '2026-12-01T10:11:12.000001+00:00',
          metadata_unseen: true
        }
      ]
    };
    expect(historyLabels(current, trans)).toEqual([
      '1. 2026-12-01 10:11:12 · completed · made without the saved record · Clean the dates'
    ]);
    expect(historyLabels({}, trans)).toEqual([]);
  });

  it('restores into a cell model, keeping the current record', () => {
    const cell = new CodeCellModel({});
    const current: JSONObject = {
      digest: 'sha256:now',
      history: [{ digest: 'sha256:one' }]
    };
    cell.setMetadata('qloop', current);
    cell.setMetadata('qloop', restored(current, 0));
    expect(cell.getMetadata('qloop')).toEqual({
      digest: 'sha256:one',
      history: [{ digest: 'sha256:now' }]
    });
    cell.dispose();
  });
});
