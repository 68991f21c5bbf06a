/**
 * The approval cards of outside agents' requests (Claude Code, Cursor, ...
 * reaching the kernel through qloop's MCP server), on top of the notebook:
 * what the request is, its risk class and the reasons, the code with every
 * invisible or confusable character marked, and the buttons that decide it.
 * Every text from the server is set as text.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { RISK_ATTRIBUTE } from './proposalbar';
import { shownNodes } from './visible';

/** Class of a card, and of the board on top of a notebook that holds them. */
export const OUTSIDE_CLASS = 'qloop-outside';
export const OUTSIDE_BOARD_CLASS = 'qloop-outside-board';
/** Attribute of a card with the id of its request. */
export const OUTSIDE_ID_ATTRIBUTE = 'data-qloop-outside-id';
/** Attribute of a card with the state of its request: waiting or running. */
export const OUTSIDE_STATE_ATTRIBUTE = 'data-qloop-outside-state';
export { RISK_ATTRIBUTE };

/** Risk classes shown as a warning (as on the proposal bar). */
const ALARMING_RISKS = ['destructive', 'external', 'unknown'];

/** A call of an outside agent that waits for the user, or runs once approved. */
export interface IOutsideApproval {
  id: string;
  kind: 'approval';
  state: 'waiting' | 'running';
  /** The agent's name as it announced itself, e.g. "claude-code". */
  client: string;
  tool: string;
  title: string;
  code: string;
  /** read, write, compute, destructive, external or unknown. */
  risk: string;
  reasons: string[];
  editable: boolean;
}

/** What the user decided, as the server takes it. */
export interface IOutsideDecision {
  decision: 'approve' | 'deny' | 'always' | 'edit';
  reason: string;
  /** The edited code, with "edit" only. */
  code?: string;
}

/** How the server took a decision or a stop. */
export type PostOutcome =
  | { outcome: 'ok' }
  /** Already decided (by another page): the card goes. */
  | { outcome: 'taken' }
  | { outcome: 'failed'; message: string };

/** What the cards' buttons do. */
export interface IOutsideActions {
  decide(id: string, decision: IOutsideDecision): Promise<PostOutcome>;
  stop(id: string): Promise<PostOutcome>;
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
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
    item: IOutsideApproval,
    private readonly _trans: TranslationBundle,
    private readonly _send: (decision: IOutsideDecision) => void,
    private readonly _stop: () => void
  ) {
    const trans = _trans;
    this.node.setAttribute('role', 'region');
    // Keys typed in the card are for its buttons and fields, not shortcuts.
    this.node.setAttribute('data-lm-suppress-shortcuts', '');
    this._code.tabIndex = 0; // a long code scrolls: reachable by keyboard
    this._code.setAttribute('aria-label', trans.__('Code the agent would run'));
    this._editor.setAttribute('aria-label', trans.__('Edited code'));
    this._editor.spellcheck = false;
    this._editor.hidden = true;
    this._reason.type = 'text';
    this._reason.placeholder = trans.__('reason (optional, sent to the agent)');
    this._reason.setAttribute('aria-label', trans.__('Reason'));
    this._error.setAttribute('role', 'alert');
    this._error.hidden = true;
    this._wireButtons();
    const header = element('div', 'qloop-outside-header');
    header.append(this._title, this._risk);
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
    controls.append(this._reason, buttons);
    this._waiting.append(
      header,
      this._reasons,
      this._code,
      this._editor,
      controls
    );
    this._running.append(this._runningLine, this._stopButton);
    this.node.append(this._waiting, this._running, this._error);
    this._show(item);
  }

  /** The request as the card shows it now. */
  get item(): IOutsideApproval {
    return this._item;
  }

  /** Show the request's latest state, and take clicks again (a new answer came). */
  update(item: IOutsideApproval): void {
    this._show(item);
    this._error.hidden = true;
    this.setEnabled(true);
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

  private _show(item: IOutsideApproval): void {
    const trans = this._trans;
    const old = this._item as IOutsideApproval | undefined;
    this._item = item;
    this.node.setAttribute(OUTSIDE_ID_ATTRIBUTE, item.id);
    this.node.setAttribute(OUTSIDE_STATE_ATTRIBUTE, item.state);
    this.node.setAttribute(RISK_ATTRIBUTE, item.risk);
    this.node.setAttribute(
      'aria-label',
      trans.__('Request from outside agent %1', item.client)
    );
    this.node.classList.toggle(
      'qloop-outside-alarming',
      ALARMING_RISKS.includes(item.risk)
    );
    this._title.textContent = item.title;
    this._risk.textContent = trans.__('class: %1', item.risk);
    this._risk.hidden = item.risk === '';
    if (!old || !sameList(old.reasons, item.reasons)) {
      this._reasons.replaceChildren(
        ...item.reasons.map(text => element('li', 'qloop-outside-why', text))
      );
      this._reasons.hidden = item.reasons.length === 0;
    }
    if (!old || old.code !== item.code) {
      this._code.replaceChildren(shownNodes(document, item.code, trans));
    }
    this._always.title = trans.__(
      "Approve, and run this client's later %1 calls of this class or milder without asking, until the Jupyter server stops",
      item.tool
    );
    if (!item.editable && this._editing) {
      this._setEditing(false, false);
    }
    this._edit.hidden = !item.editable || this._editing;
    this._runningLine.textContent = trans.__(
      '%1 · %2 · running…',
      item.client,
      item.tool
    );
    this._waiting.hidden = item.state === 'running';
    this._running.hidden = item.state !== 'running';
  }

  private _wireButtons(): void {
    const send = (decision: IOutsideDecision['decision'], code?: string) => {
      const reason = this._reason.value.trim();
      this._send(
        code === undefined ? { decision, reason } : { decision, reason, code }
      );
    };
    this._approve.addEventListener('click', () => send('approve'));
    this._deny.addEventListener('click', () => send('deny'));
    this._always.addEventListener('click', () => send('always'));
    this._edit.addEventListener('click', () => this._setEditing(true));
    this._cancel.addEventListener('click', () => this._setEditing(false));
    this._runEdited.addEventListener('click', () =>
      send('edit', this._editor.value)
    );
    this._editor.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        this._setEditing(false);
      }
    });
    this._stopButton.addEventListener('click', () => this._stop());
  }

  private _setEditing(editing: boolean, focus = true): void {
    this._editing = editing;
    if (editing) {
      this._editor.value = this._item.code;
      this._editor.rows = Math.min(16, this._item.code.split('\n').length + 1);
    }
    this._code.hidden = editing;
    this._editor.hidden = !editing;
    this._runEdited.hidden = !editing;
    this._cancel.hidden = !editing;
    this._approve.hidden = editing;
    this._always.hidden = editing;
    this._edit.hidden = editing || !this._item.editable;
    if (focus) {
      (editing ? this._editor : this._edit).focus();
    }
  }

  private _item!: IOutsideApproval;
  private _editing = false;
  private readonly _waiting = element('div', 'qloop-outside-waiting');
  private readonly _title = element('span', 'qloop-outside-title');
  private readonly _risk = element('span', 'qloop-outside-risk');
  private readonly _reasons = element('ul', 'qloop-outside-reasons');
  private readonly _code = element('pre', 'qloop-outside-code');
  private readonly _editor = element('textarea', 'qloop-outside-editor');
  private readonly _reason = element('input', 'qloop-outside-reason');
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
  setRequests(items: readonly IOutsideApproval[]): void {
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

  private _add(item: IOutsideApproval): void {
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
      decision => {
        card.setEnabled(false);
        void actions.decide(item.id, decision).then(after);
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
