/**
 * The "Copy to cell" button of a step in the transcript view (a MIME
 * renderer, with no access to the notebook): it sends a bubbling
 * `qloop:copy-to-cell` DOM event with the step's code, which the notebook
 * plugin in `copy.ts` turns into a code cell.
 */
import { TranslationBundle } from '@jupyterlab/translation';

/** The DOM event the button sends. */
export const COPY_EVENT = 'qloop:copy-to-cell';
/** Class of the button on a step of the transcript view. */
export const COPY_BUTTON_CLASS = 'qloop-copy-to-cell';
/** Decisions of steps that ran with the user's approval: the ones worth copying. */
export const COPYABLE_DECISIONS = ['approved', 'edited', 'auto', 'always'];

/** The detail of a copy event. */
export interface ICopyDetail {
  code: string;
}

/** A "Copy to cell" button for a step's code. */
export function copyButton(
  code: string,
  trans: TranslationBundle
): HTMLElement {
  const button = document.createElement('button');
  button.className = `${COPY_BUTTON_CLASS} jp-mod-styled`;
  button.type = 'button';
  button.textContent = trans.__('Copy to cell');
  button.title = trans.__(
    'Insert this step as a code cell below the agent cell'
  );
  button.addEventListener('click', () => {
    button.dispatchEvent(
      new CustomEvent<ICopyDetail>(COPY_EVENT, {
        bubbles: true,
        detail: { code }
      })
    );
  });
  return button;
}
