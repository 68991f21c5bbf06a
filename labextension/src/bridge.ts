/**
 * The comm bridge: lets the notebook's kernel read and write `metadata.qloop`
 * of the cells of that notebook and the notebook's saved approval grants, and
 * read a bounded view of its cells.
 */
import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { ICellModel } from '@jupyterlab/cells';
import { INotebookModel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';

import { grantsNotice } from './grants';
import { TRANSLATION_DOMAIN } from './labels';
import { trackLiveClient } from './live';
import { ICellJSON } from './notebookview';
import {
  GRANTS_KEY,
  ICellLookup,
  INotebookMetadata,
  handleRequest
} from './protocol';
import { COMM_TARGET, isJSONObject } from './record';
import { EXTENSION_VERSION } from './version';
import { reattach, registerWaiting } from './waiting';

const HELLO: JSONObject = {
  frontend: 'jupyterlab',
  version: EXTENSION_VERSION
};

/** Looks cells up by id in a notebook model that may close meanwhile. */
export class NotebookCells implements ICellLookup {
  constructor(
    private readonly _model: () => INotebookModel | null,
    private readonly _path: () => string = () => ''
  ) {}

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

function reply(comm: Kernel.IComm, data: unknown, cells: ICellLookup): void {
  const answer = handleRequest(data, cells, HELLO);
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

function openHandler(cells: ICellLookup) {
  return (comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void => {
    comm.onMsg = (message: KernelMessage.ICommMsgMsg) => {
      reply(comm, message.content.data, cells);
    };
    // A request may ride on the open message itself.
    const data: unknown = msg.content.data;
    if (isJSONObject(data) && typeof data['op'] === 'string') {
      reply(comm, data, cells);
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
    kernel.registerCommTarget(COMM_TARGET, openHandler(cells));
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
            comm.onMsg = (message: KernelMessage.ICommMsgMsg) => {
              reply(comm, message.content.data, cells);
            };
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
  model: () => INotebookModel | null
): void {
  const cells = new NotebookCells(model, () => sessionContext.path);
  register(sessionContext.session?.kernel, cells, sessionContext.ready);
  sessionContext.kernelChanged.connect((_, change) =>
    register(change.newValue, cells, sessionContext.ready)
  );
  // The session starts once the notebook's content is loaded.
  sessionContext.ready
    .then(() => showSavedGrants(model()))
    .catch(reason => console.debug('qloop: no session', reason));
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
