/**
 * "Restore an earlier agent record…": bring back one of the records a cell
 * keeps in its history (the current one takes its place there).
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { InputDialog } from '@jupyterlab/apputils';
import { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker } from '@jupyterlab/notebook';
import {
  ITranslator,
  TranslationBundle,
  nullTranslator
} from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';

/* eslint-disable jupyter/prefer-lazy-imports -- small pure modules the
   command needs at once. */
import { historyOf, restored } from './history';
import { TRANSLATION_DOMAIN, statusLabel } from './labels';
import { AGENT_CELL_CLASS } from './marker';
import { METADATA_KEY, isJSONObject, statusOf } from './record';
/* eslint-enable jupyter/prefer-lazy-imports */

/** The command's id. */
export const RESTORE_COMMAND = 'qloop:restore-record';

/** One line per earlier record: when, status, steps and the start of the prompt. */
export function historyLabels(
  record: unknown,
  trans: TranslationBundle
): string[] {
  return historyOf(record).map((entry, index) => {
    const when =
      typeof entry['updated_at'] === 'string'
        ? entry['updated_at'].slice(0, 19).replace('T', ' ')
        : trans.__('undated');
    const prompt =
      typeof entry['prompt'] === 'string' ? entry['prompt'].slice(0, 50) : '';
    const unseen =
      entry['metadata_unseen'] === true
        ? trans.__(' · made without the saved record')
        : '';
    return `${index + 1}. ${when} · ${statusLabel(statusOf(entry), trans)}${unseen} · ${prompt}`;
  });
}

/** Ask which earlier record to restore in `cell`, and restore it. */
export async function restoreInCell(
  cell: ICellModel,
  trans: TranslationBundle
): Promise<boolean> {
  const current = cell.getMetadata(METADATA_KEY);
  const labels = historyLabels(current, trans);
  if (!isJSONObject(current) || labels.length === 0) {
    return false;
  }
  const chosen = await InputDialog.getItem({
    title: trans.__('Restore an earlier agent record'),
    label: trans.__(
      'The record shown now goes into the history; nothing is deleted.'
    ),
    items: labels,
    current: 0
  });
  if (!chosen.button.accept || chosen.value === null) {
    return false;
  }
  const index = labels.indexOf(chosen.value);
  cell.setMetadata(METADATA_KEY, restored(current as JSONObject, index));
  return true;
}

/** The command, in the context menu of agent cells. */
export const restorePlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:restore-record',
  description: 'Restores an earlier record of a qloop agent cell.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const activeModel = () => tracker.activeCell?.model ?? null;
    app.commands.addCommand(RESTORE_COMMAND, {
      label: trans.__('Restore an Earlier Agent Record…'),
      describedBy: { args: { type: 'object', properties: {} } },
      isEnabled: () =>
        historyOf(activeModel()?.getMetadata(METADATA_KEY)).length > 0,
      execute: async () => {
        const model = activeModel();
        return model ? restoreInCell(model, trans) : false;
      }
    });
    app.contextMenu.addItem({
      command: RESTORE_COMMAND,
      selector: `.${AGENT_CELL_CLASS}`,
      rank: 20
    });
  }
};
