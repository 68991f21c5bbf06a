/**
 * The cell changes outside agents ask for (add_cell, edit_cell, run_cell
 * through qloop's MCP server): the page that claims one applies it to the
 * notebook, or runs the cell as an ordinary cell so its outputs land in it,
 * then tells the server what it did. One page does each (the server's claim
 * answers the first page only), once.
 */
import { CodeCell, ICellModel, isCodeCellModel } from '@jupyterlab/cells';
import { INotebookModel } from '@jupyterlab/notebook';
import { ISessionContext } from '@jupyterlab/apputils';
import { KernelMessage } from '@jupyterlab/services';
import type {
  AddCellChange,
  EditCellChange,
  OutsideApplied,
  OutsideApproval
} from './generated/protocol';
import { DecisionBody, IOutsideCells, PostOutcome } from './outsidecard';
import { isJSONObject } from './record';

/**
 * The metadata key of outside agents: in the notebook, the saved records of
 * their calls; in a cell, who proposed it.
 */
export const OUTSIDE_KEY = 'qloop_outside';
/** The most characters of a run cell's outputs the server is told. */
export const OUTPUTS_SENT = 20000;

/** What applying a cell change needs of the notebook: its shared model. */
export type OutsideNotebook = Pick<
  INotebookModel['sharedModel'],
  'cells' | 'insertCell' | 'transact'
>;

function cellIndex(notebook: OutsideNotebook, id: string): number {
  return notebook.cells.findIndex(cell => cell.id === id);
}

/** The cells of a notebook as the cards read them; none once it is closed. */
export function notebookCells(
  notebook: () => OutsideNotebook | null
): IOutsideCells {
  const find = (id: string) => {
    const found = notebook();
    const index = found ? cellIndex(found, id) : -1;
    return found && index >= 0 ? { cell: found.cells[index], index } : null;
  };
  return {
    source: id => find(id)?.cell.getSource() ?? null,
    position: id => {
      const found = find(id);
      return found ? found.index + 1 : null;
    }
  };
}

/**
 * Apply an add or an edit with `source`: a new cell after its neighbour (or
 * at the end), or the edited cell's new source, each marked with who
 * proposed it (`qloop_outside` cell metadata). A missing target changes
 * nothing. Returns what the server is told the page did.
 */
export function applyCellChange(
  notebook: OutsideNotebook,
  change: AddCellChange | EditCellChange,
  source: string,
  origin: { client: string; tool: string }
): OutsideApplied {
  const target = change.op === 'add' ? change.after_cell_id : change.cell_id;
  const found = target === null ? -1 : cellIndex(notebook, target);
  if (target !== null && found < 0) {
    return { error: `no cell with id ${target} in the notebook` };
  }
  const mark = { client: origin.client, tool: origin.tool };
  if (change.op === 'add') {
    const index = target === null ? notebook.cells.length : found + 1;
    const cell = notebook.insertCell(index, {
      cell_type: change.cell_type,
      source,
      metadata: { [OUTSIDE_KEY]: mark }
    });
    return { cell_id: cell.id };
  }
  const cell = notebook.cells[found];
  notebook.transact(() => {
    cell.setSource(source);
    cell.setMetadata(OUTSIDE_KEY, mark);
  });
  return { cell_id: cell.id };
}

/** What running a cell needs of its widget in the notebook view (a `Cell` has it). */
export interface IOutsideCellWidget {
  readonly model: ICellModel;
}

/**
 * Runs a code cell's widget in the notebook's kernel, its outputs landing in
 * the cell: the execute reply, or nothing when nothing ran (empty source).
 */
export type CellExecutor = (
  cell: IOutsideCellWidget
) => Promise<KernelMessage.IExecuteReplyMsg | void>;

/** JupyterLab's own run of a code cell (as Shift+Enter does), in `session`. */
export function executeCell(
  cell: IOutsideCellWidget,
  session: ISessionContext
): Promise<KernelMessage.IExecuteReplyMsg | void> {
  if (!session.session?.kernel) {
    return Promise.reject(new Error('the notebook has no kernel'));
  }
  if (!(cell instanceof CodeCell)) {
    return Promise.reject(new Error('the cell is not shown as a code cell'));
  }
  return CodeCell.execute(cell, session);
}

// Escape sequences of terminal colours and titles (CSI, OSC, two-character).
const ANSI =
  // eslint-disable-next-line no-control-regex
  /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;

function multiline(value: unknown): string {
  if (Array.isArray(value)) {
    return value.filter(part => typeof part === 'string').join('');
  }
  return typeof value === 'string' ? value : '';
}

/** The text of one output: stream text, text/plain of a result or display, an error. */
function outputPart(output: unknown): string {
  if (!isJSONObject(output)) {
    return '';
  }
  switch (output['output_type']) {
    case 'stream':
      return multiline(output['text']);
    case 'execute_result':
    case 'display_data': {
      const data = output['data'];
      return isJSONObject(data) ? multiline(data['text/plain']) : '';
    }
    case 'error': {
      const traceback = Array.isArray(output['traceback'])
        ? output['traceback'].filter(line => typeof line === 'string')
        : [];
      const head = `${multiline(output['ename'])}: ${multiline(output['evalue'])}`;
      return [head, ...traceback].join('\n');
    }
    default:
      return '';
  }
}

/**
 * The text of a cell's outputs as the agent reads it, terminal escapes
 * removed, at most `OUTPUTS_SENT` characters (the end cut, and said).
 */
export function outputText(outputs: readonly unknown[]): string {
  let text = '';
  for (const output of outputs) {
    const part = outputPart(output).replace(ANSI, '');
    if (part === '') {
      continue;
    }
    text += text === '' || text.endsWith('\n') ? part : `\n${part}`;
  }
  if (text.length <= OUTPUTS_SENT) {
    return text;
  }
  const note = `\n… (${text.length} characters in all)`;
  return text.slice(0, OUTPUTS_SENT - note.length) + note;
}

function runStatus(
  reply: KernelMessage.IExecuteReplyMsg | void
): 'ok' | 'error' | 'aborted' {
  const status = reply ? reply.content.status : 'ok';
  return status === 'ok' || status === 'error' ? status : 'aborted';
}

/**
 * Run the code cell `cellId` of the view's `cells` with `execute`, its
 * source as it is now. Returns what the server is told: the cell's id, the
 * source that ran, its outputs' text and the reply's status; or an error
 * when nothing ran (no such cell, not a code cell, no kernel).
 */
export async function runCell(
  cells: readonly IOutsideCellWidget[],
  cellId: string,
  execute: CellExecutor
): Promise<OutsideApplied> {
  const cell = cells.find(widget => widget.model.id === cellId);
  if (!cell) {
    return { error: `no cell with id ${cellId} in the notebook` };
  }
  const model = cell.model;
  if (!isCodeCellModel(model)) {
    return { error: `cell ${cellId} is a ${model.type} cell: nothing to run` };
  }
  const source = model.sharedModel.getSource();
  let reply: KernelMessage.IExecuteReplyMsg | void;
  try {
    reply = await execute(cell);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { error: message || 'the run failed' };
  }
  return {
    cell_id: cellId,
    source,
    outputs: outputText(model.outputs.toJSON()),
    status: runStatus(reply)
  };
}

/** What the cell changes post to the server (`OutsideRequests` has it). */
export interface IOutsideCellPosts {
  claim(id: string): Promise<PostOutcome>;
  decide(id: string, decision: DecisionBody): Promise<PostOutcome>;
}

/** Where a cell change of this page stands. */
type ChangeProgress =
  /** Claim, change (or run) and decision on their way. */
  | { step: 'busy' }
  /** Decided, or another page applies it. */
  | { step: 'done' }
  /** Applied here; the decision did not reach the server. */
  | { step: 'unsent'; decision: DecisionBody };

/**
 * Applies the cell changes of one notebook view's requests: on the user's
 * click, or at once for those the user's policy or a grant allows ("apply").
 * One page applies each change (the server's claim answers the first page
 * only); the decision then tells the server what the page did.
 */
export class OutsideCellChanges {
  constructor(
    private readonly _requests: IOutsideCellPosts,
    private readonly _notebook: () => OutsideNotebook | null,
    /** Runs a cell of the notebook view (run_cell): what the server is told. */
    private readonly _run: (cellId: string) => Promise<OutsideApplied>
  ) {}

  /**
   * For each item of an answer: apply once a change that needs no click, and
   * send again a decision that did not reach the server (nothing re-applied,
   * nothing re-run).
   */
  applyAllowed(items: readonly OutsideApproval[]): void {
    for (const item of items) {
      const progress = this._progress.get(item.id);
      if (progress?.step === 'unsent') {
        void this.decide(item, progress.decision);
      } else if (item.state === 'apply' && progress === undefined) {
        void this.decide(item, { decision: 'approve', reason: '' });
      }
    }
  }

  /**
   * Send a decision on a cell change: a rejection as it is; otherwise claim
   * the change, apply it (or run the cell), and send the decision with what
   * was done. A change applied before is not applied again: its decision is
   * sent again.
   */
  async decide(
    item: OutsideApproval,
    decision: DecisionBody
  ): Promise<PostOutcome> {
    const known = this._progress.get(item.id);
    if (known?.step === 'busy' || known?.step === 'done') {
      return { outcome: 'taken' };
    }
    if (known === undefined && decision.decision === 'deny') {
      return this._requests.decide(item.id, decision);
    }
    this._progress.set(item.id, { step: 'busy' });
    let applied = known?.step === 'unsent' ? known.decision : null;
    if (applied === null) {
      const claim = await this._requests.claim(item.id);
      if (claim.outcome !== 'ok') {
        this._settle(item.id, claim.outcome === 'taken' ? 'done' : null);
        return claim;
      }
      applied = { ...decision, applied: await this._apply(item, decision) };
    }
    const sent = await this._requests.decide(item.id, applied);
    this._settle(item.id, sent.outcome === 'failed' ? applied : 'done');
    return sent;
  }

  private async _apply(
    item: OutsideApproval,
    decision: DecisionBody
  ): Promise<OutsideApplied> {
    if (item.cell?.op === 'run') {
      return this._run(item.cell.cell_id);
    }
    const notebook = this._notebook();
    if (!item.cell || !notebook) {
      return { error: 'the notebook is closed' };
    }
    const source =
      decision.decision === 'edit' ? (decision.code ?? item.code) : item.code;
    return applyCellChange(notebook, item.cell, source, item);
  }

  /** Remember the outcome: done, a decision to send again, or nothing (claim again). */
  private _settle(id: string, outcome: 'done' | DecisionBody | null): void {
    if (outcome === null) {
      this._progress.delete(id);
    } else if (outcome === 'done') {
      this._progress.set(id, { step: 'done' });
    } else {
      this._progress.set(id, { step: 'unsent', decision: outcome });
    }
  }

  private readonly _progress = new Map<string, ChangeProgress>();
}
