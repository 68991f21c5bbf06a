/**
 * The proposals in a notebook view: a bar on top of the proposed cell while
 * it waits, its buttons deciding the proposal through the whole request, and
 * nothing left behind once it is decided or withdrawn.
 */
import { ICodeCellModel } from '@jupyterlab/cells';
import { NotebookModel } from '@jupyterlab/notebook';
import { NBTestUtils } from '@jupyterlab/notebook/lib/testutils';
import { nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { NotebookCells } from '../src/bridge';
import { IAck, PROVENANCE_KEY, handleRequest } from '../src/protocol';
import { BAR_CLASS, EFFECT_AHEAD_CLASS } from '../src/proposalbar';
import { ProposalBoard } from '../src/proposals';
import {
  EFFECT_CLASS,
  PROPOSED_CELL_CLASS,
  showProposals
} from '../src/proposalview';

import { quietYjs } from './yjs';

const trans = nullTranslator.load('qloop');
const HELLO = { frontend: 'jupyterlab', version: '9.9.9' };

describe('showProposals', () => {
  let warn: jest.SpyInstance;
  let model: NotebookModel;
  let board: ProposalBoard;
  let lookup: NotebookCells;
  let notebook: ReturnType<typeof NBTestUtils.createNotebook>;
  let ids: string[];

  beforeEach(() => {
    warn = quietYjs();
    model = new NotebookModel();
    model.sharedModel.insertCells(0, [
      { cell_type: 'code', source: '%%agent plot it', metadata: {} },
      { cell_type: 'code', source: 'df.head()', metadata: {} }
    ]);
    ids = Array.from(model.cells, cell => cell.id);
    notebook = NBTestUtils.createNotebook();
    notebook.model = model;
    Widget.attach(notebook, document.body);
    board = new ProposalBoard();
    lookup = new NotebookCells(
      () => model,
      () => 'nb.ipynb',
      board
    );
    showProposals(notebook, board, trans);
  });

  afterEach(() => {
    notebook.dispose();
    model.dispose();
    warn.mockRestore();
  });

  function propose(id: string, proposal: JSONObject): Promise<IAck | null> {
    const answer = handleRequest(
      {
        op: 'propose',
        request_id: id,
        cell_id: ids[0],
        proposal: { id, risk: 'read', provenance: { id }, ...proposal }
      },
      lookup,
      HELLO
    );
    if (!(answer instanceof Promise)) {
      throw new Error(JSON.stringify(answer));
    }
    return answer;
  }

  /** Every bar in the cells (a new cell's node joins the page on the next frame). */
  function allBars(): HTMLElement[] {
    return notebook.widgets.flatMap(cell =>
      Array.from(cell.node.querySelectorAll<HTMLElement>(`.${BAR_CLASS}`))
    );
  }

  function bars(index: number): HTMLElement[] {
    return Array.from(
      notebook.widgets[index].node.querySelectorAll(`.${BAR_CLASS}`)
    );
  }

  it('puts a bar on top of a new cell, and accepting keeps the cell', async () => {
    const answer = propose('p', {
      kind: 'add',
      cell_type: 'code',
      source: 'plot(df)',
      after: ids[0]
    });
    expect(notebook.widgets).toHaveLength(3);
    const cell = notebook.widgets[1];
    expect(cell.node.firstElementChild!.classList).toContain(BAR_CLASS);
    expect(cell.hasClass(PROPOSED_CELL_CLASS)).toBe(true);
    expect(bars(0)).toEqual([]);
    (bars(1)[0].querySelector('.qloop-proposal-accept') as HTMLElement).click();
    expect(await answer).toMatchObject({
      decision: 'accepted',
      source: 'plot(df)'
    });
    expect(notebook.widgets).toHaveLength(3);
    expect(bars(1)).toEqual([]);
    expect(cell.hasClass(PROPOSED_CELL_CLASS)).toBe(false);
    expect(cell.model.getMetadata(PROVENANCE_KEY)).toEqual({ id: 'p' });
  });

  it("shows an edit's data effect on a code cell, never on a markdown cell", async () => {
    model.sharedModel.insertCell(2, {
      cell_type: 'markdown',
      source: '# Notes',
      metadata: {}
    });
    ids = Array.from(model.cells, cell => cell.id);
    const effect = { changes: ['df: DataFrame 5×1 → 3×1'], note: '' };
    const code = propose('c', {
      kind: 'edit',
      source: 'df = df.head(3)',
      target: ids[1],
      effect
    });
    const text = propose('m', {
      kind: 'edit',
      source: 'df = df.head(3)',
      target: ids[2],
      effect
    });
    const line = (index: number) =>
      bars(index)[0].querySelector(`.${EFFECT_AHEAD_CLASS}`);
    expect(line(1)?.textContent).toBe('would change: df: DataFrame 5×1 → 3×1');
    expect(line(2)).toBeNull();
    board.decide('c', { decision: 'rejected', reason: '' });
    board.decide('m', { decision: 'rejected', reason: '' });
    await Promise.all([code, text]);
  });

  it('shows the all-buttons for two proposals of one agent cell, and decides both', async () => {
    const before = model.sharedModel.toJSON();
    const add = propose('p', {
      kind: 'add',
      cell_type: 'markdown',
      source: '# Plot',
      after: ids[1]
    });
    const edit = propose('e', { kind: 'edit', source: 'df', target: ids[1] });
    const [editBar] = bars(1);
    const [addBar] = bars(2);
    const rejectAll = editBar.querySelector(
      '.qloop-proposal-reject-all'
    ) as HTMLButtonElement;
    expect(rejectAll.hidden).toBe(false);
    expect(
      (addBar.querySelector('.qloop-proposal-accept-all') as HTMLElement).hidden
    ).toBe(false);
    rejectAll.click();
    (
      editBar.querySelector('.qloop-proposal-reason-input') as HTMLInputElement
    ).value = 'not now';
    (editBar.querySelector('.qloop-proposal-confirm') as HTMLElement).click();
    expect(await add).toMatchObject({
      decision: 'rejected',
      reason: 'not now'
    });
    expect(await edit).toMatchObject({
      decision: 'rejected',
      reason: 'not now'
    });
    expect(model.sharedModel.toJSON()).toEqual(before);
    expect(allBars()).toEqual([]);
  });

  it('removes the bar and the new cell when the proposal is withdrawn', async () => {
    const before = model.sharedModel.toJSON();
    const answer = propose('p', {
      kind: 'add',
      cell_type: 'code',
      source: 'x',
      after: ids[0]
    });
    const edit = propose('e', { kind: 'edit', source: 'y', target: ids[0] });
    expect(allBars()).toHaveLength(2);
    board.dispose();
    expect(await answer).toBeNull();
    expect(await edit).toBeNull();
    expect(notebook.widgets).toHaveLength(2);
    expect(allBars()).toEqual([]);
    expect(notebook.widgets[0].hasClass(PROPOSED_CELL_CLASS)).toBe(false);
    expect(model.sharedModel.toJSON()).toEqual(before);
  });

  function ran(effect: unknown): void {
    const ack = handleRequest(
      {
        op: 'set_outputs',
        request_id: 'r',
        cell_id: ids[0],
        target: ids[1],
        source: 'df.head()',
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'x\n' }],
        effect
      } as JSONObject,
      lookup,
      HELLO
    );
    expect(ack).toMatchObject({ ok: true });
  }

  function notes(index: number): HTMLElement[] {
    return Array.from(
      notebook.widgets[index].node.querySelectorAll(`.${EFFECT_CLASS}`)
    );
  }

  it("shows what the agent's run of a cell did, as text, until dismissed", () => {
    ran('rebinds df: 10,000×12 → 9,412×12\n<b>creates</b> z');
    const [note] = notes(1);
    expect(notebook.widgets[1].node.firstElementChild).toBe(note);
    expect(note.textContent).toContain('Run by the agent');
    expect(note.textContent).toContain('rebinds df: 10,000×12 → 9,412×12');
    expect(note.textContent).toContain('<b>creates</b> z');
    expect(note.querySelector('b')).toBeNull();
    expect(notes(0)).toEqual([]);
    (note.querySelector(`.${EFFECT_CLASS}-dismiss`) as HTMLElement).click();
    expect(notes(1)).toEqual([]);
    expect(board.effects.size).toBe(0);
  });

  it('takes the note away when the user runs the cell, and shows none for a run that changed nothing', () => {
    ran('creates z');
    expect(notes(1)).toHaveLength(1);
    (notebook.widgets[1].model as ICodeCellModel).executionCount = 7;
    expect(notes(1)).toEqual([]);
    ran('');
    expect(notes(1)).toEqual([]);
    ran('creates z');
    ran('deletes z');
    const shown = notes(1);
    expect(shown).toHaveLength(1);
    expect(shown[0].textContent).toContain('deletes z');
  });
});
