/**
 * One rendering of a saved turn. A reopened agent cell holds the live output
 * of its turn (streamed text, status and note lines, approval cards, the
 * answer) next to the transcript view of the same turn, which shows all of it
 * again. When the transcript is not from a kernel connection of this page,
 * the live output it supersedes is hidden (the cell's other outputs, such as
 * plots, tables and errors, stay), and the view's "live output" toggle shows
 * it again. The notebook file is not changed.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { Notebook } from '@jupyterlab/notebook';
import { TranslationBundle } from '@jupyterlab/translation';

import { isLiveClient } from './live';
import { ANSWER_MIME, TRANSCRIPT_MIME } from './record';
import { WAITING_METADATA, isWaitingModel, onWaitingChanged } from './waiting';

/** Class of an output child hidden because the transcript view shows it. */
export const SUPERSEDED_CLASS = 'qloop-superseded';
/** Attribute of an output area holding superseded outputs: how many. */
export const SUPERSEDED_ATTRIBUTE = 'data-qloop-superseded';
/** Class of an output area whose superseded outputs are shown anyway. */
export const SHOW_SUPERSEDED_CLASS = 'qloop-show-superseded';
/** Class of an output child that is a widget view (an approval card). */
export const WIDGET_VIEW_CLASS = 'qloop-widget-view';
/** Class of the toggle in the transcript view. */
export const TOGGLE_CLASS = 'qloop-live-toggle';

const WIDGET_VIEW_MIME = 'application/vnd.jupyter.widget-view+json';
// The kernel's one-line notes and "runs without asking" lines (display.py, approval.py).
const TURN_HTML = /^\s*<div class=['"]qloop-(line|unasked)\b/;

/** The parts of an output this module reads (an nbformat output, or its model). */
export interface IOutputLike {
  type: string;
  data: { [mime: string]: unknown };
  metadata: { [key: string]: unknown };
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether an output is a transcript view that is the only view of its turn. */
export function isStandaloneTranscript(output: IOutputLike): boolean {
  if (!(TRANSCRIPT_MIME in output.data)) {
    return false;
  }
  const meta = output.metadata[TRANSCRIPT_MIME];
  return !isLiveClient(isObject(meta) ? meta['live_client'] : undefined);
}

/** Whether an output is part of a turn's live rendering. */
export function isTurnOutput(output: IOutputLike): boolean {
  if (output.metadata[WAITING_METADATA] === true) {
    return false; // a waiting card shown again after a reload: the running turn's
  }
  if (output.type === 'stream') {
    return true;
  }
  if (output.type !== 'display_data' && output.type !== 'execute_result') {
    return false; // errors stay: the one place a traceback shows
  }
  const data = output.data;
  const view = data[WIDGET_VIEW_MIME];
  if (isObject(view) && isWaitingModel(view['model_id'])) {
    return false; // the same card, found in outputs shared with an earlier page
  }
  if (WIDGET_VIEW_MIME in data || ANSWER_MIME in data) {
    return true;
  }
  const markup = data['text/html'];
  const text = Array.isArray(markup) ? markup.join('') : markup;
  return typeof text === 'string' && TURN_HTML.test(text);
}

/**
 * Indexes of the outputs a standalone transcript view supersedes: none
 * unless the outputs hold one.
 */
export function supersededIndexes(outputs: readonly IOutputLike[]): number[] {
  if (!outputs.some(isStandaloneTranscript)) {
    return [];
  }
  const found: number[] = [];
  outputs.forEach((output, index) => {
    if (!(TRANSCRIPT_MIME in output.data) && isTurnOutput(output)) {
      found.push(index);
    }
  });
  return found;
}

/** The outputs of a code cell as this module reads them. */
function outputsOf(cell: CodeCell): IOutputLike[] {
  const model = cell.outputArea.model;
  const outputs: IOutputLike[] = [];
  for (let i = 0; i < model.length; i++) {
    const item = model.get(i);
    outputs.push({
      type: item.type,
      data: item.data as IOutputLike['data'],
      metadata: item.metadata as IOutputLike['metadata']
    });
  }
  return outputs;
}

/** Hide what the cell's transcript view supersedes, and show the rest. */
export function applySuperseded(cell: CodeCell): void {
  const area = cell.outputArea;
  const outputs = outputsOf(cell);
  const hidden = new Set(supersededIndexes(outputs));
  area.widgets.forEach((child, index) => {
    child.toggleClass(SUPERSEDED_CLASS, hidden.has(index));
    const data = outputs[index]?.data ?? {};
    child.toggleClass(WIDGET_VIEW_CLASS, WIDGET_VIEW_MIME in data);
  });
  if (hidden.size > 0) {
    area.node.setAttribute(SUPERSEDED_ATTRIBUTE, String(hidden.size));
  } else {
    area.node.removeAttribute(SUPERSEDED_ATTRIBUTE);
    area.node.classList.remove(SHOW_SUPERSEDED_CLASS);
  }
}

function watchCell(cell: Cell, watched: WeakSet<Cell>): void {
  if (!(cell instanceof CodeCell) || watched.has(cell)) {
    return;
  }
  watched.add(cell);
  const area = cell.outputArea;
  const update = () => {
    if (!cell.isDisposed) {
      applySuperseded(cell);
    }
  };
  // The output area builds its child widgets in its own handler of these
  // signals, connected before this one.
  area.model.changed.connect(update);
  area.model.stateChanged.connect(update);
  cell.disposed.connect(() => {
    area.model.changed.disconnect(update);
    area.model.stateChanged.disconnect(update);
  });
  update();
}

/** Keep every code cell of `notebook` showing one rendering of its saved turn. */
export function trackSuperseded(notebook: Notebook): void {
  const watched = new WeakSet<Cell>();
  const watchAll = () =>
    notebook.widgets.forEach(cell => watchCell(cell, watched));
  watchAll();
  notebook.model?.cells.changed.connect(watchAll);
  const reapply = () =>
    notebook.widgets.forEach(cell => {
      if (cell instanceof CodeCell && !cell.isDisposed) {
        applySuperseded(cell);
      }
    });
  const stop = onWaitingChanged(reapply);
  notebook.disposed.connect(stop);
}

/**
 * The transcript view's toggle: shows or hides the superseded live output of
 * its cell. Only visible (stylesheet) in an output area that has some.
 */
export function liveOutputToggle(trans: TranslationBundle): HTMLButtonElement {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = `${TOGGLE_CLASS} jp-mod-minimal jp-Button`;
  const label = (shown: boolean) => {
    button.textContent = shown
      ? trans.__('hide the live output of this turn')
      : trans.__('show the live output of this turn');
    button.setAttribute('aria-pressed', shown ? 'true' : 'false');
  };
  label(false);
  button.addEventListener('click', () => {
    const area = button.closest('.jp-OutputArea');
    if (area !== null) {
      label(area.classList.toggle(SHOW_SUPERSEDED_CLASS));
    }
  });
  return button;
}
