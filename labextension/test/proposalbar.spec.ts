/**
 * The proposal bar: what the proposal is, in text only; real buttons that
 * decide it; the all-buttons only while two or more proposals of the agent
 * cell wait; an inline reason field before rejecting.
 */
import { nullTranslator } from '@jupyterlab/translation';

import {
  DIFF_ADD_CLASS,
  DIFF_CLASS,
  DIFF_DEL_CLASS,
  EFFECT_AHEAD_CLASS,
  RISK_ATTRIBUTE,
  proposalBar,
  setWaitingCount,
  updateDiff
} from '../src/proposalbar';
import { IDecision, IProposal } from '../src/proposals';
import { charMark, runMark } from '../src/visible';

const trans = nullTranslator.load('qloop');
const EVIL = '<img src=x onerror="window.hacked = 1">';

function proposal(fields: Partial<IProposal> = {}): IProposal {
  return {
    id: 'p1',
    kind: 'add',
    cellType: 'code',
    source: 'df = df.dropna()\nplot(df)',
    cellId: 'new',
    agentCell: 'agent',
    risk: 'write',
    reasons: ['line 1: rebinds df'],
    ...fields
  };
}

function render(fields: Partial<IProposal> = {}, before = '') {
  const decisions: [IDecision, boolean][] = [];
  const bar = proposalBar({
    proposal: proposal(fields),
    before,
    trans,
    decide: (decision, all) => decisions.push([decision, all])
  });
  document.body.appendChild(bar);
  const get = (selector: string) => bar.querySelector(selector) as HTMLElement;
  return { bar, decisions, get };
}

function diffLines(bar: HTMLElement): string[] {
  return Array.from(
    bar.querySelectorAll(`.${DIFF_CLASS} > span`),
    span => `${span.className}:${span.textContent}`
  );
}

describe('proposalBar', () => {
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('says what a new cell is, its class and reasons, with every line added', () => {
    const { bar, get } = render();
    expect(get('.qloop-proposal-label').textContent).toBe(
      'Proposed by the agent · new cell'
    );
    expect(get('.qloop-proposal-risk').textContent).toBe('class: write');
    expect(bar.getAttribute(RISK_ATTRIBUTE)).toBe('write');
    expect(
      Array.from(
        bar.querySelectorAll('.qloop-proposal-reason'),
        li => li.textContent
      )
    ).toEqual(['line 1: rebinds df']);
    expect(get(`.${DIFF_CLASS}`).tagName).toBe('PRE');
    expect(diffLines(bar)).toEqual([
      `${DIFF_ADD_CLASS}:+df = df.dropna()`,
      `${DIFF_ADD_CLASS}:+plot(df)`
    ]);
    expect(bar.hasAttribute('data-lm-suppress-shortcuts')).toBe(true);
  });

  it('says that a new cell runs when accepted, on its label and its button', () => {
    const { get } = render({ run: true, risk: 'destructive' });
    expect(get('.qloop-proposal-label').textContent).toBe(
      'Proposed by the agent · new cell, runs when accepted'
    );
    expect(get('.qloop-proposal-accept').textContent).toBe('Accept and run');
    expect(get('.qloop-proposal-risk').textContent).toBe('class: destructive');
    const plain = render();
    expect(plain.get('.qloop-proposal-accept').textContent).toBe('Accept');
  });

  it('shows an edit as removed and added lines, and no class for markdown', () => {
    const { bar, get } = render(
      {
        kind: 'edit',
        cellType: 'markdown',
        risk: '',
        reasons: [],
        source: '# New\ntext'
      },
      '# Old\ntext'
    );
    expect(get('.qloop-proposal-label').textContent).toBe(
      'Proposed by the agent · edit of this cell'
    );
    expect(get('.qloop-proposal-risk')).toBeNull();
    expect(get('.qloop-proposal-reasons')).toBeNull();
    expect(bar.hasAttribute(RISK_ATTRIBUTE)).toBe(false);
    expect(diffLines(bar)).toEqual([
      `${DIFF_DEL_CLASS}:-# Old`,
      `${DIFF_ADD_CLASS}:+# New`,
      'qloop-diff-same: text'
    ]);
    updateDiff(bar, '# Newer\ntext', '# New\ntext', trans);
    expect(diffLines(bar)[0]).toBe(`${DIFF_DEL_CLASS}:-# Newer`);
    expect(bar.querySelectorAll(`.${DIFF_CLASS}`)).toHaveLength(1);
  });

  it('says what the code would change, or why it was not run ahead', () => {
    const changed = render({
      effect: {
        changes: [
          'df: DataFrame 5×1 → 3×2 (columns a, b)',
          'z: created (int 1)'
        ],
        note: ''
      }
    });
    const line = changed.get(`.${EFFECT_AHEAD_CLASS}`);
    expect(line.textContent).toBe(
      'would change: df: DataFrame 5×1 → 3×2 (columns a, b); z: created (int 1)'
    );
    expect(line.classList.contains(`${EFFECT_AHEAD_CLASS}-note`)).toBe(false);
    const why = render({
      effect: { changes: [], note: 'not run ahead: its class is external' }
    });
    const note = why.get(`.${EFFECT_AHEAD_CLASS}`);
    expect(note.textContent).toBe('not run ahead: its class is external');
    expect(note.classList.contains(`${EFFECT_AHEAD_CLASS}-note`)).toBe(true);
    const nothing = render({ effect: { changes: [], note: '' } });
    expect(nothing.get(`.${EFFECT_AHEAD_CLASS}`).textContent).toBe(
      'would change no variables'
    );
    expect(render().get(`.${EFFECT_AHEAD_CLASS}`)).toBeNull();
    const evil = render({ effect: { changes: [EVIL], note: '' } });
    expect(evil.bar.querySelector('img')).toBeNull();
  });

  it('sets the source, class and reasons as text, never as HTML', () => {
    const { bar } = render({ source: EVIL, risk: EVIL, reasons: [EVIL] });
    expect(bar.querySelector('img')).toBeNull();
    expect(bar.textContent).toContain(`+${EVIL}`);
    expect(bar.textContent).toContain(`class: ${EVIL}`);
    expect(bar.querySelector('.qloop-proposal-reason')!.textContent).toBe(EVIL);
  });

  it('shows every character that would run, as the approval card does', () => {
    const hidden = 'harmless = 1' + ' '.repeat(400) + '; HIDDEN_TAIL = 1';
    const { bar } = render({ source: `${hidden}\nx\u200b = 2` });
    const text = bar.querySelector(`.${DIFF_CLASS}`)!.textContent!;
    expect(text).toContain(
      `+harmless = 1${runMark(' '.repeat(400))}; HIDDEN_TAIL = 1`
    );
    expect(text).toContain(`+x${charMark('\u200b')} = 2`);
    expect(bar.querySelectorAll(`.${DIFF_CLASS} .qloop-mark`).length).toBe(2);
  });

  it('marks the alarming classes', () => {
    expect(render({ risk: 'destructive' }).bar.classList).toContain(
      'qloop-proposal-alarming'
    );
    expect(render({ risk: 'read' }).bar.classList).not.toContain(
      'qloop-proposal-alarming'
    );
  });

  it('has real buttons, and the all-buttons only with two or more waiting', () => {
    const { bar, get } = render();
    const buttons = Array.from(
      bar.querySelectorAll<HTMLButtonElement>('.qloop-proposal-buttons button')
    );
    expect(buttons.map(b => [b.textContent, b.type, b.hidden])).toEqual([
      ['Accept', 'button', false],
      ['Accept and run', 'button', true],
      ['Reject', 'button', false],
      ['Accept all', 'button', true],
      ['Reject all', 'button', true]
    ]);
    setWaitingCount(bar, 2, trans);
    expect(get('.qloop-proposal-accept-all').hidden).toBe(false);
    expect(get('.qloop-proposal-reject-all').hidden).toBe(false);
    expect(get('.qloop-proposal-accept-all').title).toBe(
      'Decide the 2 waiting proposals of this agent cell'
    );
    setWaitingCount(bar, 1, trans);
    expect(get('.qloop-proposal-accept-all').hidden).toBe(true);
  });

  it("offers Accept and run on an edit the cell's own Fix or Edit proposed", () => {
    const own = { kind: 'edit' as const, cellId: 'c1', agentCell: 'c1' };
    const { decisions, get } = render(own);
    expect(get('.qloop-proposal-accept-run').hidden).toBe(false);
    get('.qloop-proposal-accept-run').click();
    expect(decisions).toEqual([
      [{ decision: 'accepted', reason: '', run: true }, false]
    ]);
    const other = render({ kind: 'edit', cellId: 'c1', agentCell: 'agent' });
    expect(other.get('.qloop-proposal-accept-run').hidden).toBe(true);
  });

  it('accepts one, or all', () => {
    const { decisions, get } = render();
    get('.qloop-proposal-accept').click();
    get('.qloop-proposal-accept-all').click();
    expect(decisions).toEqual([
      [{ decision: 'accepted', reason: '' }, false],
      [{ decision: 'accepted', reason: '' }, true]
    ]);
  });

  it('asks for an optional reason before rejecting', () => {
    const { decisions, get } = render();
    const form = get('.qloop-proposal-reject-form') as HTMLFormElement;
    const input = get('.qloop-proposal-reason-input') as HTMLInputElement;
    expect(form.hidden).toBe(true);
    get('.qloop-proposal-reject').click();
    expect(decisions).toEqual([]);
    expect(form.hidden).toBe(false);
    expect(get('.qloop-proposal-buttons').hidden).toBe(true);
    expect(document.activeElement).toBe(input);
    expect(get('.qloop-proposal-confirm').textContent).toBe('Reject');
    input.value = '  keep the NaNs ';
    input.dispatchEvent(
      new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })
    );
    expect(decisions).toEqual([
      [{ decision: 'rejected', reason: 'keep the NaNs' }, false]
    ]);
  });

  it('rejects all with an empty reason, and Escape cancels', () => {
    const { decisions, get, bar } = render();
    setWaitingCount(bar, 3, trans);
    const form = get('.qloop-proposal-reject-form') as HTMLFormElement;
    const rejectAll = get('.qloop-proposal-reject-all');
    rejectAll.click();
    form.dispatchEvent(
      new KeyboardEvent('keydown', { key: 'Escape', bubbles: true })
    );
    expect(form.hidden).toBe(true);
    expect(document.activeElement).toBe(rejectAll);
    expect(decisions).toEqual([]);
    rejectAll.click();
    expect(get('.qloop-proposal-confirm').textContent).toBe('Reject all');
    (get('.qloop-proposal-confirm') as HTMLButtonElement).click();
    expect(decisions).toEqual([[{ decision: 'rejected', reason: '' }, true]]);
  });
});
