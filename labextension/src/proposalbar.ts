/**
 * The bar on top of a cell the agent proposes, or proposes to edit: what the
 * proposal is, its risk class and the reasons for it, what its code would
 * change (run ahead by the kernel), the line diff, and the buttons that
 * decide it. Every text from the kernel is set as text.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { lineDiff } from './linediff';
import { IDecision, IProposal, reruns } from './proposals';
import { shownNodes } from './visible';
import { element } from './dom';

/** Class of the bar. */
export const BAR_CLASS = 'qloop-proposal';
/** Class of the diff, and of its added, removed and kept lines. */
export const DIFF_CLASS = 'qloop-proposal-diff';
export const DIFF_ADD_CLASS = 'qloop-diff-add';
export const DIFF_DEL_CLASS = 'qloop-diff-del';
export const DIFF_SAME_CLASS = 'qloop-diff-same';
/** Attribute of the bar with the risk class of the proposed code. */
export const RISK_ATTRIBUTE = 'data-qloop-risk';

/** Class of the line saying what the proposed code would change, or why it was not run ahead. */
export const EFFECT_AHEAD_CLASS = 'qloop-proposal-effect';

/** Risk classes shown as a warning. */
export const ALARMING_RISKS = ['destructive', 'external', 'unknown'];

/** What the bar needs. */
export interface IProposalBarOptions {
  proposal: IProposal;
  /** The source the proposal changes: the target's (edit), '' for a new cell. */
  before: string;
  trans: TranslationBundle;
  /** The user decided this proposal, or (all) every waiting one of its agent cell. */
  decide: (decision: IDecision, all: boolean) => void;
}

function button(className: string, text: string): HTMLButtonElement {
  const node = element('button', `qloop-proposal-button ${className}`, text);
  node.type = 'button';
  return node;
}

/** The line diff from `before` to `after` as a `<pre>`, one line per element. */
export function renderDiff(
  before: string,
  after: string,
  trans: TranslationBundle
): HTMLPreElement {
  const pre = element('pre', DIFF_CLASS);
  pre.setAttribute('aria-label', trans.__('Proposed change'));
  pre.tabIndex = 0; // a long diff scrolls: reachable by keyboard
  const marks = {
    add: ['+', DIFF_ADD_CLASS],
    del: ['-', DIFF_DEL_CLASS],
    same: [' ', DIFF_SAME_CLASS]
  };
  for (const line of lineDiff(before, after)) {
    const [mark, className] = marks[line.kind];
    // Every character that would run, as the approval card shows code: an
    // invisible or confusable character and a long run of blanks are marked.
    const span = element('span', className, mark);
    span.appendChild(shownNodes(pre.ownerDocument, line.text, trans));
    pre.appendChild(span);
  }
  return pre;
}

function label(proposal: IProposal, trans: TranslationBundle): HTMLElement {
  const header = element('div', 'qloop-proposal-header');
  header.appendChild(
    element(
      'span',
      'qloop-proposal-label',
      proposal.kind === 'edit'
        ? trans.__('Proposed by the agent · edit of this cell')
        : proposal.run
          ? trans.__('Proposed by the agent · new cell, runs when accepted')
          : trans.__('Proposed by the agent · new cell')
    )
  );
  if (proposal.risk !== '') {
    header.appendChild(
      element(
        'span',
        'qloop-proposal-risk',
        trans.__('class: %1', proposal.risk)
      )
    );
  }
  return header;
}

function reasonList(reasons: readonly string[]): HTMLElement | null {
  if (reasons.length === 0) {
    return null;
  }
  const list = element('ul', 'qloop-proposal-reasons');
  reasons.forEach(reason =>
    list.appendChild(element('li', 'qloop-proposal-reason', reason))
  );
  return list;
}

/**
 * What the proposed code would change, from the kernel's run ahead that it
 * took back ("would change: df: DataFrame 5×1 → 5×2, added column b"), or
 * the kernel's note saying why it was not run ahead; as text.
 */
function effectLine(
  proposal: IProposal,
  trans: TranslationBundle
): HTMLElement | null {
  const effect = proposal.effect;
  if (!effect) {
    return null;
  }
  const text =
    effect.note ||
    (effect.changes.length > 0
      ? trans.__('would change: %1', effect.changes.join('; '))
      : trans.__('would change no variables'));
  const line = element('div', EFFECT_AHEAD_CLASS, text);
  line.classList.toggle(`${EFFECT_AHEAD_CLASS}-note`, effect.note !== '');
  return line;
}

/** The inline form that asks for an optional reason before rejecting. */
function rejectForm(
  trans: TranslationBundle,
  decide: IProposalBarOptions['decide'],
  buttons: HTMLElement
): { form: HTMLFormElement; open: (all: boolean, from: HTMLElement) => void } {
  const form = element('form', 'qloop-proposal-reject-form');
  form.hidden = true;
  const field = element('label', 'qloop-proposal-reason-label');
  field.appendChild(
    element('span', '', trans.__('Reason for rejecting (optional)'))
  );
  const input = element('input', 'qloop-proposal-reason-input');
  input.type = 'text';
  field.appendChild(input);
  const confirm = element(
    'button',
    'qloop-proposal-button qloop-proposal-confirm'
  );
  confirm.type = 'submit';
  const cancel = button('qloop-proposal-cancel', trans.__('Cancel'));
  form.append(field, confirm, cancel);
  let all = false;
  let opener: HTMLElement | null = null;
  const close = () => {
    form.hidden = true;
    buttons.hidden = false;
    opener?.focus();
  };
  const submit = () =>
    decide({ decision: 'rejected', reason: input.value.trim() }, all);
  form.addEventListener('submit', event => {
    event.preventDefault();
    submit();
  });
  cancel.addEventListener('click', close);
  form.addEventListener('keydown', event => {
    if (event.key === 'Escape') {
      event.preventDefault();
      close();
    } else if (
      event.key === 'Enter' &&
      event.target === input &&
      !event.isComposing
    ) {
      // In a notebook the browser's implicit submission does not happen.
      event.preventDefault();
      submit();
    }
  });
  const open = (rejectAll: boolean, from: HTMLElement) => {
    all = rejectAll;
    opener = from;
    confirm.textContent = rejectAll
      ? trans.__('Reject all')
      : trans.__('Reject');
    buttons.hidden = true;
    form.hidden = false;
    input.focus();
  };
  return { form, open };
}

/** Build the bar of a proposal. */
export function proposalBar(options: IProposalBarOptions): HTMLElement {
  const { proposal, trans, decide } = options;
  const bar = element('div', BAR_CLASS);
  bar.setAttribute('role', 'group');
  bar.setAttribute('aria-label', trans.__('Proposal by the agent'));
  // Keys typed in the bar are for its buttons and field, not notebook shortcuts.
  bar.setAttribute('data-lm-suppress-shortcuts', '');
  bar.dataset.qloopProposal = proposal.id;
  if (proposal.risk !== '') {
    bar.setAttribute(RISK_ATTRIBUTE, proposal.risk);
    bar.classList.toggle(
      'qloop-proposal-alarming',
      ALARMING_RISKS.includes(proposal.risk)
    );
  }
  bar.appendChild(label(proposal, trans));
  const reasons = reasonList(proposal.reasons);
  if (reasons) {
    bar.appendChild(reasons);
  }
  const effect = effectLine(proposal, trans);
  if (effect) {
    bar.appendChild(effect);
  }
  bar.appendChild(renderDiff(options.before, proposal.source, trans));

  const buttons = element('div', 'qloop-proposal-buttons');
  const accept = button(
    'qloop-proposal-accept',
    proposal.run ? trans.__('Accept and run') : trans.__('Accept')
  );
  const acceptRun = button(
    'qloop-proposal-accept-run',
    trans.__('Accept and run')
  );
  acceptRun.hidden = !reruns(proposal);
  const reject = button('qloop-proposal-reject', trans.__('Reject'));
  const acceptAll = button('qloop-proposal-accept-all', trans.__('Accept all'));
  const rejectAll = button('qloop-proposal-reject-all', trans.__('Reject all'));
  const { form, open } = rejectForm(trans, decide, buttons);
  accept.addEventListener('click', () =>
    decide({ decision: 'accepted', reason: '' }, false)
  );
  acceptRun.addEventListener('click', () =>
    decide({ decision: 'accepted', reason: '', run: true }, false)
  );
  acceptAll.addEventListener('click', () =>
    decide({ decision: 'accepted', reason: '' }, true)
  );
  reject.addEventListener('click', () => open(false, reject));
  rejectAll.addEventListener('click', () => open(true, rejectAll));
  buttons.append(accept, acceptRun, reject, acceptAll, rejectAll);
  bar.append(buttons, form);
  setWaitingCount(bar, 1, trans);
  return bar;
}

/** Show the all-buttons while the agent cell has two or more proposals waiting. */
export function setWaitingCount(
  bar: HTMLElement,
  count: number,
  trans: TranslationBundle
): void {
  const all = bar.querySelectorAll<HTMLButtonElement>(
    '.qloop-proposal-accept-all, .qloop-proposal-reject-all'
  );
  all.forEach(node => {
    node.hidden = count < 2;
    node.title = trans._n(
      'Decide the %1 waiting proposal of this agent cell',
      'Decide the %1 waiting proposals of this agent cell',
      count
    );
  });
}

/** Show the diff again against the target's current source (edited meanwhile). */
export function updateDiff(
  bar: HTMLElement,
  before: string,
  after: string,
  trans: TranslationBundle
): void {
  bar
    .querySelector(`.${DIFF_CLASS}`)
    ?.replaceWith(renderDiff(before, after, trans));
}
