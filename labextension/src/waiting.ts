/**
 * A page opened while an agent cell waits at its approval card (a reload, a
 * second tab) shows that card again.
 *
 * The kernel keeps one `qloop.waiting` comm open per waiting card. On
 * connecting, this page lists the kernel's comms of that target, asks each
 * one it does not know which cell waits at which widget, and adds the card's
 * widget view to that cell: the widget manager restores the widget from the
 * kernel, so its buttons end the wait. The kernel's `qloop` comm opened for
 * an earlier page is taken over the same way, so the turn's record is still
 * saved into this page's cell metadata.
 */
import { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject } from '@lumino/coreutils';

import type { Describe, Waiting } from './generated/protocol';
import { Untrusted, isJSONObject } from './record';

/** The kernel's comm target of a waiting card (qloop_kernel/notebook/waiting.py). */
export const WAITING_TARGET = 'qloop.waiting';
export const WIDGET_VIEW_MIME = 'application/vnd.jupyter.widget-view+json';
/**
 * Output metadata of a card shown again: it belongs to the running turn, so
 * the transcript view of an earlier turn never supersedes it.
 */
export const WAITING_METADATA = 'qloop_waiting';

/**
 * The card widgets this page knows wait, found through the kernel's comms:
 * under real-time collaboration a page opened later finds a card already in
 * the shared outputs, without the output metadata above. Never superseded.
 */
const waitingModels = new Set<string>();
const waitingListeners = new Set<() => void>();

/** Whether this page knows the widget model waits at an approval card. */
export function isWaitingModel(modelId: unknown): boolean {
  return typeof modelId === 'string' && waitingModels.has(modelId);
}

/** Call `listener` whenever the set of waiting card widgets changes. */
export function onWaitingChanged(listener: () => void): () => void {
  waitingListeners.add(listener);
  return () => waitingListeners.delete(listener);
}

function setWaiting(modelId: string, waits: boolean): void {
  if (waitingModels.has(modelId) === waits) {
    return;
  }
  if (waits) {
    waitingModels.add(modelId);
  } else {
    waitingModels.delete(modelId);
  }
  waitingListeners.forEach(listener => listener());
}

/** Which cell waits at which card widget. */
export interface IWaitingCard {
  cellId: string;
  modelId: string;
}

/** The waiting card a kernel describes, or null for anything else. */
export function parseWaiting(data: unknown): IWaitingCard | null {
  if (!isJSONObject(data)) {
    return null;
  }
  const message: Untrusted<Waiting> = data;
  if (message['op'] !== 'waiting') {
    return null;
  }
  const cellId = message['cell_id'];
  const modelId = message['model_id'];
  if (
    typeof cellId !== 'string' ||
    cellId === '' ||
    typeof modelId !== 'string' ||
    !/^[\w-]{1,128}$/.test(modelId)
  ) {
    return null;
  }
  return { cellId, modelId };
}

function isCodeCell(cell: ICellModel): cell is ICodeCellModel {
  return cell.type === 'code';
}

function showsWidget(output: JSONObject, modelId: string): boolean {
  const data = output['data'];
  if (!isJSONObject(data)) {
    return false;
  }
  const view = data[WIDGET_VIEW_MIME];
  return isJSONObject(view) && view['model_id'] === modelId;
}

/**
 * Add the card's widget view to its cell unless the cell shows it already,
 * as the running cell's output. Returns whether the view was added.
 */
export function showWaitingCard(
  card: IWaitingCard,
  findCell: (cellId: string) => ICellModel | undefined
): boolean {
  const cell = findCell(card.cellId);
  if (!cell || !isCodeCell(cell)) {
    return false;
  }
  setWaiting(card.modelId, true);
  const outputs = cell.outputs;
  for (let index = 0; index < outputs.length; index++) {
    if (showsWidget(outputs.get(index).toJSON() as JSONObject, card.modelId)) {
      return false;
    }
  }
  if (!cell.trusted) {
    // A widget renders only as a trusted output. The page that ran the cell
    // cleared its outputs and trusted it; what this page loaded in their
    // place is from the file (a received notebook's, perhaps): dropped from
    // the view, never trusted. A trusted cell keeps what it shows.
    outputs.clear();
    cell.trusted = true;
  }
  outputs.add({
    output_type: 'display_data',
    data: {
      [WIDGET_VIEW_MIME]: {
        model_id: card.modelId,
        version_major: 2,
        version_minor: 0
      }
    },
    metadata: { [WAITING_METADATA]: true }
  });
  return true;
}

/** The ids of the kernel's open comms of `target`. */
async function openComms(
  kernel: Kernel.IKernelConnection,
  target: string
): Promise<string[]> {
  const reply = await kernel.requestCommInfo({ target_name: target });
  const content = reply.content;
  if (content.status !== 'ok') {
    return [];
  }
  return Object.entries(content.comms)
    .filter(([, info]) => info.target_name === target)
    .map(([commId]) => commId);
}

/**
 * Take over the comms the kernel opened for an earlier page: waiting cards
 * are shown again, and `adoptBridge` gets each `qloop` comm of `bridgeTarget`.
 */
export async function reattach(
  kernel: Kernel.IKernelConnection,
  findCell: (cellId: string) => ICellModel | undefined,
  bridgeTarget: string,
  adoptBridge: (comm: Kernel.IComm) => void
): Promise<void> {
  for (const commId of await openComms(kernel, bridgeTarget)) {
    if (!kernel.isDisposed && !kernel.hasComm(commId)) {
      adoptBridge(kernel.createComm(bridgeTarget, commId));
    }
  }
  for (const commId of await openComms(kernel, WAITING_TARGET)) {
    if (kernel.isDisposed || kernel.hasComm(commId)) {
      continue; // this page opened it: the card is on screen
    }
    ask(kernel.createComm(WAITING_TARGET, commId), findCell);
  }
}

/** Ask a waiting comm what waits; show the card it describes. */
function ask(
  comm: Kernel.IComm,
  findCell: (cellId: string) => ICellModel | undefined
): Kernel.IComm {
  let shown: IWaitingCard | null = null;
  comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
    const card = parseWaiting(msg.content.data);
    if (card) {
      shown = card;
      showWaitingCard(card, findCell);
    }
  };
  // The kernel closes the comm once the card is decided.
  comm.onClose = () => {
    if (shown) {
      setWaiting(shown.modelId, false);
    }
  };
  comm.send({ op: 'describe' } satisfies Describe);
  return comm;
}

/** Keep the kernel's waiting-card comms open on this page (nothing to do). */
export function registerWaiting(kernel: Kernel.IKernelConnection): void {
  kernel.registerCommTarget(WAITING_TARGET, () => undefined);
}
