/**
 * A proposal on two pages of one shared notebook (real-time collaboration):
 * two notebook models whose documents exchange every change, each page with
 * its own board. A decision on one page is answered by that page alone, with
 * the user's reason, even though rejecting deletes the cell the other page
 * watches; a cell the user deletes still rejects the proposal on both.
 */
import { YNotebook } from '@jupyter/ydoc';
import { NotebookModel } from '@jupyterlab/notebook';
import { JSONObject } from '@lumino/coreutils';
import * as Y from 'yjs';

import { NotebookCells, followProposalCells } from '../src/bridge';
import { IAck, handleRequest } from '../src/protocol';
import { DELETED_REASON, IDecision, ProposalBoard } from '../src/proposals';

import { quietYjs } from './yjs';

const HELLO = { frontend: 'jupyterlab', version: '9.9.9' };
const REMOTE = 'the other page';

interface IPage {
  model: NotebookModel;
  board: ProposalBoard;
  cells: NotebookCells;
}

function pageOf(model: NotebookModel): IPage {
  const board = new ProposalBoard();
  const cells = new NotebookCells(
    () => model,
    () => 'nb.ipynb',
    board
  );
  followProposalCells(model, board, cells);
  return { model, board, cells };
}

/** Every change of one document reaches the other, one change at a time. */
function link(a: Y.Doc, b: Y.Doc): void {
  Y.applyUpdate(b, Y.encodeStateAsUpdate(a), REMOTE);
  Y.applyUpdate(a, Y.encodeStateAsUpdate(b), REMOTE);
  const forward = (to: Y.Doc) => (update: Uint8Array, origin: unknown) => {
    if (origin !== REMOTE) {
      Y.applyUpdate(to, update, REMOTE);
    }
  };
  a.on('update', forward(b));
  b.on('update', forward(a));
}

const pause = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

describe('a proposal on two pages of a shared notebook', () => {
  let warn: jest.SpyInstance;
  let proposing: IPage;
  let following: IPage;
  let agent: string;

  beforeEach(() => {
    warn = quietYjs();
    const first = new NotebookModel();
    const second = new NotebookModel();
    link(
      (first.sharedModel as YNotebook).ydoc,
      (second.sharedModel as YNotebook).ydoc
    );
    first.sharedModel.insertCells(0, [
      { cell_type: 'code', source: '%%agent add a cell', metadata: {} },
      { cell_type: 'code', source: 'df.head()', metadata: {} }
    ]);
    proposing = pageOf(first);
    following = pageOf(second);
    agent = first.cells.get(0).id;
  });

  afterEach(() => {
    proposing.model.dispose();
    following.model.dispose();
    warn.mockRestore();
  });

  const sources = (page: IPage) =>
    Array.from(page.model.cells, cell => cell.sharedModel.getSource());

  /** The kernel's request reaches both pages; resolves once both show it. */
  async function propose(): Promise<Promise<IAck | null>[]> {
    const request: JSONObject = {
      op: 'propose',
      request_id: 'r1',
      cell_id: agent,
      proposal: {
        id: 'p1',
        kind: 'add',
        cell_type: 'code',
        source: 'z = 7',
        after: agent,
        risk: 'write',
        reasons: [],
        provenance: { step: 'p1' }
      }
    };
    const answers = [
      handleRequest(request, proposing.cells, HELLO),
      handleRequest(request, following.cells, HELLO, undefined, true)
    ] as Promise<IAck | null>[];
    for (let tries = 0; !following.board.has('p1') && tries < 50; tries++) {
      await pause(20);
    }
    expect(proposing.board.has('p1')).toBe(true);
    expect(following.board.has('p1')).toBe(true);
    expect(sources(following)).toEqual([
      '%%agent add a cell',
      'z = 7',
      'df.head()'
    ]);
    return answers;
  }

  const rejected: IDecision = { decision: 'rejected', reason: 'not this one' };

  it.each([
    ['the following page', 1],
    ['the proposing page', 0]
  ])(
    'rejected on %s: only that page answers, with the reason',
    async (_, deciding) => {
      const pages = [proposing, following];
      const answers = await propose();
      pages[deciding].board.decide('p1', rejected);
      expect(await answers[deciding]).toMatchObject({
        ok: true,
        decision: 'rejected',
        reason: 'not this one'
      });
      await pause(50); // the other page has seen the cell go
      expect(await answers[1 - deciding]).toBeNull();
      expect(pages.map(page => page.board.waiting)).toEqual([[], []]);
      pages.forEach(page =>
        expect(sources(page)).toEqual(['%%agent add a cell', 'df.head()'])
      );
    }
  );

  it('a cell the user deletes rejects the proposal on both pages', async () => {
    const answers = await propose();
    following.model.sharedModel.deleteCell(1);
    for (const answer of answers) {
      expect(await answer).toMatchObject({
        decision: 'rejected',
        reason: DELETED_REASON
      });
    }
  });
});
