/**
 * The calls outside agents made to a notebook's kernel, as its pages saved
 * them in its `qloop_outside` metadata: a read-only view, one block per
 * entry, oldest first, that follows the metadata as it changes. Every text
 * is set as text, and code is shown with its invisible characters marked.
 * The code of an approved run_code call can be copied into a new code cell,
 * and the whole list can become an `%%agent` cell whose run replays the code
 * that ran, behind the same approval as a saved agent turn (the server builds
 * and signs its record, the kernel's replay decides).
 * Signatures are not checked here: `qloop show`, on the kernel side, does.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  DOMUtils,
  ICommandPalette,
  MainAreaWidget
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { INotebookModel } from '@jupyterlab/notebook';
import { TranslationBundle } from '@jupyterlab/translation';
import { JSONObject, JSONValue, UUID } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { element } from './dom';
import type { OutsideAgentCell } from './generated/protocol';
import { OUTSIDE_KEY } from './outsidecells';
import { isJSONObject } from './record';
import { shownNodes } from './visible';

/** The command that opens the view of the current notebook. */
export const SHOW_OUTSIDE_CALLS = 'qloop-kernel:show-outside-calls';
/** Class of the view, and of each entry's block. */
export const OUTSIDE_VIEW_CLASS = 'qloop-outside-view';
export const OUTSIDE_ENTRY_CLASS = 'qloop-outside-entry';
/** Attribute of an entry's block with its tool. */
export const OUTSIDE_TOOL_ATTRIBUTE = 'data-qloop-outside-tool';
/** Characters of a call's result shown; the whole is in the metadata. */
export const RESULT_SHOWN = 1500;

/** An entry's text fields and their labels; each shown when a non-empty string. */
function fields(trans: TranslationBundle): [string, string][] {
  return [
    ['at', trans.__('When')],
    ['client', trans.__('Client')],
    ['tool', trans.__('Tool')],
    ['decision', trans.__('Decision')],
    ['reason', trans.__('Reason')],
    ['risk', trans.__('Class')]
  ];
}
const CELL_TOOLS = ['add_cell', 'edit_cell'];
const RUN_CELL = 'run_cell';

/** What the view needs of a notebook's model. */
export type OutsideCallsModel = Pick<
  INotebookModel,
  'getMetadata' | 'metadataChanged' | 'sharedModel'
>;

function text(entry: JSONObject, key: string): string | null {
  const value = entry[key];
  return typeof value === 'string' && value !== '' ? value : null;
}

function fieldList(entry: JSONObject, trans: TranslationBundle): HTMLElement {
  const list = element('dl', 'qloop-outside-entry-fields');
  for (const [key, label] of fields(trans)) {
    const value = text(entry, key);
    if (value !== null) {
      list.append(
        element('dt', 'qloop-outside-entry-label', label),
        element('dd', `qloop-outside-entry-${key}`, value)
      );
    }
  }
  return list;
}

/** The code of an entry and what it is: what ran, or what was asked for. */
function entryCode(
  entry: JSONObject,
  trans: TranslationBundle
): { code: string; label: string } | null {
  const cellTool = CELL_TOOLS.includes(entry['tool'] as string);
  const ran = entry['ran'];
  if (entry['tool'] === RUN_CELL) {
    // The server never knows the source asked for: only what ran.
    return typeof ran === 'string'
      ? { code: ran, label: trans.__('Ran cell') }
      : null;
  }
  if (typeof ran === 'string') {
    return {
      code: ran,
      label: cellTool ? trans.__('Cell source') : trans.__('Ran')
    };
  }
  const input = isJSONObject(entry['input']) ? entry['input'] : {};
  const asked = [input['code'], input['source']].find(
    (value): value is string => typeof value === 'string'
  );
  if (asked === undefined) {
    return null;
  }
  return {
    code: asked,
    label: cellTool
      ? trans.__('Proposed source (not applied)')
      : trans.__('Asked to run (it did not run)')
  };
}

/** What a cell change did, from its result ("cell <id>", or nothing). */
function cellLine(entry: JSONObject, trans: TranslationBundle): HTMLElement {
  const result = text(entry, 'result');
  const line = element('div', 'qloop-outside-entry-cell');
  line.textContent =
    result === null
      ? trans.__('No cell was changed')
      : entry['tool'] === 'add_cell'
        ? trans.__('Added as %1', result)
        : trans.__('Applied to %1', result);
  return line;
}

/** The line of a run_cell call that ran nothing: which cell it asked for. */
function notRunLine(entry: JSONObject, trans: TranslationBundle): HTMLElement {
  const input = isJSONObject(entry['input']) ? entry['input'] : {};
  const cellId = input['cell_id'];
  return element(
    'div',
    'qloop-outside-entry-cell',
    typeof cellId === 'string'
      ? trans.__('Cell %1 did not run', cellId)
      : trans.__('No cell ran')
  );
}

/** The first part of a call's result, and how long the whole is. */
function resultPart(
  entry: JSONObject,
  trans: TranslationBundle
): HTMLElement[] {
  const result = text(entry, 'result');
  if (result === null) {
    return [];
  }
  const saved = entry['result_chars'];
  const total = Math.max(result.length, typeof saved === 'number' ? saved : 0);
  const shown = [
    element('div', 'qloop-outside-entry-label', trans.__('Result')),
    element('pre', 'qloop-outside-entry-result', result.slice(0, RESULT_SHOWN))
  ];
  if (total > RESULT_SHOWN) {
    shown.push(
      element(
        'div',
        'qloop-outside-entry-more',
        trans.__('… %1 characters in all', total)
      )
    );
  }
  return shown;
}

/**
 * The block of one saved entry. `copy` inserts code as a new cell and
 * returns its 1-based place; it is offered for an approved run_code call.
 */
export function entryBlock(
  entry: unknown,
  trans: TranslationBundle,
  copy: (code: string) => number
): HTMLElement {
  const block = element('section', OUTSIDE_ENTRY_CLASS);
  if (!isJSONObject(entry)) {
    block.classList.add('qloop-outside-entry-unreadable');
    block.textContent = trans.__('an unreadable entry');
    return block;
  }
  const tool = text(entry, 'tool');
  if (tool !== null) {
    block.setAttribute(OUTSIDE_TOOL_ATTRIBUTE, tool);
  }
  block.classList.toggle(
    'qloop-outside-entry-error',
    entry['is_error'] === true
  );
  block.append(fieldList(entry, trans));
  const code = entryCode(entry, trans);
  if (code !== null) {
    const pre = element('pre', 'qloop-outside-entry-code');
    pre.appendChild(shownNodes(document, code.code, trans));
    block.append(element('div', 'qloop-outside-entry-label', code.label), pre);
  }
  const ran = entry['ran'];
  if (CELL_TOOLS.includes(tool ?? '')) {
    block.append(cellLine(entry, trans));
  } else if (tool === RUN_CELL && typeof ran !== 'string') {
    block.append(notRunLine(entry, trans));
  } else {
    block.append(...resultPart(entry, trans));
  }
  if (tool === 'run_code' && typeof ran === 'string') {
    block.append(copyControls(ran, trans, copy));
  }
  return block;
}

function copyControls(
  code: string,
  trans: TranslationBundle,
  copy: (code: string) => number
): HTMLElement {
  const controls = element('div', 'qloop-outside-entry-controls');
  const button = element(
    'button',
    'qloop-outside-button qloop-outside-entry-copy',
    trans.__('Copy to cell')
  );
  button.type = 'button';
  button.title = trans.__(
    'Insert this code as a new code cell at the end of the notebook'
  );
  const copied = element('span', 'qloop-outside-entry-copied');
  copied.setAttribute('role', 'status');
  button.addEventListener('click', () => {
    copied.textContent = trans.__('Copied as cell %1', copy(code));
  });
  controls.append(button, copied);
  return controls;
}

export type AgentCellAnswer =
  | { outcome: 'ok'; cell: OutsideAgentCell }
  | { outcome: 'failed'; message: string };

/** Makes the agent cell `id` of the entries (the server's agent_cell route). */
export type MakeAgentCell = (
  id: string,
  entries: JSONValue[]
) => Promise<AgentCellAnswer>;

/**
 * The server's answer as an agent cell (its `%%agent` source, its record,
 * the code steps its run replays, whether every entry verified with this
 * user's key, the entries left out), or null when it is not one.
 */
export function parseAgentCell(data: unknown): OutsideAgentCell | null {
  if (
    !isJSONObject(data) ||
    data['ok'] !== true ||
    typeof data['source'] !== 'string' ||
    !data['source'].startsWith('%%agent') ||
    !isJSONObject(data['record']) ||
    typeof data['steps'] !== 'number' ||
    typeof data['own'] !== 'boolean' ||
    typeof data['skipped'] !== 'number'
  ) {
    return null;
  }
  return {
    ok: true,
    source: data['source'],
    record: data['record'],
    steps: data['steps'],
    own: data['own'],
    skipped: data['skipped']
  };
}

/** What the view needs. */
export interface IOutsideCallsOptions {
  model: OutsideCallsModel;
  trans: TranslationBundle;
  /** A call's code was copied into the new cell at `index` (0-based). */
  copied?: (index: number) => void;
  /** Offers "Replay as an agent cell" where given. */
  makeAgentCell?: MakeAgentCell;
}

/** The saved outside calls of one notebook; it follows the metadata. */
export class OutsideCallsView extends Widget {
  constructor(private readonly _options: IOutsideCallsOptions) {
    super();
    const trans = _options.trans;
    this.addClass(OUTSIDE_VIEW_CLASS);
    const note = element('p', 'qloop-outside-view-note');
    const command = 'qloop show';
    const [before, ...after] = trans
      .__(
        "Entries are saved by this notebook's pages; %1 says which your key signed.",
        command
      )
      .split(command);
    // The command as code, where the translation puts it.
    note.append(before, element('code', '', command), after.join(command));
    this.node.append(note);
    if (_options.makeAgentCell) {
      this.node.append(this._replayControls());
    }
    this.node.append(this._entries);
    _options.model.metadataChanged.connect(this._changed, this);
    this.render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._options.model.metadataChanged.disconnect(this._changed, this);
    super.dispose();
  }

  /** Show the entries as the metadata holds them now. */
  render(): void {
    const { model, trans } = this._options;
    const saved = model.getMetadata(OUTSIDE_KEY);
    const entries =
      saved === undefined
        ? []
        : isJSONObject(saved) && Array.isArray(saved['entries'])
          ? saved['entries']
          : null;
    this._replay.disabled = entries === null || entries.length === 0;
    if (entries === null || entries.length === 0) {
      this._entries.replaceChildren(
        element(
          'p',
          'qloop-outside-view-empty',
          entries === null
            ? trans.__(
                "The notebook's %1 metadata is not a list of entries.",
                OUTSIDE_KEY
              )
            : trans.__("No outside agent's call is saved in this notebook.")
        )
      );
      return;
    }
    const copy = (code: string) => this._copy(code);
    this._entries.replaceChildren(
      ...entries.map(entry => entryBlock(entry, trans, copy))
    );
  }

  /** A new code cell with `code` at the end of the notebook; its 1-based place. */
  private _copy(code: string): number {
    const notebook = this._options.model.sharedModel;
    const index = notebook.cells.length;
    notebook.insertCell(index, {
      cell_type: 'code',
      source: code,
      metadata: {}
    });
    this._options.copied?.(index);
    return index + 1;
  }

  private _replayControls(): HTMLElement {
    const { trans } = this._options;
    const controls = element('div', 'qloop-outside-view-controls');
    this._replay.type = 'button';
    this._replay.textContent = trans.__('Replay as an agent cell');
    this._replay.title = trans.__(
      'Add a %1 cell at the end of the notebook whose run replays the code these calls ran, in order, without the outside agent, after the same approval as a saved agent turn',
      '%%agent'
    );
    this._replayStatus.setAttribute('role', 'status');
    this._replay.addEventListener('click', () => void this._makeAgentCell());
    controls.append(this._replay, this._replayStatus);
    return controls;
  }

  /** Ask the server for the agent cell of the saved entries and add it at the end. */
  private async _makeAgentCell(): Promise<void> {
    const { model, trans, makeAgentCell } = this._options;
    const saved = model.getMetadata(OUTSIDE_KEY);
    if (!makeAgentCell || !isJSONObject(saved)) {
      return;
    }
    const entries = saved['entries'];
    if (!Array.isArray(entries) || entries.length === 0) {
      return;
    }
    this._replay.disabled = true;
    this._replayStatus.textContent = trans.__('Making the agent cell…');
    const id = UUID.uuid4();
    const answer = await makeAgentCell(id, entries);
    this._replay.disabled = false;
    if (answer.outcome === 'failed') {
      this._replayStatus.textContent = trans.__(
        'No agent cell was added: %1',
        answer.message
      );
      return;
    }
    const { cell } = answer;
    const notebook = model.sharedModel;
    const index = notebook.cells.length;
    notebook.insertCell(index, {
      id,
      cell_type: 'code',
      source: cell.source,
      metadata: { qloop: cell.record as JSONObject } // JSON, as the server sent it
    });
    this._options.copied?.(index);
    const said = [
      trans._n(
        'Added agent cell %2: running it replays %1 code step without the outside agent, after your approval (the kernel needs qloop loaded: %3).',
        'Added agent cell %2: running it replays %1 code steps without the outside agent, after your approval (the kernel needs qloop loaded: %3).',
        cell.steps,
        index + 1,
        '%load_ext qloop_kernel'
      )
    ];
    if (!cell.own) {
      said.push(
        trans.__(
          'Not every call is signed by your key: the cell is received, and its card shows every step before anything runs.'
        )
      );
    }
    if (cell.skipped > 0) {
      said.push(trans.__('%1 unreadable entries were left out.', cell.skipped));
    }
    this._replayStatus.textContent = said.join(' ');
  }

  private _changed(_: unknown, change: { key: string }): void {
    if (change.key === OUTSIDE_KEY) {
      this.render();
    }
  }

  private readonly _entries = element('div', 'qloop-outside-view-entries');
  private readonly _replay = element(
    'button',
    'qloop-outside-button qloop-outside-view-replay'
  );
  private readonly _replayStatus = element(
    'span',
    'qloop-outside-view-replay-status'
  );
}

/** What the command needs of a notebook view (a `NotebookPanel` has it). */
export interface IOutsideCallsPanel {
  readonly id: string;
  readonly context: {
    readonly path: string;
    readonly pathChanged: ISignal<unknown, string>;
    readonly model: OutsideCallsModel;
  };
  readonly content: { activeCellIndex: number };
  readonly disposed: ISignal<unknown, void>;
}

/** The view of a notebook's outside calls in a main-area widget, closed with the notebook. */
export function outsideCallsWidget(
  panel: IOutsideCallsPanel,
  trans: TranslationBundle,
  makeAgentCell?: MakeAgentCell
): MainAreaWidget<OutsideCallsView> {
  const context = panel.context;
  const view = new OutsideCallsView({
    model: context.model,
    trans,
    copied: index => (panel.content.activeCellIndex = index),
    makeAgentCell
  });
  const widget = new MainAreaWidget({ content: view });
  widget.id = DOMUtils.createDomID();
  widget.title.closable = true;
  const named = (_: unknown, path: string) => {
    widget.title.label = trans.__(
      'Outside agents · %1',
      PathExt.basename(path)
    );
    widget.title.caption = path;
  };
  named(context, context.path);
  context.pathChanged.connect(named);
  const closed = () => widget.dispose();
  panel.disposed.connect(closed);
  widget.disposed.connect(() => {
    context.pathChanged.disconnect(named);
    panel.disposed.disconnect(closed);
  });
  return widget;
}

/** Add the command that opens the view of the current notebook, and its palette item. */
export function addOutsideCallsCommand(
  app: Pick<JupyterFrontEnd, 'commands' | 'shell'>,
  tracker: { readonly currentWidget: IOutsideCallsPanel | null },
  trans: TranslationBundle,
  palette: ICommandPalette | null,
  makeAgentCell?: MakeAgentCell
): void {
  const shown = new WeakMap<object, MainAreaWidget<OutsideCallsView>>();
  app.commands.addCommand(SHOW_OUTSIDE_CALLS, {
    label: trans.__("Show outside agents' calls"),
    caption: trans.__(
      "The calls outside agents made to this notebook's kernel, as saved in the notebook"
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isEnabled: () => tracker.currentWidget !== null,
    execute: () => {
      const panel = tracker.currentWidget;
      if (!panel) {
        return;
      }
      let widget = shown.get(panel.context);
      if (!widget || widget.isDisposed) {
        widget = outsideCallsWidget(panel, trans, makeAgentCell);
        shown.set(panel.context, widget);
        app.shell.add(widget, 'main', { mode: 'split-right', ref: panel.id });
        if (widget.parent === null) {
          // Notebook 7 keeps its main area for the notebook: the side panel.
          app.shell.add(widget, 'right', { rank: 1000 });
        }
      }
      app.shell.activateById(widget.id);
    }
  });
  palette?.addItem({
    command: SHOW_OUTSIDE_CALLS,
    category: trans.__('qloop')
  });
}
