/**
 * The `propose` request: a malformed one is refused at once; a valid one
 * shows the proposal and is answered when the user decides. Accepting keeps
 * the new cell (with the user's edits) or applies the edit, and saves the
 * provenance; rejecting, or a withdrawal, leaves the notebook as it was.
 */
import { NotebookModel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';

import { NotebookCells } from '../src/bridge';
import {
  IAck,
  ICellLookup,
  IProposalCell,
  IProposalNotebook,
  PROPOSAL_KEY,
  PROVENANCE_KEY,
  handleRequest
} from '../src/protocol';
import { DELETED_REASON, ProposalBoard } from '../src/proposals';

import { answerNow } from './answers';
import { quietYjs } from './yjs';

class FakeCell implements IProposalCell {
  readonly metadata: JSONObject = {};
  constructor(
    readonly id: string,
    readonly type: string,
    public source: string
  ) {}

  getSource(): string {
    return this.source;
  }
  setSource(source: string): void {
    this.source = source;
  }
  setMetadata(key: string, value: unknown): void {
    this.metadata[key] = value as JSONObject;
  }
  getMetadata(key: string): unknown {
    return this.metadata[key];
  }
  deleteMetadata(key: string): void {
    delete this.metadata[key];
  }
}

/** A notebook of cells in order, whose proposals the test decides. */
class FakeNotebook implements ICellLookup, IProposalNotebook {
  readonly board = new ProposalBoard();
  cells: FakeCell[] = [];
  private _next = 0;

  constructor(...ids: string[]) {
    ids.forEach(id => this.cells.push(new FakeCell(id, 'code', `# ${id}`)));
  }

  findCell(cellId: string): FakeCell | undefined {
    return this.cells.find(cell => cell.id === cellId);
  }
  proposals(): IProposalNotebook {
    return this;
  }
  cell(cellId: string): FakeCell | undefined {
    return this.findCell(cellId);
  }
  insertCell(
    afterId: string,
    cellType: string,
    source: string,
    metadata: JSONObject
  ): string {
    const cell = new FakeCell(`new-${this._next++}`, cellType, source);
    Object.assign(cell.metadata, metadata);
    const index = this.cells.findIndex(c => c.id === afterId) + 1;
    this.cells.splice(index, 0, cell);
    return cell.id;
  }
  removeCell(cellId: string): void {
    const index = this.cells.findIndex(cell => cell.id === cellId);
    if (index >= 0) {
      this.cells.splice(index, 1);
    }
  }
  proposedCell(id: string): string | undefined {
    const mark = (cell: FakeCell) => cell.metadata[PROPOSAL_KEY] as JSONObject;
    return this.cells.find(cell => mark(cell)?.['id'] === id)?.id;
  }

  /** The whole notebook, to compare before and after. */
  snapshot(): string {
    return JSON.stringify(this.cells);
  }
}

/** Another page of the same shared notebook: the same cells, a board of its own. */
class SecondPage extends FakeNotebook {
  constructor(first: FakeNotebook) {
    super();
    this.cells = first.cells;
  }
}

const HELLO = { frontend: 'jupyterlab', version: '9.9.9' };
const PROVENANCE: JSONObject = { turn: 3, model: 'scripted', step: 'p1' };

function addRequest(fields: JSONObject = {}, id = 'p1'): JSONObject {
  return {
    op: 'propose',
    request_id: `r-${id}`,
    cell_id: 'agent',
    proposal: {
      id,
      kind: 'add',
      cell_type: 'code',
      source: 'df = df.dropna()\nplot(df)\n',
      after: 'agent',
      risk: 'write',
      reasons: ['line 1: rebinds df'],
      provenance: PROVENANCE,
      ...fields
    }
  };
}

function editRequest(fields: JSONObject = {}, id = 'e1'): JSONObject {
  return {
    op: 'propose',
    request_id: `r-${id}`,
    cell_id: 'agent',
    proposal: {
      id,
      kind: 'edit',
      source: 'print(2)',
      target: 'data',
      risk: 'read',
      reasons: [],
      provenance: PROVENANCE,
      ...fields
    }
  };
}

/** The promise of a deferred answer (fails the test if answered at once). */
function later(answer: ReturnType<typeof handleRequest>): Promise<IAck | null> {
  if (!(answer instanceof Promise)) {
    throw new Error(`answered at once: ${JSON.stringify(answer)}`);
  }
  return answer;
}

describe('propose', () => {
  let notebook: FakeNotebook;

  beforeEach(() => {
    notebook = new FakeNotebook('intro', 'agent', 'data');
  });

  it('inserts a proposed cell after the given cell, and keeps it with the edit the user made', async () => {
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    expect(notebook.cells.map(cell => cell.id)).toEqual([
      'intro',
      'agent',
      'new-0',
      'data'
    ]);
    const cell = notebook.cells[2];
    expect(cell.type).toBe('code');
    expect(cell.source).toBe('df = df.dropna()\nplot(df)\n');
    expect(cell.metadata).toEqual({
      [PROPOSAL_KEY]: { id: 'p1', kind: 'add', agent_cell: 'agent' }
    });
    expect(notebook.board.waiting).toEqual([
      {
        id: 'p1',
        kind: 'add',
        cellType: 'code',
        source: 'df = df.dropna()\nplot(df)\n',
        cellId: 'new-0',
        agentCell: 'agent',
        risk: 'write',
        reasons: ['line 1: rebinds df']
      }
    ]);

    cell.setSource('df = df.dropna()\nplot(df, title="clean")\n');
    notebook.board.decide('p1', { decision: 'accepted', reason: '' });

    expect(await answer).toEqual({
      op: 'ack',
      request_id: 'r-p1',
      ok: true,
      decision: 'accepted',
      cell_id: 'new-0',
      source: 'df = df.dropna()\nplot(df, title="clean")\n',
      reason: ''
    });
    expect(cell.metadata).toEqual({ [PROVENANCE_KEY]: PROVENANCE });
    expect(notebook.cells).toHaveLength(4);
    expect(notebook.board.waiting).toEqual([]);
  });

  it('finds the cell of a proposal sent again instead of adding a second one', async () => {
    // A page closed while the proposal waited; its cell was saved, and the
    // kernel sends the proposal again to the page that took over.
    const first = new FakeNotebook('intro', 'agent', 'data');
    void handleRequest(addRequest(), first, HELLO);
    const saved = first.cells[2];
    notebook.cells.splice(2, 0, saved);
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    expect(notebook.cells.map(cell => cell.id)).toEqual([
      'intro',
      'agent',
      'new-0',
      'data'
    ]);
    notebook.board.decide('p1', { decision: 'accepted', reason: '' });
    expect(await answer).toMatchObject({
      decision: 'accepted',
      cell_id: 'new-0'
    });
    expect(saved.metadata).toEqual({ [PROVENANCE_KEY]: PROVENANCE });
  });

  it('inserts a markdown cell with no risk class', async () => {
    const answer = later(
      handleRequest(
        addRequest({ cell_type: 'markdown', source: '# Result', risk: '' }),
        notebook,
        HELLO
      )
    );
    expect(notebook.cells[2].type).toBe('markdown');
    expect(notebook.board.waiting[0]).toMatchObject({
      cellType: 'markdown',
      risk: ''
    });
    notebook.board.decide('p1', { decision: 'accepted', reason: '' });
    expect(await answer).toMatchObject({
      decision: 'accepted',
      source: '# Result'
    });
  });

  it('deletes a rejected new cell and answers the reason', async () => {
    const before = notebook.snapshot();
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    notebook.board.decide('p1', {
      decision: 'rejected',
      reason: 'keep the NaNs'
    });
    expect(await answer).toEqual({
      op: 'ack',
      request_id: 'r-p1',
      ok: true,
      decision: 'rejected',
      cell_id: 'new-0',
      source: '',
      reason: 'keep the NaNs'
    });
    expect(notebook.snapshot()).toBe(before);
  });

  it('applies an accepted edit and saves its provenance', async () => {
    const answer = later(handleRequest(editRequest(), notebook, HELLO));
    const target = notebook.findCell('data')!;
    // The target keeps its source until the user decides, marked meanwhile.
    expect(target.source).toBe('# data');
    expect(target.metadata).toEqual({
      [PROPOSAL_KEY]: { id: 'e1', kind: 'edit', agent_cell: 'agent' }
    });
    expect(notebook.board.waiting[0]).toMatchObject({
      kind: 'edit',
      cellId: 'data',
      source: 'print(2)'
    });
    notebook.board.decide('e1', { decision: 'accepted', reason: '' });
    expect(await answer).toEqual({
      op: 'ack',
      request_id: 'r-e1',
      ok: true,
      decision: 'accepted',
      cell_id: 'data',
      source: 'print(2)',
      reason: '',
      previous: '# data',
      previous_provenance: null
    });
    expect(target.source).toBe('print(2)');
    expect(target.metadata).toEqual({ [PROVENANCE_KEY]: PROVENANCE });
    expect(notebook.cells).toHaveLength(3);
  });

  function revert(fields: JSONObject): IAck {
    return handleRequest(
      { op: 'revert_cell', request_id: 'u', cell_id: 'agent', ...fields },
      notebook,
      HELLO
    ) as IAck;
  }

  it('takes an accepted edit back: the source and provenance from before', async () => {
    const target = notebook.findCell('data')!;
    const earlier = { turn: 1, step: 'old' };
    target.metadata[PROVENANCE_KEY] = earlier;
    const answer = later(handleRequest(editRequest(), notebook, HELLO));
    notebook.board.decide('e1', { decision: 'accepted', reason: '' });
    const ack = (await answer) as IAck;
    expect(ack).toMatchObject({
      previous: '# data',
      previous_provenance: earlier
    });
    expect(
      revert({
        target: 'data',
        kind: 'edit',
        source: 'print(2)',
        previous: ack['previous'] as string,
        previous_provenance: ack['previous_provenance'] as JSONObject
      })
    ).toEqual({ op: 'ack', request_id: 'u', ok: true });
    expect(target.source).toBe('# data');
    expect(target.metadata).toEqual({ [PROVENANCE_KEY]: earlier });
  });

  it('takes an accepted new cell back, and never a cell changed since', async () => {
    const before = notebook.snapshot();
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    notebook.board.decide('p1', { decision: 'accepted', reason: '' });
    const added = ((await answer) as IAck)['cell_id'] as string;
    const cell = notebook.findCell(added)!;
    cell.source += '# mine';
    const changed = notebook.snapshot();
    expect(
      revert({
        target: added,
        kind: 'add',
        source: 'df = df.dropna()\nplot(df)\n'
      })
    ).toMatchObject({
      ok: false,
      error: `cell ${added} was changed since it was accepted: left as it is`
    });
    expect(notebook.snapshot()).toBe(changed);
    expect(
      revert({ target: added, kind: 'add', source: cell.source })
    ).toMatchObject({ ok: true });
    expect(notebook.findCell(added)).toBeUndefined();
    expect(notebook.cells.map(c => c.id)).toEqual(
      JSON.parse(before).map((c: FakeCell) => c.id)
    );
    expect(
      revert({ target: 'data', kind: 'edit', source: '# data' })
    ).toMatchObject({
      ok: false,
      error: "'source' and 'previous' must be strings"
    });
    expect(revert({ target: 'gone', kind: 'add', source: '' })).toMatchObject({
      ok: false,
      error: 'no cell with id gone'
    });
  });

  it('leaves a rejected edit out', async () => {
    const before = notebook.snapshot();
    const answer = later(handleRequest(editRequest(), notebook, HELLO));
    notebook.board.decide('e1', { decision: 'rejected', reason: '' });
    expect(await answer).toMatchObject({
      ok: true,
      decision: 'rejected',
      cell_id: 'data',
      reason: ''
    });
    expect(notebook.snapshot()).toBe(before);
  });

  it('decides every waiting proposal of an agent cell at once', async () => {
    notebook.cells.push(new FakeCell('other-agent', 'code', '%%agent'));
    const first = later(handleRequest(addRequest({}, 'p1'), notebook, HELLO));
    const second = later(handleRequest(editRequest({}, 'e1'), notebook, HELLO));
    const elsewhere = later(
      handleRequest(
        { ...addRequest({}, 'p2'), cell_id: 'other-agent' },
        notebook,
        HELLO
      )
    );
    expect(notebook.board.countFor('agent')).toBe(2);
    expect(notebook.board.countFor('other-agent')).toBe(1);

    notebook.board.decideAll('agent', { decision: 'accepted', reason: '' });

    expect(await first).toMatchObject({
      decision: 'accepted',
      cell_id: 'new-0'
    });
    expect(await second).toMatchObject({
      decision: 'accepted',
      cell_id: 'data'
    });
    expect(notebook.board.waiting.map(p => p.id)).toEqual(['p2']);
    notebook.board.decideAll('other-agent', {
      decision: 'rejected',
      reason: 'no'
    });
    expect(await elsewhere).toMatchObject({
      decision: 'rejected',
      reason: 'no'
    });
    expect(notebook.cells.map(cell => cell.id)).toEqual([
      'intro',
      'agent',
      'new-0',
      'data',
      'other-agent'
    ]);
  });

  it.each<[string, JSONObject, string]>([
    [
      'an agent cell of another notebook',
      { ...addRequest(), cell_id: 'elsewhere' },
      'no cell with id elsewhere'
    ],
    [
      'no agent cell',
      { ...addRequest(), cell_id: undefined } as unknown as JSONObject,
      "'cell_id' must be a non-empty string"
    ],
    [
      'no proposal',
      { op: 'propose', request_id: 'r-p1', cell_id: 'agent' },
      "'proposal' must be a JSON object"
    ],
    [
      'no id',
      addRequest({ id: '' }),
      "'proposal.id' must be a non-empty string"
    ],
    [
      'an unknown kind',
      addRequest({ kind: 'delete' }),
      `'proposal.kind' must be 'add' or 'edit', not "delete"`
    ],
    [
      'no source',
      addRequest({ source: null }),
      "'proposal.source' must be a string"
    ],
    [
      'a cell type that is neither code nor markdown',
      addRequest({ cell_type: 'raw' }),
      "'proposal.cell_type' must be 'code' or 'markdown'"
    ],
    [
      'an add after a cell of another notebook',
      addRequest({ after: 'gone' }),
      "no cell with id gone ('proposal.after')"
    ],
    [
      'an add without after',
      addRequest({ after: undefined } as unknown as JSONObject),
      "'proposal.after' must be a non-empty string"
    ],
    [
      'an edit of a cell of another notebook',
      editRequest({ target: 'gone' }),
      "no cell with id gone ('proposal.target')"
    ],
    [
      'reasons that are not strings',
      addRequest({ reasons: ['ok', 3] }),
      "'proposal.reasons' must be an array of strings"
    ],
    [
      'a risk that is not a string',
      addRequest({ risk: 2 }),
      "'proposal.risk' must be a string"
    ],
    [
      'an effect whose changes are not strings',
      addRequest({ effect: { changes: [1], note: '' } }),
      "'proposal.effect' must hold 'changes' (strings) and 'note' (a string)"
    ],
    [
      'an effect without a note',
      editRequest({ effect: { changes: [] } }),
      "'proposal.effect' must hold 'changes' (strings) and 'note' (a string)"
    ],
    [
      'a run flag that is not a boolean',
      addRequest({ run: 1 }),
      "'proposal.run' must be a boolean"
    ],
    [
      'an accepted flag that is not a boolean',
      addRequest({ accepted: 'yes' }),
      "'proposal.accepted' must be a boolean"
    ],
    [
      'no provenance',
      addRequest({ provenance: undefined } as unknown as JSONObject),
      "'proposal.provenance' must be a JSON object"
    ],
    [
      'a provenance that is a list',
      addRequest({ provenance: [1] }),
      "'proposal.provenance' must be a JSON object"
    ]
  ])('refuses at once a proposal with %s', (_, request, error) => {
    const before = notebook.snapshot();
    const ack = answerNow(
      handleRequest(JSON.parse(JSON.stringify(request)), notebook, HELLO)
    );
    expect(ack).toEqual({
      op: 'ack',
      request_id: request['request_id'] as string,
      ok: false,
      error
    });
    expect(notebook.snapshot()).toBe(before);
    expect(notebook.board.waiting).toEqual([]);
  });

  it("keeps a code cell's data effect, never a markdown cell's", async () => {
    const effect = {
      changes: ['df: DataFrame 5×1 → 5×2, added column b'],
      note: ''
    };
    const answer = later(
      handleRequest(editRequest({ effect }), notebook, HELLO)
    );
    const markdown = later(
      handleRequest(
        addRequest({ cell_type: 'markdown', effect }, 'm1'),
        notebook,
        HELLO
      )
    );
    expect(notebook.board.waiting.map(p => [p.id, p.effect])).toEqual([
      ['e1', effect],
      ['m1', undefined]
    ]);
    notebook.board.decide('e1', { decision: 'rejected', reason: '' });
    notebook.board.decide('m1', { decision: 'rejected', reason: '' });
    await Promise.all([answer, markdown]);
  });

  it('applies at once a new cell accepted already, without asking', () => {
    const ack = answerNow(
      handleRequest(addRequest({ accepted: true }), notebook, HELLO)
    );
    expect(ack).toEqual({
      op: 'ack',
      request_id: 'r-p1',
      ok: true,
      decision: 'accepted',
      cell_id: 'new-0',
      source: 'df = df.dropna()\nplot(df)\n',
      reason: ''
    });
    expect(notebook.cells[2].metadata).toEqual({
      [PROVENANCE_KEY]: PROVENANCE
    });
    expect(notebook.board.waiting).toEqual([]);
  });

  it('applies at once an edit accepted already', () => {
    const ack = answerNow(
      handleRequest(editRequest({ accepted: true }), notebook, HELLO)
    );
    expect(ack).toMatchObject({
      ok: true,
      decision: 'accepted',
      cell_id: 'data',
      source: 'print(2)'
    });
    expect(notebook.findCell('data')!.metadata).toEqual({
      [PROVENANCE_KEY]: PROVENANCE
    });
    expect(notebook.board.waiting).toEqual([]);
  });

  it('refuses a second proposal with the id of a waiting one', () => {
    void later(handleRequest(addRequest(), notebook, HELLO));
    const ack = answerNow(handleRequest(addRequest(), notebook, HELLO));
    expect(ack).toMatchObject({
      ok: false,
      error: 'a proposal with id p1 already waits'
    });
    expect(notebook.cells).toHaveLength(4);
  });

  it('refuses where the lookup cannot show proposals', () => {
    const lookup: ICellLookup = { findCell: id => notebook.findCell(id) };
    expect(answerNow(handleRequest(addRequest(), lookup, HELLO))).toMatchObject(
      { ok: false, error: 'this notebook view cannot show proposals' }
    );
  });

  it('withdraws without an ack when the comm closes, leaving the notebook as it was', async () => {
    const before = notebook.snapshot();
    const closed = new AbortController();
    const add = later(
      handleRequest(addRequest(), notebook, HELLO, closed.signal)
    );
    const edit = later(
      handleRequest(editRequest(), notebook, HELLO, closed.signal)
    );
    closed.abort();
    expect(await add).toBeNull();
    expect(await edit).toBeNull();
    expect(notebook.snapshot()).toBe(before);
    expect(notebook.board.waiting).toEqual([]);
  });

  it('shows the proposals of one response together, in order, and Accept all decides them', async () => {
    const first = later(handleRequest(addRequest(), notebook, HELLO));
    const second = later(
      handleRequest(
        addRequest({ source: 'plot(df)', after_proposal: 'p1' }, 'p2'),
        notebook,
        HELLO
      )
    );
    expect(notebook.cells.map(c => c.id)).toEqual([
      'intro',
      'agent',
      'new-0',
      'new-1',
      'data'
    ]);
    expect(notebook.board.countFor('agent')).toBe(2);
    notebook.board.decideAll('agent', { decision: 'accepted', reason: '' });
    expect(await first).toMatchObject({
      decision: 'accepted',
      cell_id: 'new-0'
    });
    expect(await second).toMatchObject({
      decision: 'accepted',
      cell_id: 'new-1'
    });
  });

  it('withdraws a waiting proposal the kernel no longer asks about', async () => {
    const before = notebook.snapshot();
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    expect(
      handleRequest(
        { op: 'withdraw', request_id: 'w', cell_id: 'agent', proposal: 'p1' },
        notebook,
        HELLO
      )
    ).toEqual({ op: 'ack', request_id: 'w', ok: true });
    expect(await answer).toBeNull();
    expect(notebook.snapshot()).toBe(before);
    expect(notebook.board.waiting).toEqual([]);
  });

  describe('on two pages of a shared notebook', () => {
    const settle = () => new Promise(resolve => setTimeout(resolve, 450));
    let second: SecondPage;

    beforeEach(() => {
      second = new SecondPage(notebook);
    });

    it('the second page inserts nothing, shows the proposal, and its decision answers', async () => {
      const first = later(handleRequest(addRequest(), notebook, HELLO));
      const other = later(
        handleRequest(addRequest(), second, HELLO, undefined, true)
      );
      await settle();
      expect(notebook.cells.map(c => c.id)).toEqual([
        'intro',
        'agent',
        'new-0',
        'data'
      ]);
      expect(second.board.waiting).toMatchObject([
        { id: 'p1', cellId: 'new-0' }
      ]);
      second.board.decide('p1', { decision: 'accepted', reason: '' });
      expect(await other).toMatchObject({
        decision: 'accepted',
        cell_id: 'new-0'
      });
      // The proposing page's bar goes, with no ack and no change of its own.
      expect(await first).toBeNull();
      expect(notebook.board.waiting).toEqual([]);
      const kept = notebook.findCell('new-0')!;
      expect(kept.metadata).toEqual({ [PROVENANCE_KEY]: PROVENANCE });
    });

    it("a decision on the proposing page takes the other page's bar away", async () => {
      const first = later(handleRequest(editRequest(), notebook, HELLO));
      const other = later(
        handleRequest(editRequest(), second, HELLO, undefined, true)
      );
      await settle();
      expect(second.board.waiting).toMatchObject([{ id: 'e1' }]);
      notebook.board.decide('e1', { decision: 'rejected', reason: 'no' });
      expect(await first).toMatchObject({ decision: 'rejected', reason: 'no' });
      expect(await other).toBeNull();
      expect(second.board.waiting).toEqual([]);
      expect(notebook.findCell('data')).toMatchObject({
        source: '# data',
        metadata: {}
      });
    });

    it('a proposal accepted already, and one withdrawn, change nothing on the other page', async () => {
      const before = notebook.snapshot();
      expect(
        await later(
          handleRequest(
            addRequest({ accepted: true }),
            second,
            HELLO,
            undefined,
            true
          )
        )
      ).toBeNull();
      expect(notebook.snapshot()).toBe(before);
      const first = later(handleRequest(addRequest(), notebook, HELLO));
      const other = later(
        handleRequest(addRequest(), second, HELLO, undefined, true)
      );
      await settle();
      second.board.dispose(); // the second page closes
      expect(await other).toBeNull();
      expect(notebook.findCell('new-0')).toBeDefined();
      notebook.board.decide('p1', { decision: 'rejected', reason: '' });
      await first;
      expect(notebook.snapshot()).toBe(before);
    });
  });

  it('withdraws without an ack when the notebook closes', async () => {
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    notebook.board.dispose();
    expect(await answer).toBeNull();
    expect(notebook.cells).toHaveLength(3);
  });

  it('rejects a proposal whose cell the user deleted', async () => {
    const answer = later(handleRequest(addRequest(), notebook, HELLO));
    notebook.removeCell('new-0');
    notebook.board.sweep(id => notebook.findCell(id) !== undefined);
    expect(await answer).toMatchObject({
      decision: 'rejected',
      reason: DELETED_REASON
    });
  });
});

describe('propose in a notebook model', () => {
  // @jupyter/ydoc builds standalone cells and then moves them into the
  // notebook's document, and yjs warns about both steps.
  let warn: jest.SpyInstance;
  let model: NotebookModel;
  let board: ProposalBoard;
  let lookup: NotebookCells;
  let ids: string[];

  beforeEach(() => {
    warn = quietYjs();
    model = new NotebookModel();
    model.sharedModel.insertCells(0, [
      { cell_type: 'code', source: '%%agent clean the data', metadata: {} },
      { cell_type: 'code', source: 'df.head()', metadata: { tags: ['x'] } }
    ]);
    ids = Array.from(model.cells, cell => cell.id);
    board = new ProposalBoard();
    lookup = new NotebookCells(
      () => model,
      () => 'nb.ipynb',
      board
    );
  });

  afterEach(() => {
    model.dispose();
    warn.mockRestore();
  });

  function request(proposal: JSONObject): JSONObject {
    return {
      op: 'propose',
      request_id: 1,
      cell_id: ids[0],
      proposal: { id: 'p', risk: '', provenance: PROVENANCE, ...proposal }
    };
  }

  it('inserts the cell, and keeps it when accepted', async () => {
    const answer = later(
      handleRequest(
        request({
          kind: 'add',
          cell_type: 'markdown',
          source: '## Clean',
          after: ids[0]
        }),
        lookup,
        HELLO
      )
    );
    const cell = model.cells.get(1);
    expect(model.cells.length).toBe(3);
    expect(cell.type).toBe('markdown');
    expect(cell.sharedModel.getSource()).toBe('## Clean');
    expect(cell.getMetadata(PROPOSAL_KEY)).toEqual({
      id: 'p',
      kind: 'add',
      agent_cell: ids[0]
    });
    expect(board.waiting[0].cellId).toBe(cell.id);
    cell.sharedModel.setSource('## Clean data');
    board.decide('p', { decision: 'accepted', reason: '' });
    expect(await answer).toMatchObject({
      decision: 'accepted',
      cell_id: cell.id,
      source: '## Clean data'
    });
    expect(cell.getMetadata(PROPOSAL_KEY)).toBeUndefined();
    expect(cell.getMetadata(PROVENANCE_KEY)).toEqual(PROVENANCE);
  });

  it('deletes the cell when rejected: the cells are as before', async () => {
    const before = model.sharedModel.toJSON();
    const answer = later(
      handleRequest(
        request({ kind: 'add', cell_type: 'code', source: 'x', after: ids[1] }),
        lookup,
        HELLO
      )
    );
    expect(model.cells.get(2).sharedModel.getSource()).toBe('x');
    board.decide('p', { decision: 'rejected', reason: 'no' });
    expect(await answer).toMatchObject({ decision: 'rejected', reason: 'no' });
    expect(model.sharedModel.toJSON()).toEqual(before);
  });

  it('edits the target when accepted, and nothing when rejected', async () => {
    const before = model.sharedModel.toJSON();
    const rejected = later(
      handleRequest(
        request({ kind: 'edit', source: 'df.tail()', target: ids[1] }),
        lookup,
        HELLO
      )
    );
    board.decide('p', { decision: 'rejected', reason: '' });
    await rejected;
    expect(model.sharedModel.toJSON()).toEqual(before);

    const accepted = later(
      handleRequest(
        request({ kind: 'edit', source: 'df.tail()', target: ids[1] }),
        lookup,
        HELLO
      )
    );
    board.decide('p', { decision: 'accepted', reason: '' });
    expect(await accepted).toMatchObject({ source: 'df.tail()' });
    const target = model.cells.get(1);
    expect(target.sharedModel.getSource()).toBe('df.tail()');
    expect(target.getMetadata('tags')).toEqual(['x']);
    expect(target.getMetadata(PROVENANCE_KEY)).toEqual(PROVENANCE);
  });

  it('refuses without a board', () => {
    const plain = new NotebookCells(() => model);
    expect(
      answerNow(
        handleRequest(
          request({ kind: 'edit', source: '', target: ids[1] }),
          plain,
          HELLO
        )
      )
    ).toMatchObject({ ok: false });
  });
});
