/**
 * The approval cards of outside agents' requests (Claude Code, Cursor, ...
 * reaching the kernel through qloop's MCP server), on top of the notebook:
 * what the request is, its risk class and the reasons, the code with every
 * invisible or confusable character marked (for an edit of a cell, the line
 * diff from the cell's source; for a run of a cell, the cell's source as it
 * is now), and the buttons that decide it.
 * Every text from the server is set as text.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import type {
  OutsideApproval,
  OutsideCellChange,
  OutsideDecision
} from './generated/protocol';

import { element } from './dom';
import { ALARMING_RISKS, RISK_ATTRIBUTE, renderDiff } from './proposalbar';
import { pieces, shownNodes } from './visible';

/** Class of a card, and of the board on top of a notebook that holds them. */
export const OUTSIDE_CLASS = 'qloop-outside';
export const OUTSIDE_BOARD_CLASS = 'qloop-outside-board';
/** Attribute of a card with the id of its request. */
export const OUTSIDE_ID_ATTRIBUTE = 'data-qloop-outside-id';
/** Attribute of a card with the state of its request: waiting or running. */
export const OUTSIDE_STATE_ATTRIBUTE = 'data-qloop-outside-state';
/** Attribute of a cell change's card with its operation: add, edit or run. */
export const OUTSIDE_CELL_ATTRIBUTE = 'data-qloop-outside-cell';
export { RISK_ATTRIBUTE };

/**
 * What the user decided, as the page posts it to the server's decide route
 * (the item's id is added there): the server's `OutsideDecision`.
 */
export type DecisionBody = Omit<OutsideDecision, 'id'>;

/** How the server took a decision or a stop. */
export type PostOutcome =
  | { outcome: 'ok' }
  /** Already decided (by another page): the card goes. */
  | { outcome: 'taken' }
  | { outcome: 'failed'; message: string };

/** What the cards' buttons do, with the request as the card shows it. */
export interface IOutsideActions {
  decide(item: OutsideApproval, decision: DecisionBody): Promise<PostOutcome>;
  stop(id: string): Promise<PostOutcome>;
}

/** What the card of a cell change reads of the notebook. */
export interface IOutsideCells {
  /** The source of the cell with this id; null when the notebook has none. */
  source(cellId: string): string | null;
  /** The 1-based place of the cell with this id; null when the notebook has none. */
  position(cellId: string): number | null;
}

function button(className: string, text: string): HTMLButtonElement {
  const node = element('button', `qloop-outside-button ${className}`, text);
  node.type = 'button';
  return node;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((text, i) => text === b[i]);
}

/** The card of one request; `update` changes it in place, never rebuilding its fields. */
export class OutsideCard {
  readonly node = element('div', OUTSIDE_CLASS);

  constructor(
    item: OutsideApproval,
    private readonly _trans: TranslationBundle,
    private readonly _cells: IOutsideCells | null,
    private readonly _send: (decision: DecisionBody) => void,
    private readonly _stop: () => void
  ) {
    const trans = _trans;
    this.node.setAttribute('role', 'region');
    // Keys typed in the card are for its buttons and fields, not shortcuts.
    this.node.setAttribute('data-lm-suppress-shortcuts', '');
    this._code.tabIndex = 0; // a long code scrolls: reachable by keyboard
    this._editor.spellcheck = false;
    this._editor.hidden = true;
    this._unseen.hidden = true;
    this._diff.hidden = true;
    this._where.hidden = true;
    this._reason.type = 'text';
    this._reason.placeholder = trans.__('reason (optional, sent to the agent)');
    this._reason.setAttribute('aria-label', trans.__('Reason'));
    this._unverified.textContent = trans.__('unverified');
    this._unverified.title = trans.__(
      'This name is only what the client says about itself. Approving a call confirms this client for the rest of its session, under this name or the one you type.'
    );
    this._name.type = 'text';
    this._name.placeholder = trans.__('name this client (optional)');
    this._name.setAttribute('aria-label', trans.__('Name of this client'));
    this._error.setAttribute('role', 'alert');
    this._error.hidden = true;
    this._wireButtons();
    const header = element('div', 'qloop-outside-header');
    header.append(this._title, this._unverified, this._risk);
    const buttons = element('div', 'qloop-outside-buttons');
    buttons.append(
      this._approve,
      this._deny,
      this._always,
      this._edit,
      this._runEdited,
      this._cancel
    );
    const controls = element('div', 'qloop-outside-controls');
    controls.append(this._reason, this._name, buttons);
    this._waiting.append(
      header,
      this._reasons,
      this._where,
      this._code,
      this._diff,
      this._editor,
      this._unseen,
      controls
    );
    this._running.append(this._runningLine, this._stopButton);
    this.node.append(this._waiting, this._running, this._error);
    this._show(item);
  }

  /** The request as the card shows it now. */
  get item(): OutsideApproval {
    return this._item;
  }

  /** Show the request's latest state, and take clicks again (a new answer came). */
  update(item: OutsideApproval): void {
    this._show(item);
    this._error.hidden = true;
    this.setEnabled(true);
  }

  /** Show a cell change against the notebook as it is now (edited meanwhile). */
  refresh(): void {
    if (this._item.cell) {
      this._showCode(this._item);
    }
  }

  /** Take clicks, or not while a decision is on its way. */
  setEnabled(enabled: boolean): void {
    this.node
      .querySelectorAll('button')
      .forEach(node => (node.disabled = !enabled));
  }

  /** Say that a decision or stop did not reach the server; the buttons work again. */
  fail(message: string): void {
    this._error.textContent = this._trans.__('Not sent: %1', message);
    this._error.hidden = false;
    this.setEnabled(true);
  }

  private _show(item: OutsideApproval): void {
    const trans = this._trans;
    const old = this._item as OutsideApproval | undefined;
    this._item = item;
    this.node.setAttribute(OUTSIDE_ID_ATTRIBUTE, item.id);
    this.node.setAttribute(OUTSIDE_STATE_ATTRIBUTE, item.state);
    this.node.setAttribute(RISK_ATTRIBUTE, item.risk);
    if (item.cell) {
      this.node.setAttribute(OUTSIDE_CELL_ATTRIBUTE, item.cell.op);
    } else {
      this.node.removeAttribute(OUTSIDE_CELL_ATTRIBUTE);
    }
    this.node.setAttribute(
      'aria-label',
      trans.__('Request from outside agent %1', item.client)
    );
    this.node.classList.toggle(
      'qloop-outside-alarming',
      ALARMING_RISKS.includes(item.risk)
    );
    this._title.textContent = item.title;
    this._unverified.hidden = item.verified !== false;
    this._name.hidden = item.verified !== false;
    this._risk.textContent = trans.__('class: %1', item.risk);
    this._risk.hidden = item.risk === '';
    if (!old || !sameList(old.reasons, item.reasons)) {
      this._reasons.replaceChildren(
        ...item.reasons.map(text => element('li', 'qloop-outside-why', text))
      );
      this._reasons.hidden = item.reasons.length === 0;
    }
    this._showWords(item);
    if (!item.editable && this._editing) {
      this._editing = false;
    }
    this._showCode(item);
    this._runningLine.textContent = trans.__(
      '%1 · %2 · running…',
      item.client,
      item.tool
    );
    this._waiting.hidden = item.state === 'running';
    this._running.hidden = item.state !== 'running';
  }

  /** The buttons' words: a cell change is accepted or rejected, a call approved or denied. */
  private _showWords(item: OutsideApproval): void {
    const trans = this._trans;
    const run = item.cell?.op === 'run';
    const cell = item.cell !== undefined && !run;
    this._approve.textContent = cell ? trans.__('Accept') : trans.__('Approve');
    this._deny.textContent = cell ? trans.__('Reject') : trans.__('Deny');
    this._runEdited.textContent = cell
      ? trans.__('Accept edited')
      : trans.__('Run edited');
    this._always.title = run
      ? trans.__(
          "Approve, and run the cells this client's later %1 calls ask for in this notebook without asking, until the Jupyter server stops",
          item.tool
        )
      : cell
        ? trans.__(
            "Accept, and apply this client's later %1 changes to this notebook without asking, until the Jupyter server stops",
            item.tool
          )
        : trans.__(
            "Approve, and run this client's later %1 calls of this class or milder without asking, until the Jupyter server stops",
            item.tool
          );
    this._code.setAttribute(
      'aria-label',
      run
        ? trans.__('Source of the cell to run, as it is now')
        : cell
          ? trans.__('Source of the proposed cell')
          : trans.__('Code the agent would run')
    );
    this._editor.setAttribute(
      'aria-label',
      cell ? trans.__('Edited source') : trans.__('Edited code')
    );
  }

  /**
   * The code, or for an edit of a cell in the notebook the line diff from its
   * source, or for a run the cell's source as it is now; for a cell change, a
   * line saying which cell or where it goes.
   */
  private _showCode(item: OutsideApproval): void {
    const cell = item.cell;
    this._where.hidden = cell === undefined;
    this._where.textContent = cell ? this._whereText(cell) : '';
    const code =
      cell?.op === 'run'
        ? (this._cells?.source(cell.cell_id) ?? null)
        : item.code;
    this._noCode = code === null;
    const before =
      cell?.op === 'edit' ? (this._cells?.source(cell.cell_id) ?? null) : null;
    this._showsDiff = before !== null;
    if (
      before !== null &&
      (this._diffShown?.before !== before ||
        this._diffShown.after !== item.code)
    ) {
      const diff = renderDiff(before, item.code, this._trans);
      this._diff.replaceWith(diff);
      this._diff = diff;
      this._diffShown = { before, after: item.code };
    }
    if (code !== null && this._codeShown !== code) {
      this._code.replaceChildren(shownNodes(document, code, this._trans));
      this._codeShown = code;
    }
    this._layout();
  }

  private _whereText(cell: OutsideCellChange): string {
    const trans = this._trans;
    if (cell.op === 'run') {
      const at = this._cells?.position(cell.cell_id) ?? null;
      return at === null
        ? trans.__(
            'Run of a cell that is not in the notebook (id %1): approving runs nothing',
            cell.cell_id
          )
        : trans.__('Run of cell %1', at);
    }
    if (cell.op === 'edit') {
      const at = this._cells?.position(cell.cell_id) ?? null;
      return at === null
        ? trans.__(
            'Edit of a cell that is not in the notebook (id %1): accepting changes nothing',
            cell.cell_id
          )
        : trans.__('Edit of cell %1', at);
    }
    if (cell.after_cell_id === null) {
      return trans.__('New %1 cell, at the end', cell.cell_type);
    }
    const at = this._cells?.position(cell.after_cell_id) ?? null;
    return at === null
      ? trans.__(
          'New %1 cell, after a cell that is not in the notebook (id %2): accepting adds nothing',
          cell.cell_type,
          cell.after_cell_id
        )
      : trans.__('New %1 cell, after cell %2', cell.cell_type, at);
  }

  private _wireButtons(): void {
    const send = (decision: DecisionBody['decision'], code?: string) => {
      const reason = this._reason.value.trim();
      const name = this._name.hidden ? '' : this._name.value.trim();
      this._send({
        decision,
        reason,
        ...(code === undefined ? {} : { code }),
        ...(name && decision !== 'deny' ? { name } : {})
      });
    };
    this._approve.addEventListener('click', () => send('approve'));
    this._deny.addEventListener('click', () => send('deny'));
    this._always.addEventListener('click', () => send('always'));
    this._edit.addEventListener('click', () => this._setEditing(true));
    this._cancel.addEventListener('click', () => this._setEditing(false));
    this._runEdited.addEventListener('click', () =>
      send('edit', this._editor.value)
    );
    this._editor.addEventListener('input', () => this._showUnseen());
    this._editor.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        this._setEditing(false);
      }
    });
    this._stopButton.addEventListener('click', () => this._stop());
  }

  private _setEditing(editing: boolean): void {
    this._editing = editing;
    if (editing) {
      this._editor.value = this._item.code;
      this._editor.rows = Math.min(16, this._item.code.split('\n').length + 1);
    }
    this._layout();
    this._showUnseen();
    (editing ? this._editor : this._edit).focus();
  }

  /**
   * While editing: where the editor's text holds characters a text box does
   * not show (invisible or confusable ones, long blank runs), that text as it
   * runs, every one of them marked.
   */
  private _showUnseen(): void {
    const value = this._editor.value;
    const unseen =
      this._editing && pieces(value).some(piece => piece.mark !== null);
    this._unseen.hidden = !unseen;
    if (!unseen) {
      this._unseen.replaceChildren();
      return;
    }
    const pre = element('pre', 'qloop-outside-unseen-code');
    pre.appendChild(shownNodes(document, value, this._trans));
    this._unseen.replaceChildren(
      element(
        'div',
        'qloop-outside-unseen-note',
        this._trans.__(
          "The editor's text holds characters it does not show; as it runs:"
        )
      ),
      pre
    );
  }

  /** Which of the code, the diff, the editor and the buttons are shown. */
  private _layout(): void {
    const editing = this._editing;
    this._code.hidden = editing || this._showsDiff || this._noCode;
    this._diff.hidden = editing || !this._showsDiff;
    this._editor.hidden = !editing;
    this._runEdited.hidden = !editing;
    this._cancel.hidden = !editing;
    this._approve.hidden = editing;
    this._always.hidden = editing || this._item.grantable === false;
    this._edit.hidden =
      editing || !this._item.editable || this._item.cell?.op === 'run';
  }

  private _item!: OutsideApproval;
  private _editing = false;
  private _showsDiff = false;
  /** A run of a cell the notebook does not have: no source to show. */
  private _noCode = false;
  private _codeShown: string | null = null;
  private _diffShown: { before: string; after: string } | null = null;
  private readonly _waiting = element('div', 'qloop-outside-waiting');
  private readonly _title = element('span', 'qloop-outside-title');
  private readonly _unverified = element('span', 'qloop-outside-unverified');
  private readonly _risk = element('span', 'qloop-outside-risk');
  private readonly _reasons = element('ul', 'qloop-outside-reasons');
  private readonly _where = element('div', 'qloop-outside-where');
  private readonly _code = element('pre', 'qloop-outside-code');
  private _diff: HTMLPreElement = renderDiff('', '', this._trans);
  private readonly _editor = element('textarea', 'qloop-outside-editor');
  private readonly _unseen = element('div', 'qloop-outside-unseen');
  private readonly _reason = element('input', 'qloop-outside-reason');
  private readonly _name = element('input', 'qloop-outside-name');
  private readonly _approve = button(
    'qloop-outside-approve',
    this._trans.__('Approve')
  );
  private readonly _deny = button('qloop-outside-deny', this._trans.__('Deny'));
  private readonly _always = button(
    'qloop-outside-always',
    this._trans.__('Always allow')
  );
  private readonly _edit = button('qloop-outside-edit', this._trans.__('Edit'));
  private readonly _runEdited = hiddenButton(
    'qloop-outside-run-edited',
    this._trans.__('Run edited')
  );
  private readonly _cancel = hiddenButton(
    'qloop-outside-cancel',
    this._trans.__('Cancel')
  );
  private readonly _running = element('div', 'qloop-outside-running');
  private readonly _runningLine = element('span', 'qloop-outside-running-line');
  private readonly _stopButton = button(
    'qloop-outside-stop',
    this._trans.__('Stop')
  );
  private readonly _error = element('div', 'qloop-outside-error');
}

function hiddenButton(className: string, text: string): HTMLButtonElement {
  const node = button(className, text);
  node.hidden = true;
  return node;
}

/** What a board needs. */
export interface IOutsideBoardOptions {
  trans: TranslationBundle;
  actions: IOutsideActions;
  /** The notebook, as the cards of cell changes read it. */
  cells?: IOutsideCells;
  /** Where the focus goes when the card that held it goes. */
  restoreFocus?: () => void;
}

/**
 * The cards of a notebook's requests, on top of one view of it. Its height
 * follows its cards: the panel above it lays it out with a fixed size.
 */
export class OutsideBoard extends Widget {
  constructor(private readonly _options: IOutsideBoardOptions) {
    super();
    this.addClass(OUTSIDE_BOARD_CLASS);
    this.node.appendChild(this._list);
    this._sizer = new ResizeObserver(() => this._fitToCards());
    this._sizer.observe(this._list);
    this.hide();
  }

  /** The ids of the cards shown, in order. */
  get shown(): string[] {
    return Array.from(this._cards.keys());
  }

  /** Show these requests: new cards added, shown ones updated, others gone. */
  setRequests(items: readonly OutsideApproval[]): void {
    const wanted = new Set(items.map(item => item.id));
    for (const id of Array.from(this._cards.keys())) {
      if (!wanted.has(id)) {
        this.drop(id);
      }
    }
    for (const item of items) {
      const card = this._cards.get(item.id);
      if (card) {
        card.update(item);
      } else {
        this._add(item);
      }
    }
    this._fitToCards();
  }

  /** Show the cell changes against the notebook as it is now. */
  refreshCells(): void {
    const changes = Array.from(this._cards.values()).filter(
      card => card.item.cell !== undefined
    );
    if (changes.length > 0) {
      changes.forEach(card => card.refresh());
      this._fitToCards();
    }
  }

  /** Take the card of a request away (decided elsewhere, or no longer listed). */
  drop(id: string): void {
    const card = this._cards.get(id);
    if (!card) {
      return;
    }
    const hadFocus = card.node.contains(document.activeElement);
    this._cards.delete(id);
    card.node.remove();
    this._fitToCards();
    if (hadFocus) {
      this._options.restoreFocus?.();
    }
  }

  dispose(): void {
    this._sizer.disconnect();
    this._cards.clear();
    super.dispose();
  }

  private _add(item: OutsideApproval): void {
    const { actions, trans } = this._options;
    const after = (outcome: PostOutcome) => {
      if (this._cards.get(item.id) !== card) {
        return;
      }
      if (outcome.outcome === 'taken') {
        this.drop(item.id);
      } else if (outcome.outcome === 'failed') {
        card.fail(outcome.message);
      }
    };
    const card: OutsideCard = new OutsideCard(
      item,
      trans,
      this._options.cells ?? null,
      decision => {
        card.setEnabled(false);
        void actions.decide(card.item, decision).then(after);
      },
      () => {
        card.setEnabled(false);
        void actions.stop(item.id).then(after);
      }
    );
    this._cards.set(item.id, card);
    this._list.appendChild(card.node);
  }

  /** Show the board while it has cards, as tall as they are. */
  private _fitToCards(): void {
    if (this.isDisposed) {
      return;
    }
    const empty = this._cards.size === 0;
    this.setHidden(empty);
    const height = empty ? 0 : this._list.getBoundingClientRect().height;
    const minHeight = `${Math.ceil(height)}px`;
    if (this.node.style.minHeight !== minHeight) {
      this.node.style.minHeight = minHeight;
      this.parent?.fit();
    }
  }

  private readonly _list = element('div', 'qloop-outside-cards');
  private readonly _cards = new Map<string, OutsideCard>();
  private readonly _sizer: ResizeObserver;
}
