/**
 * Fix, Explain and Edit with agent in every notebook view (JupyterLab and
 * Notebook 7): a Fix button under the traceback of a code cell whose run in
 * this kernel failed, Explain and Edit with agent on any code cell (cell
 * toolbar, context menu, palette, shortcuts), a prompt box for the edit, and
 * the "qloop assist" area beside the cell where the turn's outputs show
 * (text, approval cards, the transcript) through the notebook's rendermime.
 * The turn's proposal shows as every proposal does, on the cell; its Accept
 * and run runs the cell, and a run that fails again offers Fix again.
 *
 * Nothing shows where the kernel has not loaded qloop: the page asks the
 * kernel (a silent request's user expression) once per kernel, and again
 * after a run while the answer is no.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { Cell, CodeCell, ICodeCellModel } from '@jupyterlab/cells';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import {
  IOutputAreaModel,
  OutputArea,
  OutputAreaModel
} from '@jupyterlab/outputarea';
import { Kernel } from '@jupyterlab/services';
import {
  ITranslator,
  TranslationBundle,
  nullTranslator
} from '@jupyterlab/translation';
import { Panel, PanelLayout, Widget } from '@lumino/widgets';

/* eslint-disable jupyter/prefer-lazy-imports -- every opened notebook needs
   these at once, and together they are a few kilobytes. */
import {
  ASSIST_KEY,
  ASSIST_REQUEST_KEY,
  AssistAction,
  assistCode,
  finishedRecord,
  hasError,
  isAgentSource,
  withTurn
} from './assist';
import { TRANSLATION_DOMAIN } from './labels';
import { eachPanel } from './notebooks';
import { RUN_ACCEPTED_EVENT } from './proposalview';
import { TRANSCRIPT_MIME } from './record';
import { element } from './dom';
/* eslint-enable jupyter/prefer-lazy-imports */

/** The commands (their shortcuts and cell toolbar items are in schema/assist.json). */
export const FIX_CELL = 'qloop:fix-cell';
export const EXPLAIN_CELL = 'qloop:explain-cell';
export const EDIT_CELL = 'qloop:edit-cell-with-agent';

/** Classes of the widget under a cell, its Fix button, prompt box and assist area. */
export const ASSIST_CLASS = 'qloop-assist';
export const FIX_BUTTON_CLASS = 'qloop-assist-fix';
export const PROMPT_CLASS = 'qloop-assist-prompt';
export const AREA_CLASS = 'qloop-assist-area';

/** A question the kernel aborted is asked again this often, after this long. */
const MAX_RETRIES = 10;
const RETRY_MS = 300;

/** What the page asks to learn whether the kernel loaded qloop. */
const LOADED_EXPRESSION =
  "'qloop_kernel' in get_ipython().extension_manager.loaded";

/** Whether the kernel has loaded qloop, asked once per kernel (a no is asked again). */
class QloopProbe {
  private _known = new Map<string, boolean>();
  private _asking = new Map<string, Promise<boolean | null>>();

  /** The answer known for this kernel, or undefined. */
  known(kernel: Kernel.IKernelConnection | null | undefined): boolean {
    return kernel ? this._known.get(kernel.id) === true : false;
  }

  /**
   * Ask this kernel (a yes is kept until the kernel restarts); null when it
   * did not answer (it aborted the request, queued behind a failed cell).
   */
  ask(
    kernel: Kernel.IKernelConnection | null | undefined
  ): Promise<boolean | null> {
    if (!kernel) {
      return Promise.resolve(false);
    }
    if (this._known.get(kernel.id)) {
      return Promise.resolve(true);
    }
    const asking = this._asking.get(kernel.id);
    if (asking) {
      return asking;
    }
    const answer = kernel
      .requestExecute({
        code: '',
        silent: true,
        store_history: false,
        user_expressions: { qloop: LOADED_EXPRESSION }
      })
      .done.then(reply => {
        if (reply.content.status !== 'ok') {
          return null;
        }
        const found = reply.content.user_expressions as Record<
          string,
          { data?: Record<string, unknown> }
        >;
        return found['qloop']?.data?.['text/plain'] === 'True';
      })
      .catch(() => null)
      .then(loaded => {
        this._asking.delete(kernel.id);
        this._known.set(kernel.id, loaded === true);
        return loaded;
      });
    this._asking.set(kernel.id, answer);
    return answer;
  }

  /** The kernel restarted: it has to load qloop again. */
  forget(): void {
    this._known.clear();
  }
}

function button(className: string, text: string): HTMLButtonElement {
  const node = element('button', `qloop-assist-button ${className}`, text);
  node.type = 'button';
  return node;
}

/** The widget under one code cell: the Fix button, the prompt box, the assist area. */
class CellAssist extends Panel {
  readonly fix = button(FIX_BUTTON_CLASS, '');
  readonly output: OutputArea;
  private readonly _area = new Panel();
  private readonly _title = element('span', 'qloop-assist-title');
  private readonly _prompt = element('form', PROMPT_CLASS);
  private readonly _input = element('textarea', 'qloop-assist-input');

  constructor(
    cell: CodeCell,
    private readonly _trans: TranslationBundle,
    private readonly _asked: (action: AssistAction, text?: string) => void
  ) {
    super();
    this.addClass(ASSIST_CLASS);
    // Keys typed here are for the box and its buttons, not notebook shortcuts.
    this.node.setAttribute('data-lm-suppress-shortcuts', '');
    this.fix.textContent = _trans.__('Fix');
    this.fix.title = _trans.__("Ask the agent to fix this cell's error");
    this.fix.hidden = true;
    this.fix.addEventListener('click', () => this._asked('fix'));
    this.output = new OutputArea({
      model: new OutputAreaModel({ trusted: true }),
      rendermime: cell.outputArea.rendermime
    });
    this._buildPrompt();
    const controls = element('div', 'qloop-assist-controls');
    controls.append(this.fix, this._prompt);
    this.addWidget(new Widget({ node: controls }));
    this._buildArea();
    this.addWidget(this._area);
  }

  /** Show the area for a turn of `action`, emptied. */
  open(action: AssistAction): void {
    const titles: Record<AssistAction, string> = {
      fix: this._trans.__('qloop assist: Fix'),
      explain: this._trans.__('qloop assist: Explain'),
      edit: this._trans.__('qloop assist: Edit with agent')
    };
    this._title.textContent = titles[action];
    this._area.show();
    this._prompt.hidden = true;
  }

  /** Show the prompt box of Edit with agent, focused. */
  ask(): void {
    this._prompt.hidden = false;
    this._input.focus();
  }

  private _buildPrompt(): void {
    const form = this._prompt;
    form.hidden = true;
    form.setAttribute('aria-label', this._trans.__('Edit with agent'));
    this._input.rows = 2;
    this._input.placeholder = this._trans.__(
      'What should change in this cell? (Enter sends, Shift+Enter adds a line)'
    );
    this._input.setAttribute('aria-label', this._trans.__('Instruction'));
    const send = button('qloop-assist-send', this._trans.__('Ask the agent'));
    send.type = 'submit';
    const cancel = button('qloop-assist-cancel', this._trans.__('Cancel'));
    const submit = () => {
      const text = this._input.value;
      if (text.trim()) {
        this._input.value = '';
        this._asked('edit', text);
      }
    };
    form.addEventListener('submit', event => {
      event.preventDefault();
      submit();
    });
    this._input.addEventListener('keydown', event => {
      // The notebook's own key handling (Shift+Enter runs the cell) stays out.
      event.stopPropagation();
      if (event.key === 'Enter' && event.shiftKey) {
        event.preventDefault();
        const input = this._input;
        input.setRangeText(
          '\n',
          input.selectionStart,
          input.selectionEnd,
          'end'
        );
      } else if (event.key === 'Enter' && !event.isComposing) {
        event.preventDefault();
        submit();
      } else if (event.key === 'Escape') {
        event.preventDefault();
        form.hidden = true;
      }
    });
    cancel.addEventListener('click', () => {
      form.hidden = true;
    });
    form.append(this._input, send, cancel);
  }

  private _buildArea(): void {
    const area = this._area;
    area.addClass(AREA_CLASS);
    area.hide();
    area.node.setAttribute('role', 'region');
    area.node.setAttribute('aria-label', this._trans.__('qloop assist'));
    const head = element('div', 'qloop-assist-head');
    const close = button('qloop-assist-close', this._trans.__('Close'));
    close.title = this._trans.__('Close the qloop assist area');
    close.addEventListener('click', () => area.hide());
    head.append(this._title, close);
    area.addWidget(new Widget({ node: head }));
    area.addWidget(this.output);
  }
}

/** Fix, Explain and Edit with agent in one notebook view. */
export class PanelAssist {
  private readonly _probe = new QloopProbe();
  private readonly _assists = new WeakMap<CodeCell, CellAssist>();
  /** Cells whose run in this kernel failed (from this page): Fix applies. */
  private readonly _failed = new Set<string>();
  private readonly _watched = new WeakSet<ICodeCellModel>();
  private readonly _running = new Set<string>();
  private _retries = 0;
  private _retrying = false;

  constructor(
    readonly panel: NotebookPanel,
    private readonly _trans: TranslationBundle,
    private readonly _changed: () => void
  ) {
    const session = panel.sessionContext;
    session.statusChanged.connect(this._statusChanged, this);
    session.kernelChanged.connect(this._restarted, this);
    void session.ready.then(() => this._ask());
    NotebookActions.executed.connect(this._ran, this);
    panel.content.model?.cells.changed.connect(() => this._follow());
    panel.content.node.addEventListener(RUN_ACCEPTED_EVENT, event => {
      const target = event.target as Node | null;
      const cell = panel.content.widgets.find(
        widget => target !== null && widget.node.contains(target)
      );
      if (cell instanceof CodeCell) {
        event.stopPropagation();
        // After the bridge puts the accepted source in (its microtask).
        setTimeout(() => void this._runCell(cell), 0);
      }
    });
    panel.disposed.connect(() => {
      NotebookActions.executed.disconnect(this._ran, this);
      session.statusChanged.disconnect(this._statusChanged, this);
      session.kernelChanged.disconnect(this._restarted, this);
    });
    this._follow();
  }

  /** Whether the kernel is known to have qloop. */
  get ready(): boolean {
    return this._probe.known(this.panel.sessionContext.session?.kernel);
  }

  /** The active cell, where it is an ordinary code cell. */
  activeCodeCell(): CodeCell | null {
    const cell = this.panel.content.activeCell;
    if (!(cell instanceof CodeCell)) {
      return null;
    }
    return isAgentSource(cell.model.sharedModel.getSource()) ? null : cell;
  }

  /** Whether Fix applies to `cell`: its run in this kernel failed, and qloop is there. */
  canFix(cell: Cell | null): boolean {
    return (
      cell instanceof CodeCell &&
      this.ready &&
      this._failed.has(cell.model.id) &&
      !this._running.has(cell.model.id) &&
      !isAgentSource(cell.model.sharedModel.getSource())
    );
  }

  /** Run `action` about `cell` in the kernel; its outputs go to the cell's assist area. */
  async run(cell: CodeCell, action: AssistAction, text = ''): Promise<void> {
    const kernel = this.panel.sessionContext.session?.kernel;
    const view = this._assist(cell);
    if (!kernel || !view) {
      return;
    }
    view.open(action);
    const model = cell.model;
    this._running.add(model.id); // one turn about a cell at a time: no Fix meanwhile
    this._show(model.id);
    const code = assistCode(action, model.id, text);
    const future = kernel.requestExecute(
      { code, silent: false, store_history: false, stop_on_error: false },
      false,
      { cellId: model.id, [ASSIST_REQUEST_KEY]: action }
    );
    view.output.future = future;
    const outputs = view.output.model;
    const keep = () => this._keep(model, action, outputs);
    outputs.changed.connect(keep);
    try {
      await future.done;
    } catch {
      // The kernel's error shows in the area.
    } finally {
      keep();
      outputs.changed.disconnect(keep);
      this._running.delete(model.id);
      this._show(model.id);
      this._changed();
    }
  }

  /** Show the prompt box of Edit with agent on `cell`. */
  askEdit(cell: CodeCell): void {
    this._assist(cell)?.ask();
  }

  /** Keep the turn's finished record in the cell's metadata, beside its own. */
  private _keep(
    model: ICodeCellModel,
    action: AssistAction,
    outputs: IOutputAreaModel
  ): void {
    for (let index = 0; index < outputs.length; index++) {
      const record = finishedRecord(outputs.get(index).data[TRANSCRIPT_MIME]);
      if (record && !model.isDisposed) {
        const saved = model.getMetadata(ASSIST_KEY);
        const next = withTurn(saved, action, record);
        if (JSON.stringify(next) !== JSON.stringify(saved)) {
          model.setMetadata(ASSIST_KEY, next);
        }
      }
    }
  }

  private async _runCell(cell: CodeCell): Promise<void> {
    if (cell.isDisposed) {
      return;
    }
    await CodeCell.execute(cell, this.panel.sessionContext);
  }

  private _assist(cell: CodeCell): CellAssist | null {
    let view = this._assists.get(cell);
    if (view && !view.isDisposed) {
      return view;
    }
    if (!(cell.layout instanceof PanelLayout)) {
      return null;
    }
    const layout = cell.layout;
    view = new CellAssist(cell, this._trans, (action, text) => {
      void this.run(cell, action, text);
    });
    // Under the outputs (the traceback), above the footer.
    const at = layout.widgets.indexOf(cell.outputArea.parent ?? cell);
    layout.insertWidget(at >= 0 ? at + 1 : layout.widgets.length, view);
    this._assists.set(cell, view);
    return view;
  }

  /** Follow every code cell's outputs: an error that comes while it runs makes it failed. */
  private _follow(): void {
    for (const cell of this.panel.content.widgets) {
      if (cell instanceof CodeCell && !this._watched.has(cell.model)) {
        this._watched.add(cell.model);
        const model = cell.model;
        model.outputs.changed.connect(() => this._outputsChanged(model));
      }
    }
  }

  private _outputsChanged(model: ICodeCellModel): void {
    if (hasError(iterate(model))) {
      if (model.executionState === 'running') {
        this._failed.add(model.id);
        void this._ask();
      }
    } else {
      this._failed.delete(model.id);
    }
    this._show(model.id);
    this._changed();
  }

  /** A cell ran: a kernel that had no qloop may have loaded it. */
  private _ran(
    _: unknown,
    args: { notebook: unknown; success: boolean }
  ): void {
    if (args.notebook === this.panel.content && !this.ready) {
      void this._ask();
    }
  }

  private async _ask(): Promise<void> {
    const known = await this._probe.ask(
      this.panel.sessionContext.session?.kernel
    );
    // Not answered: queued behind a cell that failed, the kernel aborted it.
    this._retries = known === null ? this._retries + 1 : 0;
    if (known === null && this._retries <= MAX_RETRIES && !this._retrying) {
      this._retrying = true;
      setTimeout(() => {
        this._retrying = false;
        void this._ask();
      }, RETRY_MS);
    }
    this._failed.forEach(id => this._show(id));
    this._changed();
  }

  private _statusChanged(_: unknown, status: string): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this._restarted();
    }
  }

  private _restarted(): void {
    this._probe.forget();
    const failed = Array.from(this._failed);
    this._failed.clear();
    failed.forEach(id => this._show(id));
    void this._ask();
  }

  /** Show or hide the Fix button of cell `cellId`. */
  private _show(cellId: string): void {
    const cell = this.panel.content.widgets.find(w => w.model.id === cellId);
    if (!(cell instanceof CodeCell)) {
      return;
    }
    const applies = this.canFix(cell);
    const view = applies ? this._assist(cell) : this._assists.get(cell);
    if (view && !view.isDisposed) {
      view.fix.hidden = !applies;
    }
  }
}

function* iterate(model: ICodeCellModel): Iterable<{ type: string }> {
  for (let index = 0; index < model.outputs.length; index++) {
    yield model.outputs.get(index);
  }
}

/** The commands, in the palette, the context menu of code cells and the cell toolbar. */
function addCommands(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  assists: WeakMap<NotebookPanel, PanelAssist>,
  palette: ICommandPalette | null,
  trans: TranslationBundle
): void {
  const current = () => {
    const panel = tracker.currentWidget;
    return panel ? (assists.get(panel) ?? null) : null;
  };
  const cell = () => {
    const assist = current();
    return assist?.ready ? assist.activeCodeCell() : null;
  };
  app.commands.addCommand(FIX_CELL, {
    label: trans.__("Fix the selected cell's error"),
    caption: trans.__(
      'Ask the agent to fix the error of the selected cell: it proposes an edit you accept or reject'
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isEnabled: () => current()?.canFix(cell()) ?? false,
    execute: () => {
      const assist = current();
      const target = cell();
      if (assist && target && assist.canFix(target)) {
        return assist.run(target, 'fix');
      }
    }
  });
  app.commands.addCommand(EXPLAIN_CELL, {
    label: trans.__('Explain the selected cell'),
    caption: trans.__(
      'Ask the agent to explain the selected cell (and its error): nothing runs'
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isEnabled: () => cell() !== null,
    execute: () => {
      const target = cell();
      if (target) {
        return current()?.run(target, 'explain');
      }
    }
  });
  app.commands.addCommand(EDIT_CELL, {
    label: trans.__('Edit the selected cell with the agent'),
    caption: trans.__(
      'Say what should change: the agent proposes an edit of the cell you accept or reject'
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isEnabled: () => cell() !== null,
    execute: () => {
      const target = cell();
      if (target) {
        current()?.askEdit(target);
      }
    }
  });
  const category = trans.__('qloop');
  [FIX_CELL, EXPLAIN_CELL, EDIT_CELL].forEach((command, index) => {
    palette?.addItem({ command, category });
    app.contextMenu.addItem({
      command,
      selector: '.jp-Notebook .jp-CodeCell',
      rank: 61 + index
    });
  });
}

/** Fix, Explain and Edit with agent in every notebook view. */
export const assistPlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:assist',
  description:
    "Fix a failed cell, explain a cell or edit it with the agent, from the cell: the agent's answer shows beside it.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null,
    palette: ICommandPalette | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const assists = new WeakMap<NotebookPanel, PanelAssist>();
    const changed = () => app.commands.notifyCommandChanged();
    eachPanel(tracker, panel =>
      assists.set(panel, new PanelAssist(panel, trans, changed))
    );
    addCommands(app, tracker, assists, palette, trans);
  }
};
