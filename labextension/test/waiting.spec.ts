/**
 * A card that waits is shown again on a page opened later: what the kernel's
 * description is trusted with, the output it adds to a real cell model, and
 * which of the kernel's comms are taken over.
 */
import {
  CodeCellModel,
  ICellModel,
  MarkdownCellModel
} from '@jupyterlab/cells';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { supersededIndexes } from '../src/supersede';
import {
  WAITING_TARGET,
  WIDGET_VIEW_MIME,
  isWaitingModel,
  onWaitingChanged,
  parseWaiting,
  reattach,
  showWaitingCard
} from '../src/waiting';

const waiting = { op: 'waiting', cell_id: 'c1', model_id: 'abc123' };

describe('parseWaiting', () => {
  it('reads the cell and the widget model', () => {
    expect(parseWaiting(waiting)).toEqual({ cellId: 'c1', modelId: 'abc123' });
  });

  it.each([
    null,
    'waiting',
    { ...waiting, op: 'ack' },
    { ...waiting, cell_id: '' },
    { ...waiting, cell_id: 7 },
    { ...waiting, model_id: '../x' },
    { ...waiting, model_id: 'a'.repeat(200) },
    { op: 'waiting' }
  ])('refuses %j', data => {
    expect(parseWaiting(data)).toBeNull();
  });
});

function views(cell: CodeCellModel): unknown[] {
  return cell.outputs
    .toJSON()
    .map(
      o =>
        (o.data as { [mime: string]: unknown } | undefined)?.[WIDGET_VIEW_MIME]
    );
}

describe('showWaitingCard', () => {
  it('adds the widget view once, after what a trusted cell shows', () => {
    const cell = new CodeCellModel({});
    cell.trusted = true;
    cell.outputs.add({ output_type: 'stream', name: 'stdout', text: 'hi\n' });
    const find = (id: string): ICellModel | undefined =>
      id === 'c1' ? cell : undefined;
    const card = { cellId: 'c1', modelId: 'abc123' };
    expect(showWaitingCard(card, find)).toBe(true);
    expect(showWaitingCard(card, find)).toBe(false);
    expect(cell.outputs.length).toBe(2);
    expect(views(cell)[1]).toEqual({
      model_id: 'abc123',
      version_major: 2,
      version_minor: 0
    });
    cell.dispose();
  });

  it('replaces what an untrusted cell shows from the file, then trusts the cell', () => {
    const cell = new CodeCellModel({});
    cell.outputs.add({
      output_type: 'display_data',
      data: { 'text/html': '<img src=x onerror=alert(1)>' },
      metadata: {}
    });
    expect(cell.trusted).toBe(false);
    showWaitingCard({ cellId: 'c1', modelId: 'abc123' }, () => cell);
    expect(cell.outputs.length).toBe(1);
    expect(cell.outputs.get(0).trusted).toBe(true);
    expect(views(cell)).toEqual([
      { model_id: 'abc123', version_major: 2, version_minor: 0 }
    ]);
    cell.dispose();
  });

  it('leaves a cell alone that shows the card already, or is not code', () => {
    const cell = new CodeCellModel({});
    cell.outputs.add({
      output_type: 'display_data',
      data: { [WIDGET_VIEW_MIME]: { model_id: 'abc123' } },
      metadata: {}
    });
    const markdown = new MarkdownCellModel({});
    const card = { cellId: 'c1', modelId: 'abc123' };
    expect(showWaitingCard(card, () => cell)).toBe(false);
    expect(showWaitingCard(card, () => markdown)).toBe(false);
    expect(showWaitingCard(card, () => undefined)).toBe(false);
    expect(cell.outputs.length).toBe(1);
    cell.dispose();
    markdown.dispose();
  });

  it('is never superseded by the transcript view of an earlier turn', () => {
    const cell = new CodeCellModel({});
    cell.outputs.add({
      output_type: 'display_data',
      data: {
        'application/vnd.qloop.transcript+json': { status: 'completed' }
      },
      metadata: {}
    });
    showWaitingCard({ cellId: 'c1', modelId: 'abc123' }, () => cell);
    const outputs = cell.outputs.toJSON().map(o => ({
      type: o.output_type,
      data: (o.data ?? {}) as { [mime: string]: unknown },
      metadata: (o.metadata ?? {}) as { [key: string]: unknown }
    }));
    expect(supersededIndexes(outputs)).toEqual([]);
    cell.dispose();
  });
});

/** A comm as `reattach` uses it. */
interface IFakeComm {
  commId: string;
  onMsg:
    ((msg: { content: { comm_id: string; data: unknown } }) => void) | null;
  onClose: (() => void) | null;
  send: (data: unknown) => void;
}

/** The part of a kernel connection `reattach` uses, with comms of an earlier page. */
class KernelWithComms {
  sent: { commId: string; data: unknown }[] = [];
  created: { target: string; commId: string; comm: IFakeComm }[] = [];
  isDisposed = false;

  constructor(
    private readonly _open: { [commId: string]: string },
    private readonly _known: Set<string> = new Set()
  ) {}

  requestCommInfo(content: {
    target_name?: string;
  }): Promise<KernelMessage.ICommInfoReplyMsg> {
    const comms: { [id: string]: { target_name: string } } = {};
    for (const [id, target] of Object.entries(this._open)) {
      if (!content.target_name || content.target_name === target) {
        comms[id] = { target_name: target };
      }
    }
    return Promise.resolve({
      content: { status: 'ok', comms }
    } as unknown as KernelMessage.ICommInfoReplyMsg);
  }

  hasComm(commId: string): boolean {
    return this._known.has(commId);
  }

  createComm(target: string, commId: string): IFakeComm {
    const comm: IFakeComm = {
      commId,
      onMsg: null,
      onClose: null,
      send: (data: unknown) => this.sent.push({ commId, data })
    };
    this._known.add(commId);
    this.created.push({ target, commId, comm });
    return comm;
  }
}

describe('reattach', () => {
  it("takes over an earlier page's comms and shows the card it describes", async () => {
    const kernel = new KernelWithComms(
      {
        b1: 'qloop',
        w1: WAITING_TARGET,
        w2: WAITING_TARGET,
        x: 'jupyter.widget'
      },
      new Set(['w2'])
    );
    const cell = new CodeCellModel({});
    const adopted: string[] = [];
    await reattach(
      kernel as unknown as Kernel.IKernelConnection,
      id => (id === 'c1' ? cell : undefined),
      'qloop',
      comm => {
        adopted.push(comm.commId);
      }
    );
    expect(adopted).toEqual(['b1']);
    // w2 is this page's own comm (its card is on screen); the widget comm is not ours.
    expect(kernel.created.map(c => c.commId)).toEqual(['b1', 'w1']);
    expect(kernel.sent).toEqual([{ commId: 'w1', data: { op: 'describe' } }]);

    const onMsg = kernel.created[1].comm.onMsg!;
    onMsg({ content: { comm_id: 'w1', data: waiting } });
    onMsg({ content: { comm_id: 'w1', data: waiting } }); // asked twice: shown once
    onMsg({ content: { comm_id: 'w1', data: { op: 'other' } } });
    expect(views(cell)).toEqual([
      { model_id: 'abc123', version_major: 2, version_minor: 0 }
    ]);
    cell.dispose();
  });

  it('never lets a transcript hide a waiting card found in shared outputs, until it is decided', async () => {
    // Under real-time collaboration the earlier page's outputs are shared:
    // the card is there already, without this page's output metadata.
    const kernel = new KernelWithComms({ w9: WAITING_TARGET });
    const cell = new CodeCellModel({});
    cell.trusted = true;
    cell.outputs.add({
      output_type: 'display_data',
      data: {
        'application/vnd.qloop.transcript+json': { status: 'completed' }
      },
      metadata: {}
    });
    cell.outputs.add({
      output_type: 'display_data',
      data: { [WIDGET_VIEW_MIME]: { model_id: 'shared1' } },
      metadata: {}
    });
    const outputs = () =>
      cell.outputs.toJSON().map(o => ({
        type: o.output_type,
        data: (o.data ?? {}) as { [mime: string]: unknown },
        metadata: (o.metadata ?? {}) as { [key: string]: unknown }
      }));
    expect(supersededIndexes(outputs())).toEqual([1]);
    let changes = 0;
    const stop = onWaitingChanged(() => changes++);
    await reattach(
      kernel as unknown as Kernel.IKernelConnection,
      () => cell,
      'qloop',
      () => undefined
    );
    const comm = kernel.created[0].comm;
    comm.onMsg!({
      content: {
        comm_id: 'w9',
        data: { op: 'waiting', cell_id: 'c1', model_id: 'shared1' }
      }
    });
    expect(cell.outputs.length).toBe(2); // not added twice
    expect(isWaitingModel('shared1')).toBe(true);
    expect(changes).toBe(1);
    expect(supersededIndexes(outputs())).toEqual([]);
    comm.onClose!();
    expect(isWaitingModel('shared1')).toBe(false);
    expect(changes).toBe(2);
    expect(supersededIndexes(outputs())).toEqual([1]);
    stop();
    cell.dispose();
  });
});
