/**
 * The comm bridge: lets the notebook's kernel read and write `metadata.qloop`
 * of the cells of that notebook and the notebook's saved approval grants,
 * read a bounded view of its cells, and propose cells for the user to accept
 * or reject.
 */
import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookModel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';

import type { Attached } from './generated/protocol';
import { grantsNotice } from './grants';
import { TRANSLATION_DOMAIN } from './labels';
import { trackLiveClient } from './live';
import { ICellJSON } from './notebookview';
import {
  PROPOSAL_KEY,
  GRANTS_KEY,
  Hello,
  IAck,
  ICellLookup,
  INotebookMetadata,
  IProposalCell,
  IProposalNotebook,
  IRunnableCell,
  handleRequest
} from './protocol';
import { ProposalBoard, ProposalCellType } from './proposals';
import { COMM_TARGET, TRANSCRIPT_MIME, isJSONObject } from './record';
import { EXTENSION_VERSION } from './version';
import { reattach, registerWaiting } from './waiting';

const HELLO: Hello = {
  frontend: 'jupyterlab',
  version: EXTENSION_VERSION
};

type IOutputJSON = Parameters<ICodeCellModel['outputs']['add']>[0];

/** Looks cells up by id in a notebook model that may close meanwhile. */
export class NotebookCells implements ICellLookup {
  constructor(
    private readonly _model: () => INotebookModel | null,
    private readonly _path: () => string = () => '',
    private readonly _board: ProposalBoard | null = null
  ) {}

  /** The cells as proposals change them, or undefined without a board or once closed. */
  proposals(): IProposalNotebook | undefined {
    const model = this._model();
    if (!this._board || !model || model.isDisposed) {
      return undefined;
    }
    return {
      board: this._board,
      cell: cellId => {
        const cell = this.findCell(cellId);
        return cell ? proposalCell(cell) : undefined;
      },
      insertCell: (afterId, cellType, source, metadata) =>
        insertAfter(model, afterId, cellType, source, metadata),
      removeCell: cellId => {
        const index = indexOf(this._model(), cellId);
        if (index >= 0) {
          model.sharedModel.deleteCell(index);
        }
      },
      proposedCell: id => {
        for (const cell of model.cells) {
          const mark = cell.getMetadata(PROPOSAL_KEY);
          if (isJSONObject(mark) && mark['id'] === id) {
            return cell.id;
          }
        }
        return undefined;
      }
    };
  }

  /** The notebook's path and metadata, or undefined once it is closed. */
  notebook(): INotebookMetadata | undefined {
    const model = this._model();
    if (!model || model.isDisposed) {
      return undefined;
    }
    return {
      path: this._path(),
      getMetadata: key => model.getMetadata(key),
      setMetadata: (key, value) => model.setMetadata(key, value)
    };
  }

  /** Every cell as nbformat JSON, or undefined once the notebook is closed. */
  cellsJSON(): ICellJSON[] | undefined {
    const model = this._model();
    if (!model || model.isDisposed) {
      return undefined;
    }
    const cells: ICellJSON[] = [];
    for (const cell of model.cells) {
      const json = cell.toJSON();
      // A notebook below nbformat 4.5 saves no cell ids; the model has one.
      cells.push(json.id ? json : { ...json, id: cell.id });
    }
    return cells;
  }

  /**
   * Show a finished turn's record in a cell that has no output of that turn:
   * this page was reloaded (or opened) while the turn ran, so the turn's
   * outputs, its mirror included, went to the page that ran it. The record
   * is added as the turn's mirror output (the transcript view), or replaces
   * an earlier copy of the same turn's mirror; a page that runs the cell, or
   * already shows the record, is left alone.
   */
  recordSaved(cellId: string, record: JSONObject): void {
    const cell = this.findCell(cellId);
    if (
      !cell ||
      cell.type !== 'code' ||
      record['status'] === 'running' ||
      typeof record['digest'] !== 'string' ||
      !record['digest']
    ) {
      return;
    }
    const code = cell as ICodeCellModel;
    if (code.executionState === 'running') {
      return; // this page gets the turn's own outputs
    }
    const mirror: IOutputJSON = {
      output_type: 'display_data',
      data: { [TRANSCRIPT_MIME]: record },
      metadata: {}
    };
    for (let index = code.outputs.length - 1; index >= 0; index--) {
      const shown = code.outputs.get(index).data[TRANSCRIPT_MIME];
      if (!isJSONObject(shown)) {
        continue;
      }
      if (shown['digest'] === record['digest']) {
        return;
      }
      if (sameTurn(shown, record)) {
        code.outputs.set(index, mirror);
        return;
      }
    }
    code.outputs.add(mirror);
  }

  /** The cell with this id as the agent runs it, or undefined. */
  runnableCell(cellId: string): IRunnableCell | undefined {
    const cell = this.findCell(cellId);
    if (!cell) {
      return undefined;
    }
    return {
      cellType: cell.type,
      getSource: () => cell.sharedModel.getSource(),
      setSource: source => cell.sharedModel.setSource(source),
      setOutputs: (outputs, effect) => {
        // As an execution does: through the cell model, which keeps the shared
        // document (every view, every collaborator) in step. Not inside one
        // shared-model transaction: the model would take the transaction's
        // output changes back from the shared document and show them twice.
        const code = cell as ICodeCellModel;
        code.outputs.clear();
        outputs.forEach(output => code.outputs.add(output as IOutputJSON));
        code.executionCount = null;
        this._board?.showEffect(cellId, effect);
      }
    };
  }

  /** The cell with this id, or undefined. */
  findCell(cellId: string): ICellModel | undefined {
    const model = this._model();
    if (!model || model.isDisposed) {
      return undefined;
    }
    for (const cell of model.cells) {
      if (cell.id === cellId) {
        return cell;
      }
    }
    return undefined;
  }
}

/** The index of the cell in the notebook, or -1 (also once closed). */
function indexOf(model: INotebookModel | null, cellId: string): number {
  if (!model || model.isDisposed) {
    return -1;
  }
  return Array.from(model.cells).findIndex(cell => cell.id === cellId);
}

function insertAfter(
  model: INotebookModel,
  afterId: string,
  cellType: ProposalCellType,
  source: string,
  metadata: JSONObject
): string {
  const index = indexOf(model, afterId) + 1;
  const cell = model.sharedModel.insertCell(index, {
    cell_type: cellType,
    source,
    metadata
  });
  return cell.getId();
}

function proposalCell(cell: ICellModel): IProposalCell {
  return {
    getSource: () => cell.sharedModel.getSource(),
    setSource: source => cell.sharedModel.setSource(source),
    setMetadata: (key, value) => cell.setMetadata(key, value),
    getMetadata: key => cell.getMetadata(key),
    deleteMetadata: key => cell.deleteMetadata(key)
  };
}

/** Whether two records are of one turn: one session, one start. */
function sameTurn(a: JSONObject, b: JSONObject): boolean {
  const started = (record: JSONObject): unknown => {
    const timings = record['timings'];
    return isJSONObject(timings) ? timings['started_at'] : undefined;
  };
  return (
    typeof a['session_id'] === 'string' &&
    a['session_id'] === b['session_id'] &&
    typeof started(a) === 'string' &&
    started(a) === started(b)
  );
}

/**
 * A signal that aborts when the comm closes: the kernel closes it, restarts,
 * or the connection goes (which disposes the comm without calling onClose).
 */
function closedSignal(
  kernel: Kernel.IKernelConnection,
  comm: Kernel.IComm
): AbortSignal {
  const controller = new AbortController();
  const abort = () => controller.abort();
  const onStatus = (_: unknown, status: Kernel.Status) => {
    if (['restarting', 'autorestarting', 'dead'].includes(status)) {
      abort();
    }
  };
  comm.onClose = abort;
  kernel.statusChanged.connect(onStatus);
  kernel.disposed.connect(abort);
  controller.signal.addEventListener('abort', () => {
    kernel.statusChanged.disconnect(onStatus);
    kernel.disposed.disconnect(abort);
  });
  return controller.signal;
}

function send(comm: Kernel.IComm, answer: IAck): void {
  if (comm.isDisposed) {
    return;
  }
  try {
    comm.send(answer).done.catch(reason => {
      console.warn('qloop: the kernel did not receive an ack', reason);
    });
  } catch (reason) {
    // The kernel went away between the request and the reply.
    console.warn('qloop: could not send an ack', reason);
  }
}

/** Answer a request: at once, or (a proposal) once the user decides. */
function reply(
  comm: Kernel.IComm,
  data: unknown,
  cells: ICellLookup,
  signal: AbortSignal,
  follows = false
): void {
  const answer = handleRequest(data, cells, HELLO, signal, follows);
  if (answer instanceof Promise) {
    answer
      .then(later => {
        if (later !== null && !signal.aborted) {
          send(comm, later);
        }
      })
      .catch(reason => console.warn('qloop: a proposal failed', reason));
  } else {
    send(comm, answer);
  }
}

/**
 * Whether a request came from a cell another connection runs: every page on
 * the kernel gets the kernel's comm messages, and under real-time
 * collaboration they all show one shared notebook, so only the page that runs
 * the agent cell (or took its comm over) inserts a proposal; the others follow.
 */
function runByAnother(
  kernel: Kernel.IKernelConnection,
  message: KernelMessage.IMessage
): boolean {
  const parent = message.parent_header as Partial<KernelMessage.IHeader>;
  return (
    typeof parent.session === 'string' && parent.session !== kernel.clientId
  );
}

/**
 * Let the comm answer the kernel's requests until it closes. `owner`: this
 * page took the comm over from a page that went away, and answers for it.
 */
function serve(
  kernel: Kernel.IKernelConnection,
  comm: Kernel.IComm,
  cells: ICellLookup,
  owner = false
): AbortSignal {
  const signal = closedSignal(kernel, comm);
  comm.onMsg = (message: KernelMessage.ICommMsgMsg) => {
    const follows = !owner && runByAnother(kernel, message);
    reply(comm, message.content.data, cells, signal, follows);
  };
  return signal;
}

function openHandler(kernel: Kernel.IKernelConnection, cells: ICellLookup) {
  return (comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void => {
    const signal = serve(kernel, comm, cells);
    // A request may ride on the open message itself.
    const data: unknown = msg.content.data;
    if (isJSONObject(data) && typeof data['op'] === 'string') {
      reply(comm, data, cells, signal);
    }
  };
}

function register(
  kernel: Kernel.IKernelConnection | null | undefined,
  cells: NotebookCells,
  ready: Promise<unknown>
): void {
  if (kernel && !kernel.isDisposed) {
    // The registry belongs to the connection and survives restarts; a second
    // registration on the same connection replaces the first.
    kernel.registerCommTarget(COMM_TARGET, openHandler(kernel, cells));
    registerWaiting(kernel);
    trackLiveClient(kernel.clientId, {
      connect: slot => kernel.disposed.connect(slot)
    });
    // A kernel that already ran cells for an earlier page (a reload): take
    // over its comms, and show a card that waits for a click again.
    ready
      .then(() =>
        reattach(
          kernel,
          id => cells.findCell(id),
          COMM_TARGET,
          comm => {
            serve(kernel, comm, cells, true);
            // The kernel sends again what waits for a page's answer (a proposal).
            try {
              comm.send({ op: 'attached' } satisfies Attached);
            } catch (reason) {
              console.debug('qloop: the comm closed meanwhile', reason);
            }
          }
        )
      )
      .catch(reason => console.debug('qloop: no comms to take over', reason));
  }
}

/**
 * Register the `qloop` comm target on the notebook's kernel, now and on every
 * later kernel (kernel change, new session).
 */
export function connectCommBridge(
  sessionContext: ISessionContext,
  model: () => INotebookModel | null,
  board: ProposalBoard | null = null
): void {
  const cells = new NotebookCells(model, () => sessionContext.path, board);
  if (board) {
    followProposalCells(model(), board, cells);
  }
  register(sessionContext.session?.kernel, cells, sessionContext.ready);
  sessionContext.kernelChanged.connect((_, change) =>
    register(change.newValue, cells, sessionContext.ready)
  );
  // The session starts once the notebook's content is loaded.
  sessionContext.ready
    .then(() => showSavedGrants(model()))
    .catch(reason => console.debug('qloop: no session', reason));
}

/** A change of one key of a cell's metadata, as its model tells it. */
interface IMetadataChange {
  key: string;
  type: string;
  oldValue?: unknown;
}

/**
 * A waiting proposal whose cell the user deletes is rejected. One whose cell
 * loses its mark was decided on another page of the shared notebook: it goes
 * at once, before a deletion that follows (a rejected new cell) reaches this
 * page, so that only the deciding page answers, with the user's reason.
 */
export function followProposalCells(
  model: INotebookModel | null,
  board: ProposalBoard,
  cells: NotebookCells
): void {
  if (!model) {
    return;
  }
  const unmarked = (_: ICellModel, change: IMetadataChange) => {
    const mark = change.oldValue;
    if (
      change.key === PROPOSAL_KEY &&
      change.type === 'remove' &&
      isJSONObject(mark) &&
      typeof mark['id'] === 'string'
    ) {
      board.settleElsewhere(mark['id']);
    }
  };
  for (const cell of model.cells) {
    cell.metadataChanged.connect(unmarked);
  }
  model.cells.changed.connect((_, change) => {
    // Connecting a cell again (one moved) does nothing.
    change.newValues.forEach(cell => cell.metadataChanged.connect(unmarked));
    // A change of cell type deletes the cell and inserts one with the same
    // id: look once both have happened.
    setTimeout(() => {
      if (!model.isDisposed) {
        board.sweep(id => cells.findCell(id) !== undefined);
      }
    });
  });
}

/** Tell the user, once on open, that the notebook saves approval grants. */
function showSavedGrants(model: INotebookModel | null): void {
  if (!model || model.isDisposed) {
    return;
  }
  const trans = nullTranslator.load(TRANSLATION_DOMAIN);
  const notice = grantsNotice(model.getMetadata(GRANTS_KEY), trans);
  if (notice) {
    Notification.warning(notice, { autoClose: false });
  }
}
