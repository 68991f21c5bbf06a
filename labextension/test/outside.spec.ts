/**
 * Outside agents' requests in a notebook view: the long poll asks the
 * server (a stand-in answering through a fake `fetch`) for the notebook's
 * list with the version it last got, the cards follow the list (updated in
 * place, never twice, gone when dropped), the buttons post the decisions,
 * failed polls are retried with a growing wait, and the records go into the
 * notebook's metadata once each, acknowledged.
 */
import { ISessionContext, MainAreaWidget } from '@jupyterlab/apputils';
import { isCodeCellModel } from '@jupyterlab/cells';
import { NotebookModel } from '@jupyterlab/notebook';
import { KernelMessage, ServerConnection } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  OUTSIDE_KEY,
  IOutsideContext,
  OutsideRecords,
  OutsideRequests,
  parsePending,
  retryDelay,
  saveOutsideEntry,
  showOutsideRequests
} from '../src/outside';
import type {
  OutsideApproval,
  OutsideEntry,
  OutsideRecordItem
} from '../src/generated/protocol';
import {
  DecisionBody,
  OUTSIDE_BOARD_CLASS,
  OUTSIDE_CELL_ATTRIBUTE,
  OUTSIDE_CLASS,
  OUTSIDE_ID_ATTRIBUTE,
  OutsideBoard,
  PostOutcome,
  RISK_ATTRIBUTE
} from '../src/outsidecard';
import { CellExecutor, IOutsideCellWidget } from '../src/outsidecells';
import { entryBlock } from '../src/outsideview';
import {
  DIFF_ADD_CLASS,
  DIFF_CLASS,
  DIFF_DEL_CLASS,
  DIFF_SAME_CLASS
} from '../src/proposalbar';
import { MARK_CLASS, charMark } from '../src/visible';

import { shouting } from './translators';

const BASE = 'http://localhost:8888/lab-base/';
const TOKEN = 'secret-token';
const EVIL = '<img src=x onerror="window.hacked = 1">';

/** A request as `ServerConnection` builds it (jsdom's AbortSignal is not Node's). */
class FakeRequest {
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly body: string | null;
  readonly signal: AbortSignal | null;

  constructor(url: string, init: RequestInit = {}) {
    this.url = url;
    this.method = init.method ?? 'GET';
    this.headers = new Headers(init.headers);
    this.body = typeof init.body === 'string' ? init.body : null;
    this.signal = init.signal ?? null;
  }
}

interface IPoll {
  path: string;
  after: number;
  headers: Headers;
  aborted: boolean;
  answered: boolean;
  respond: (status: number, body: unknown) => void;
  fail: () => void;
}

interface IPost {
  route: string;
  body: JSONObject;
}

function reply(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' }
  });
}

/** The Jupyter server's qloop routes: polls wait until the test answers them. */
class FakeServer {
  readonly polls: IPoll[] = [];
  readonly posts: IPost[] = [];
  /** The answer of each POST route (default 200 {"ok": true}). */
  readonly postAnswers = new Map<string, [number, unknown]>();
  /** Called as each POST arrives (to see the notebook at that moment). */
  onPost: (post: IPost) => void = () => undefined;

  readonly fetch = (request: FakeRequest): Promise<Response> => {
    const url = new URL(request.url);
    expect(url.pathname.startsWith('/lab-base/qloop/outside/')).toBe(true);
    const route = url.pathname.slice('/lab-base/'.length);
    if (request.method === 'POST') {
      const body = JSON.parse(request.body ?? 'null') as JSONObject;
      this.posts.push({ route, body });
      this.onPost({ route, body });
      const [status, answer] = this.postAnswers.get(route) ?? [
        200,
        { ok: true }
      ];
      return Promise.resolve(reply(status, answer));
    }
    expect(route).toBe('qloop/outside/pending');
    return new Promise<Response>((resolve, reject) => {
      const poll: IPoll = {
        path: url.searchParams.get('path') ?? '',
        after: Number(url.searchParams.get('after')),
        headers: request.headers,
        aborted: false,
        answered: false,
        respond: (status, body) => {
          poll.answered = true;
          resolve(reply(status, body));
        },
        fail: () => {
          poll.answered = true;
          reject(new TypeError('Failed to fetch'));
        }
      };
      request.signal?.addEventListener('abort', () => {
        poll.aborted = true;
        reject(new DOMException('The operation was aborted.', 'AbortError'));
      });
      this.polls.push(poll);
    });
  };

  /** The poll that waits now (exactly one). */
  get open(): IPoll {
    const open = this.polls.filter(poll => !poll.answered && !poll.aborted);
    expect(open).toHaveLength(1);
    return open[0];
  }

  /** Answer the waiting poll with the notebook's whole list. */
  answer(version: number, items: unknown[]): void {
    this.open.respond(200, { version, items });
  }
}

/** A notebook's context as the requests see it: a path that can change, a model. */
class FakeContext implements IOutsideContext {
  readonly pathChanged = new Signal<this, string>(this);
  readonly ready = Promise.resolve();
  readonly model = new NotebookModel();
  isDisposed = false;

  constructor(public path: string) {}

  rename(path: string): void {
    this.path = path;
    this.pathChanged.emit(path);
  }

  dispose(): void {
    this.isDisposed = true;
    this.model.dispose();
  }
}

/** A notebook's content: a widget per cell of the real model, as a notebook has. */
class FakeNotebook extends Widget {
  constructor(private readonly _model: NotebookModel) {
    super();
  }

  get widgets(): IOutsideCellWidget[] {
    return Array.from(this._model.cells, model => ({ model }));
  }
}

/** A notebook view: a real main-area widget (toolbar, content header, content). */
class FakeView extends MainAreaWidget<FakeNotebook> {
  /** No session: the tests run cells with `FakeKernel`. */
  readonly sessionContext = { session: null } as unknown as ISessionContext;

  constructor(readonly context: FakeContext) {
    super({ content: new FakeNotebook(context.model) });
  }
}

/** What a run does to its cell (adds outputs), and the reply's status. */
type RunScript = (
  cell: IOutsideCellWidget
) => KernelMessage.IExecuteReplyMsg['content']['status'];

/**
 * The kernel as the page's run of a cell sees it: each run is recorded with
 * the cell's source as it ran; it can be held until the test lets it end.
 */
class FakeKernel {
  readonly ran: [string, string][] = [];
  script: RunScript = () => 'ok';
  /** While set, a run waits for it. */
  hold: Promise<void> | null = null;

  readonly execute: CellExecutor = async cell => {
    this.ran.push([cell.model.id, cell.model.sharedModel.getSource()]);
    if (this.hold) {
      await this.hold;
    }
    const status = this.script(cell);
    const content =
      status === 'ok'
        ? { status, execution_count: 1, user_expressions: {} }
        : status === 'error'
          ? {
              status,
              execution_count: 1,
              ename: 'ZeroDivisionError',
              evalue: 'division by zero',
              traceback: []
            }
          : { status };
    return KernelMessage.createMessage({
      msgType: 'execute_reply',
      channel: 'shell',
      session: 'fake',
      content: content as KernelMessage.IExecuteReplyMsg['content']
    });
  };
}

function makeSettings(server: FakeServer): ServerConnection.ISettings {
  return ServerConnection.makeSettings({
    baseUrl: BASE,
    token: TOKEN,
    fetch: server.fetch as unknown as typeof fetch,
    Request: FakeRequest as unknown as typeof Request
  });
}

function approval(fields: Partial<OutsideApproval> = {}): OutsideApproval {
  return {
    id: 'a1',
    kind: 'approval',
    state: 'waiting',
    client: 'claude-code',
    tool: 'run_code',
    title: 'claude-code wants to run code — approve?',
    code: 'df = df.dropna()\nplot(df)',
    risk: 'write',
    reasons: ['line 1: rebinds df'],
    editable: true,
    verified: true,
    grantable: true,
    ...fields
  };
}

/** A saved call as the server signs it. */
function outsideEntry(fields: Partial<OutsideEntry> = {}): OutsideEntry {
  return {
    id: 'e1',
    at: '2026-12-05T12:00:00+00:00',
    client: 'claude-code',
    tool: 'run_code',
    input: { code: 'x = 1' },
    decision: 'approved by the user',
    reason: '',
    ran: 'x = 1',
    risk: 'write',
    result: '',
    result_chars: 0,
    is_error: false,
    signature: 'v1:abc',
    ...fields
  };
}

function record(id: string, entry: OutsideEntry): OutsideRecordItem {
  return { id, kind: 'record', key: OUTSIDE_KEY, entry };
}

/** Let the fake server's answers travel through the page's promises. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await new Promise(resolve => setTimeout(resolve, 0));
  }
}

function cards(panel: Widget): HTMLElement[] {
  return Array.from(
    panel.node.querySelectorAll<HTMLElement>(`.${OUTSIDE_CLASS}`)
  );
}

function card(panel: Widget, id = 'a1'): HTMLElement {
  const found = panel.node.querySelector<HTMLElement>(
    `.${OUTSIDE_CLASS}[${OUTSIDE_ID_ATTRIBUTE}="${id}"]`
  );
  expect(found).not.toBeNull();
  return found!;
}

function click(root: HTMLElement, selector: string): void {
  const node = root.querySelector<HTMLButtonElement>(selector);
  expect(node).not.toBeNull();
  expect(node!.hidden).toBe(false);
  node!.click();
}

function buttons(root: HTMLElement): HTMLButtonElement[] {
  return Array.from(root.querySelectorAll('button'));
}

describe('showOutsideRequests', () => {
  const yjsWarnings = ['Invalid access: Add Yjs type', '[yjs#509]'];
  let server: FakeServer;
  let kernel: FakeKernel;
  let context: FakeContext;
  let panel: FakeView;
  let warn: jest.SpyInstance;
  let debug: jest.SpyInstance;

  beforeEach(async () => {
    const log = console.warn;
    warn = jest
      .spyOn(console, 'warn')
      .mockImplementation((...args: unknown[]) => {
        const message = String(args[0]);
        if (!yjsWarnings.some(prefix => message.startsWith(prefix))) {
          log(...args);
        }
      });
    debug = jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    server = new FakeServer();
    kernel = new FakeKernel();
    context = new FakeContext('work/analysis.ipynb');
    panel = new FakeView(context);
    Widget.attach(panel, document.body);
    const requests = new OutsideRequests(makeSettings(server));
    showOutsideRequests(
      panel,
      requests,
      nullTranslator.load('qloop'),
      kernel.execute
    );
    await settle();
  });

  afterEach(() => {
    warn.mockRestore();
    debug.mockRestore();
    jest.useRealTimers();
    panel.dispose();
    context.dispose();
  });

  it('polls for the notebook with the version it last got, through Jupyter auth', async () => {
    expect(server.polls).toHaveLength(1);
    expect(server.open).toMatchObject({
      path: 'work/analysis.ipynb',
      after: 0
    });
    expect(server.open.headers.get('Authorization')).toBe(`token ${TOKEN}`);
    server.answer(3, []);
    await settle();
    expect(server.open.after).toBe(3);
    server.answer(7, [approval()]);
    await settle();
    expect(server.open.after).toBe(7);
    expect(cards(panel)).toHaveLength(1);
  });

  it('shows a card in the content header: title, class, reasons, code, buttons', async () => {
    server.answer(1, [approval({ risk: 'destructive' })]);
    await settle();
    const board = panel.contentHeader.node.querySelector(
      `.${OUTSIDE_BOARD_CLASS}`
    );
    expect(board).not.toBeNull();
    const node = card(panel);
    expect(board!.contains(node)).toBe(true);
    expect(node.getAttribute('role')).toBe('region');
    expect(node.getAttribute('aria-label')).toContain('claude-code');
    expect(node.getAttribute(RISK_ATTRIBUTE)).toBe('destructive');
    expect(node.classList).toContain('qloop-outside-alarming');
    expect(node.querySelector('.qloop-outside-title')!.textContent).toBe(
      'claude-code wants to run code — approve?'
    );
    expect(node.querySelector('.qloop-outside-risk')!.textContent).toBe(
      'class: destructive'
    );
    expect(
      Array.from(
        node.querySelectorAll('.qloop-outside-reasons li'),
        li => li.textContent
      )
    ).toEqual(['line 1: rebinds df']);
    expect(node.querySelector('pre.qloop-outside-code')!.textContent).toBe(
      'df = df.dropna()\nplot(df)'
    );
    const shown = buttons(node)
      .filter(b => !b.hidden && !b.closest('[hidden]'))
      .map(b => b.textContent);
    expect(shown).toEqual(['Approve', 'Deny', 'Always allow', 'Edit']);
    expect(
      node.querySelector<HTMLButtonElement>('.qloop-outside-always')!.title
    ).toBe(
      "Approve, and run this client's later run_code calls of this class or milder without asking, until the Jupyter server stops"
    );
    expect(
      node.querySelector<HTMLInputElement>('input.qloop-outside-reason')!
        .placeholder
    ).toBe('reason (optional, sent to the agent)');
  });

  it('updates a card in place, keeps what the user typed, and drops what is gone', async () => {
    server.answer(1, [approval(), approval({ id: 'a2', title: 'second' })]);
    await settle();
    const first = card(panel);
    const input = first.querySelector<HTMLInputElement>(
      '.qloop-outside-reason'
    )!;
    input.focus();
    input.value = 'only the head';
    server.answer(2, [
      approval({ title: 'changed', reasons: ['line 2: plots'] }),
      approval({ id: 'a2', title: 'second' })
    ]);
    await settle();
    expect(cards(panel)).toHaveLength(2);
    expect(card(panel)).toBe(first);
    expect(first.querySelector('.qloop-outside-title')!.textContent).toBe(
      'changed'
    );
    expect(first.querySelector('.qloop-outside-reasons')!.textContent).toBe(
      'line 2: plots'
    );
    expect(first.querySelector('.qloop-outside-reason')).toBe(input);
    expect(input.value).toBe('only the head');
    expect(document.activeElement).toBe(input);
    server.answer(3, [approval({ id: 'a2', title: 'second' })]);
    await settle();
    expect(
      cards(panel).map(node => node.getAttribute(OUTSIDE_ID_ATTRIBUTE))
    ).toEqual(['a2']);
    server.answer(4, []);
    await settle();
    expect(cards(panel)).toHaveLength(0);
    const board = panel.node.querySelector<HTMLElement>(
      `.${OUTSIDE_BOARD_CLASS}`
    )!;
    expect(board.classList).toContain('lm-mod-hidden');
  });

  it.each([
    ['.qloop-outside-approve', 'approve'],
    ['.qloop-outside-deny', 'deny'],
    ['.qloop-outside-always', 'always']
  ])(
    '%s posts the decision with the reason, and waits for the next answer',
    async (selector, decision) => {
      server.answer(1, [approval()]);
      await settle();
      const node = card(panel);
      node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
        '  use the copy ';
      click(node, selector);
      await settle();
      expect(server.posts).toEqual([
        {
          route: 'qloop/outside/decide',
          body: { id: 'a1', decision, reason: 'use the copy' }
        }
      ]);
      expect(buttons(node).every(b => b.disabled)).toBe(true);
      server.answer(2, [approval()]);
      await settle();
      expect(buttons(node).every(b => !b.disabled)).toBe(true);
    }
  );

  it('edits the code in a textarea and posts the edit', async () => {
    server.answer(1, [approval()]);
    await settle();
    const node = card(panel);
    click(node, '.qloop-outside-edit');
    const editor = node.querySelector<HTMLTextAreaElement>(
      'textarea.qloop-outside-editor'
    )!;
    expect(editor.hidden).toBe(false);
    expect(editor.value).toBe('df = df.dropna()\nplot(df)');
    expect(
      node.querySelector<HTMLElement>('pre.qloop-outside-code')!.hidden
    ).toBe(true);
    expect(
      node.querySelector<HTMLElement>('.qloop-outside-approve')!.hidden
    ).toBe(true);
    // A poll answer meanwhile keeps the edit.
    editor.value = 'df.head()';
    server.answer(2, [approval({ reasons: ['later'] })]);
    await settle();
    expect(node.querySelector('textarea.qloop-outside-editor')).toBe(editor);
    expect(editor.value).toBe('df.head()');
    click(node, '.qloop-outside-cancel');
    expect(editor.hidden).toBe(true);
    expect(
      node.querySelector<HTMLElement>('pre.qloop-outside-code')!.hidden
    ).toBe(false);
    click(node, '.qloop-outside-edit');
    editor.value = 'df.head()';
    node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
      'smaller';
    click(node, '.qloop-outside-run-edited');
    await settle();
    expect(server.posts).toEqual([
      {
        route: 'qloop/outside/decide',
        body: {
          id: 'a1',
          decision: 'edit',
          reason: 'smaller',
          code: 'df.head()'
        }
      }
    ]);
  });

  it('while editing, shows marked what the editor holds but does not show', async () => {
    server.answer(1, [approval({ code: 'x = 1\u200b' })]);
    await settle();
    const node = card(panel);
    const unseen = node.querySelector<HTMLElement>('.qloop-outside-unseen')!;
    expect(unseen.hidden).toBe(true);
    click(node, '.qloop-outside-edit');
    expect(unseen.hidden).toBe(false);
    expect(unseen.textContent).toContain(
      "The editor's text holds characters it does not show; as it runs:"
    );
    expect(
      unseen.querySelector('.qloop-outside-unseen-code .qloop-mark')!
        .textContent
    ).toContain('200B');
    const editor = node.querySelector<HTMLTextAreaElement>(
      'textarea.qloop-outside-editor'
    )!;
    editor.value = 'x = 1';
    editor.dispatchEvent(new Event('input'));
    expect(unseen.hidden).toBe(true);
    editor.value = 'x = 1' + ' '.repeat(40) + '; y = 2';
    editor.dispatchEvent(new Event('input'));
    expect(unseen.hidden).toBe(false);
    click(node, '.qloop-outside-cancel');
    expect(unseen.hidden).toBe(true);
  });

  it('has no Edit button for a request that is not editable', async () => {
    server.answer(1, [approval({ editable: false })]);
    await settle();
    expect(
      card(panel).querySelector<HTMLElement>('.qloop-outside-edit')!.hidden
    ).toBe(true);
  });

  it('drops the card when the request was decided elsewhere (409)', async () => {
    server.postAnswers.set('qloop/outside/decide', [
      409,
      { ok: false, message: 'already decided' }
    ]);
    server.answer(1, [approval()]);
    await settle();
    click(card(panel), '.qloop-outside-deny');
    await settle();
    expect(cards(panel)).toHaveLength(0);
    // The next answer says what became of it.
    server.answer(2, [approval({ state: 'running' })]);
    await settle();
    expect(cards(panel)).toHaveLength(1);
  });

  it('says when a decision did not reach the server, and takes clicks again', async () => {
    server.postAnswers.set('qloop/outside/decide', [500, { message: EVIL }]);
    server.answer(1, [approval()]);
    await settle();
    const node = card(panel);
    click(node, '.qloop-outside-approve');
    await settle();
    const error = node.querySelector<HTMLElement>('.qloop-outside-error')!;
    expect(error.hidden).toBe(false);
    expect(error.textContent).toBe(`Not sent: ${EVIL}`);
    expect(error.querySelector('img')).toBeNull();
    expect(buttons(node).every(b => !b.disabled)).toBe(true);
  });

  it('folds a running request to one line with a Stop button', async () => {
    server.answer(1, [approval({ state: 'running' })]);
    await settle();
    const node = card(panel);
    expect(
      node.querySelector<HTMLElement>('.qloop-outside-waiting')!.hidden
    ).toBe(true);
    expect(node.querySelector('.qloop-outside-running-line')!.textContent).toBe(
      'claude-code · run_code · running…'
    );
    click(node, '.qloop-outside-stop');
    await settle();
    expect(server.posts).toEqual([
      { route: 'qloop/outside/stop', body: { id: 'a1' } }
    ]);
    expect(
      node.querySelector<HTMLButtonElement>('.qloop-outside-stop')!.disabled
    ).toBe(true);
    server.answer(2, []);
    await settle();
    expect(cards(panel)).toHaveLength(0);
  });

  it('retries a failed poll after 2, 4, 8, 16, 30 s, and from 2 s again after an answer', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
    const waitFor = async (ms: number) => {
      const before = server.polls.length;
      await jest.advanceTimersByTimeAsync(ms - 1);
      expect(server.polls).toHaveLength(before);
      await jest.advanceTimersByTimeAsync(1);
      expect(server.polls).toHaveLength(before + 1);
    };
    server.answer(5, []);
    await jest.advanceTimersByTimeAsync(0);
    for (const ms of [2000, 4000, 8000, 16000, 30000, 30000]) {
      server.open.respond(500, { message: 'server error' });
      await jest.advanceTimersByTimeAsync(0);
      await waitFor(ms);
    }
    server.open.fail(); // a network error is retried too
    await jest.advanceTimersByTimeAsync(0);
    await waitFor(30000);
    expect(server.open.after).toBe(5);
    server.answer(6, []);
    await jest.advanceTimersByTimeAsync(0);
    server.open.respond(502, 'bad gateway');
    await jest.advanceTimersByTimeAsync(0);
    await waitFor(2000);
  });

  it('stops quietly when the server has no qloop routes (404)', async () => {
    server.open.respond(404, { message: 'Not Found' });
    await settle();
    expect(debug).toHaveBeenCalled();
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(server.polls).toHaveLength(1);
  });

  it('ends the poll when the view is disposed', async () => {
    const poll = server.open;
    panel.dispose();
    await settle();
    expect(poll.aborted).toBe(true);
    expect(server.polls).toHaveLength(1);
  });

  it('ends a retry wait when the view is disposed', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
    server.open.respond(500, {});
    await jest.advanceTimersByTimeAsync(0);
    panel.dispose();
    await jest.advanceTimersByTimeAsync(60000);
    expect(server.polls).toHaveLength(1);
  });

  it('polls the new path from version 0 when the notebook is renamed', async () => {
    server.answer(4, [approval()]);
    await settle();
    const old = server.open;
    context.rename('work/renamed.ipynb');
    await settle();
    expect(old.aborted).toBe(true);
    expect(server.open).toMatchObject({ path: 'work/renamed.ipynb', after: 0 });
    server.answer(1, []);
    await settle();
    expect(cards(panel)).toHaveLength(0);
    expect(server.open).toMatchObject({ path: 'work/renamed.ipynb', after: 1 });
  });

  it('saves a record into the notebook metadata once, and acknowledges it', async () => {
    const model = context.model;
    model.setMetadata(OUTSIDE_KEY, {
      entries: [{ id: 'e0', note: 'kept' }],
      other: 1
    });
    const entry = outsideEntry();
    server.answer(1, [record('r1', entry), approval()]);
    await settle();
    expect(model.getMetadata(OUTSIDE_KEY)).toEqual({
      entries: [{ id: 'e0', note: 'kept' }, entry],
      other: 1
    });
    expect(server.posts).toEqual([
      { route: 'qloop/outside/saved', body: { id: 'r1' } }
    ]);
    expect(cards(panel)).toHaveLength(1);
    // The same record again (the acknowledgement not yet through): no second copy.
    server.answer(2, [record('r1', entry)]);
    await settle();
    expect(
      (model.getMetadata(OUTSIDE_KEY) as JSONObject)['entries']
    ).toHaveLength(2);
    expect(server.posts).toHaveLength(1);
  });

  it('leaves a metadata value of another shape untouched, and does not acknowledge', async () => {
    const model = context.model;
    model.setMetadata(OUTSIDE_KEY, ['not', 'an', 'object']);
    warn.mockReset().mockImplementation(() => undefined);
    server.answer(1, [record('r1', outsideEntry())]);
    await settle();
    expect(model.getMetadata(OUTSIDE_KEY)).toEqual(['not', 'an', 'object']);
    expect(server.posts).toEqual([]);
    expect(warn).toHaveBeenCalledTimes(1);
  });

  describe('cell changes', () => {
    const first = 'cell-first';
    const second = 'cell-second';

    beforeEach(() => {
      const notebook = context.model.sharedModel;
      notebook.insertCell(0, {
        id: first,
        cell_type: 'code',
        source: 'import pandas as pd',
        metadata: {}
      });
      notebook.insertCell(1, {
        id: second,
        cell_type: 'code',
        source: 'df = load()\nplot(df)',
        metadata: {}
      });
    });

    function cellChange(
      cell: OutsideApproval['cell'],
      fields: Partial<OutsideApproval> = {}
    ): OutsideApproval {
      const add = cell?.op === 'add';
      return approval({
        id: 'c1',
        client: 'cursor',
        tool: add ? 'add_cell' : 'edit_cell',
        title: add
          ? 'cursor proposes a new code cell — accept?'
          : 'cursor proposes an edit of a cell — accept?',
        code: 'df = load()\nplot(df, kind="bar")',
        reasons: ['line 1: changes a cell'],
        cell,
        ...fields
      });
    }

    /** The notebook's cells: id, source and the qloop_outside mark. */
    function cells(): [string, string, unknown][] {
      return context.model.sharedModel.cells.map(cell => [
        cell.id,
        cell.getSource(),
        cell.getMetadata(OUTSIDE_KEY)
      ]);
    }

    function notebookJSON(): string {
      return JSON.stringify(context.model.toJSON());
    }

    function shownButtons(node: HTMLElement): (string | null)[] {
      return buttons(node)
        .filter(b => !b.hidden && !b.closest('[hidden]'))
        .map(b => b.textContent);
    }

    it('shows an edit as the line diff from the cell, invisible characters marked', async () => {
      const code = 'df = load()\nplot(df\u200B)';
      server.answer(1, [cellChange({ op: 'edit', cell_id: second }, { code })]);
      await settle();
      const node = card(panel, 'c1');
      expect(node.getAttribute(OUTSIDE_CELL_ATTRIBUTE)).toBe('edit');
      expect(node.querySelector('.qloop-outside-where')!.textContent).toBe(
        'Edit of cell 2'
      );
      expect(
        node.querySelector<HTMLElement>('pre.qloop-outside-code')!.hidden
      ).toBe(true);
      const diff = node.querySelector<HTMLElement>(`pre.${DIFF_CLASS}`)!;
      expect(diff.hidden).toBe(false);
      expect(
        Array.from(diff.children, line => [line.className, line.textContent])
      ).toEqual([
        [DIFF_SAME_CLASS, ' df = load()'],
        [DIFF_DEL_CLASS, '-plot(df)'],
        [DIFF_ADD_CLASS, `+plot(df${charMark('\u200B')})`]
      ]);
      expect(diff.querySelector(`.${MARK_CLASS}`)!.textContent).toBe(
        charMark('\u200B')
      );
      expect(shownButtons(node)).toEqual([
        'Accept',
        'Reject',
        'Always allow',
        'Edit'
      ]);
      // The cell edited meanwhile: the diff follows it.
      context.model.sharedModel.cells[1].setSource('df = load()\nplot(df)\n');
      context.model.sharedModel.cells[1].setSource('df = load()');
      expect(
        Array.from(
          node.querySelector(`pre.${DIFF_CLASS}`)!.children,
          line => line.className
        )
      ).toEqual([DIFF_SAME_CLASS, DIFF_ADD_CLASS]);
    });

    it('shows a new cell whole, and where it goes', async () => {
      server.answer(1, [
        cellChange({ op: 'add', cell_type: 'code', after_cell_id: first }),
        cellChange(
          { op: 'add', cell_type: 'markdown', after_cell_id: null },
          { id: 'c2', code: '# Notes' }
        ),
        cellChange(
          { op: 'add', cell_type: 'code', after_cell_id: 'gone' },
          { id: 'c3' }
        ),
        cellChange({ op: 'edit', cell_id: 'gone' }, { id: 'c4' })
      ]);
      await settle();
      const where = (id: string) =>
        card(panel, id).querySelector('.qloop-outside-where')!.textContent;
      expect(where('c1')).toBe('New code cell, after cell 1');
      expect(where('c2')).toBe('New markdown cell, at the end');
      expect(where('c3')).toBe(
        'New code cell, after a cell that is not in the notebook (id gone): accepting adds nothing'
      );
      expect(where('c4')).toBe(
        'Edit of a cell that is not in the notebook (id gone): accepting changes nothing'
      );
      const node = card(panel, 'c1');
      expect(node.getAttribute(OUTSIDE_CELL_ATTRIBUTE)).toBe('add');
      const code = node.querySelector<HTMLElement>('pre.qloop-outside-code')!;
      expect(code.hidden).toBe(false);
      expect(code.textContent).toBe('df = load()\nplot(df, kind="bar")');
      expect(node.querySelector<HTMLElement>(`pre.${DIFF_CLASS}`)!.hidden).toBe(
        true
      );
      // An edit of a missing cell shows the proposed source whole.
      expect(
        card(panel, 'c4').querySelector<HTMLElement>('pre.qloop-outside-code')!
          .hidden
      ).toBe(false);
    });

    it.each([
      ['.qloop-outside-approve', 'approve'],
      ['.qloop-outside-always', 'always']
    ])(
      '%s claims, then adds the cell, then decides with its id',
      async (selector, decision) => {
        const seen: [string, number][] = [];
        server.onPost = post =>
          seen.push([post.route, context.model.sharedModel.cells.length]);
        server.answer(1, [
          cellChange({ op: 'add', cell_type: 'code', after_cell_id: first })
        ]);
        await settle();
        const node = card(panel, 'c1');
        node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
          'fine';
        click(node, selector);
        await settle();
        expect(seen).toEqual([
          ['qloop/outside/claim', 2],
          ['qloop/outside/decide', 3]
        ]);
        const added = cells()[1];
        expect(added).toEqual([
          expect.any(String),
          'df = load()\nplot(df, kind="bar")',
          { client: 'cursor', tool: 'add_cell' }
        ]);
        expect(cells().map(cell => cell[0])).toEqual([first, added[0], second]);
        expect(context.model.sharedModel.cells[1].cell_type).toBe('code');
        expect(server.posts).toEqual([
          { route: 'qloop/outside/claim', body: { id: 'c1' } },
          {
            route: 'qloop/outside/decide',
            body: {
              id: 'c1',
              decision,
              reason: 'fine',
              applied: { cell_id: added[0] }
            }
          }
        ]);
      }
    );

    it('Accept edited applies the edited text to the cell', async () => {
      server.answer(1, [cellChange({ op: 'edit', cell_id: second })]);
      await settle();
      const node = card(panel, 'c1');
      click(node, '.qloop-outside-edit');
      const editor = node.querySelector<HTMLTextAreaElement>(
        'textarea.qloop-outside-editor'
      )!;
      expect(editor.value).toBe('df = load()\nplot(df, kind="bar")');
      expect(node.querySelector<HTMLElement>(`pre.${DIFF_CLASS}`)!.hidden).toBe(
        true
      );
      expect(shownButtons(node)).toEqual(['Reject', 'Accept edited', 'Cancel']);
      editor.value = 'df = load()\nplot(df, kind="line")';
      click(node, '.qloop-outside-run-edited');
      await settle();
      expect(cells()).toEqual([
        [first, 'import pandas as pd', undefined],
        [
          second,
          'df = load()\nplot(df, kind="line")',
          { client: 'cursor', tool: 'edit_cell' }
        ]
      ]);
      expect(server.posts).toEqual([
        { route: 'qloop/outside/claim', body: { id: 'c1' } },
        {
          route: 'qloop/outside/decide',
          body: {
            id: 'c1',
            decision: 'edit',
            reason: '',
            code: 'df = load()\nplot(df, kind="line")',
            applied: { cell_id: second }
          }
        }
      ]);
    });

    it('applies nothing when another page claimed the change (409)', async () => {
      server.postAnswers.set('qloop/outside/claim', [
        409,
        {
          ok: false,
          message: 'another page applies this change, or it is gone'
        }
      ]);
      const before = notebookJSON();
      server.answer(1, [
        cellChange({ op: 'add', cell_type: 'code', after_cell_id: null })
      ]);
      await settle();
      click(card(panel, 'c1'), '.qloop-outside-approve');
      await settle();
      expect(notebookJSON()).toBe(before);
      expect(server.posts).toEqual([
        { route: 'qloop/outside/claim', body: { id: 'c1' } }
      ]);
      expect(cards(panel)).toHaveLength(0);
    });

    it('applies a change the policy allows at once, without a card, once', async () => {
      const item = cellChange(
        { op: 'add', cell_type: 'markdown', after_cell_id: null },
        { state: 'apply', code: '## Result' }
      );
      server.answer(1, [item]);
      await settle();
      expect(cards(panel)).toHaveLength(0);
      expect(cells()).toHaveLength(3);
      const added = cells()[2];
      expect(added.slice(1)).toEqual([
        '## Result',
        { client: 'cursor', tool: 'add_cell' }
      ]);
      expect(context.model.sharedModel.cells[2].cell_type).toBe('markdown');
      expect(server.posts).toEqual([
        { route: 'qloop/outside/claim', body: { id: 'c1' } },
        {
          route: 'qloop/outside/decide',
          body: {
            id: 'c1',
            decision: 'approve',
            reason: '',
            applied: { cell_id: added[0] }
          }
        }
      ]);
      // The same item again (the server not yet past it): nothing more.
      server.answer(2, [item]);
      await settle();
      server.answer(3, [item]);
      await settle();
      expect(cells()).toHaveLength(3);
      expect(server.posts).toHaveLength(2);
      expect(cards(panel)).toHaveLength(0);
    });

    it('sends a decision again after it failed, without applying twice', async () => {
      server.postAnswers.set('qloop/outside/decide', [
        500,
        { message: 'down' }
      ]);
      const item = cellChange(
        { op: 'edit', cell_id: first },
        { state: 'apply', code: 'import polars as pl' }
      );
      server.answer(1, [item]);
      await settle();
      server.postAnswers.delete('qloop/outside/decide');
      server.answer(2, [item]);
      await settle();
      expect(server.posts.map(post => post.route)).toEqual([
        'qloop/outside/claim',
        'qloop/outside/decide',
        'qloop/outside/decide'
      ]);
      expect(server.posts[2].body).toEqual(server.posts[1].body);
      expect(cells()[0]).toEqual([
        first,
        'import polars as pl',
        { client: 'cursor', tool: 'edit_cell' }
      ]);
    });

    it('posts applied.error and changes nothing when the target is gone', async () => {
      server.answer(1, [cellChange({ op: 'edit', cell_id: 'gone' })]);
      await settle();
      const before = notebookJSON();
      click(card(panel, 'c1'), '.qloop-outside-approve');
      await settle();
      expect(notebookJSON()).toBe(before);
      expect(server.posts).toEqual([
        { route: 'qloop/outside/claim', body: { id: 'c1' } },
        {
          route: 'qloop/outside/decide',
          body: {
            id: 'c1',
            decision: 'approve',
            reason: '',
            applied: { error: 'no cell with id gone in the notebook' }
          }
        }
      ]);
    });

    it('Reject posts deny with the reason, claims nothing and changes nothing', async () => {
      server.answer(1, [cellChange({ op: 'edit', cell_id: second })]);
      await settle();
      const before = notebookJSON();
      const node = card(panel, 'c1');
      node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
        'keep the plot';
      click(node, '.qloop-outside-deny');
      await settle();
      expect(notebookJSON()).toBe(before);
      expect(server.posts).toEqual([
        {
          route: 'qloop/outside/decide',
          body: { id: 'c1', decision: 'deny', reason: 'keep the plot' }
        }
      ]);
    });

    describe('run_cell', () => {
      function runItem(
        cellId: string,
        fields: Partial<OutsideApproval> = {}
      ): OutsideApproval {
        return approval({
          id: 'r1',
          client: 'cursor',
          tool: 'run_cell',
          title: 'cursor wants to run a cell of this notebook — approve?',
          code: '',
          risk: 'unknown',
          reasons: [`line 1: runs cell ${cellId} as it is when approved`],
          editable: false,
          cell: { op: 'run', cell_id: cellId },
          ...fields
        });
      }

      /** The outputs of the cell at `index`, as the notebook saves them. */
      function outputsOf(index: number): unknown {
        return context.model.toJSON().cells[index]['outputs'];
      }

      beforeEach(() => {
        kernel.script = cell => {
          if (isCodeCellModel(cell.model)) {
            cell.model.outputs.add({
              output_type: 'stream',
              name: 'stdout',
              text: 'plotted\n'
            });
            cell.model.outputs.add({
              output_type: 'execute_result',
              execution_count: 1,
              data: { 'text/plain': '<Axes>', 'image/png': 'iVBOR' },
              metadata: {}
            });
          }
          return 'ok';
        };
      });

      it("shows the cell's current source with marks, following edits", async () => {
        server.answer(1, [runItem(second)]);
        await settle();
        const node = card(panel, 'r1');
        expect(node.getAttribute(OUTSIDE_CELL_ATTRIBUTE)).toBe('run');
        const where = () =>
          node.querySelector('.qloop-outside-where')!.textContent;
        const code = node.querySelector<HTMLElement>('pre.qloop-outside-code')!;
        expect(where()).toBe('Run of cell 2');
        expect(code.hidden).toBe(false);
        expect(code.textContent).toBe('df = load()\nplot(df)');
        expect(shownButtons(node)).toEqual(['Approve', 'Deny', 'Always allow']);
        expect(
          node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.hidden
        ).toBe(false);
        // The user edits the cell, then moves it first: the card follows.
        context.model.sharedModel.cells[1].setSource('plot(df\u200B)');
        expect(code.textContent).toBe(`plot(df${charMark('\u200B')})`);
        expect(code.querySelector(`.${MARK_CLASS}`)).not.toBeNull();
        context.model.sharedModel.moveCell(1, 0);
        expect(where()).toBe('Run of cell 1');
        expect(kernel.ran).toEqual([]);
        expect(server.posts).toEqual([]);
      });

      it('says when the cell is not in the notebook, and shows no source', async () => {
        server.answer(1, [runItem('gone')]);
        await settle();
        const node = card(panel, 'r1');
        expect(node.querySelector('.qloop-outside-where')!.textContent).toBe(
          'Run of a cell that is not in the notebook (id gone): approving runs nothing'
        );
        expect(
          node.querySelector<HTMLElement>('pre.qloop-outside-code')!.hidden
        ).toBe(true);
      });

      it.each([
        ['.qloop-outside-approve', 'approve'],
        ['.qloop-outside-always', 'always']
      ])(
        '%s claims, runs the cell as it is then, then decides with what ran',
        async (selector, decision) => {
          const seen: [string, number][] = [];
          server.onPost = post => seen.push([post.route, kernel.ran.length]);
          server.answer(1, [runItem(second)]);
          await settle();
          context.model.sharedModel.cells[1].setSource('plot(df, kind="bar")');
          const node = card(panel, 'r1');
          node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
            'go';
          click(node, selector);
          await settle();
          expect(seen).toEqual([
            ['qloop/outside/claim', 0],
            ['qloop/outside/decide', 1]
          ]);
          expect(kernel.ran).toEqual([[second, 'plot(df, kind="bar")']]);
          expect(server.posts[1]).toEqual({
            route: 'qloop/outside/decide',
            body: {
              id: 'r1',
              decision,
              reason: 'go',
              applied: {
                cell_id: second,
                source: 'plot(df, kind="bar")',
                outputs: 'plotted\n<Axes>',
                status: 'ok'
              }
            }
          });
          // The outputs landed in the cell itself.
          expect(outputsOf(1)).toEqual([
            expect.objectContaining({ output_type: 'stream' }),
            expect.objectContaining({ output_type: 'execute_result' })
          ]);
        }
      );

      it('reports an error run with its status and its traceback, escapes removed', async () => {
        kernel.script = cell => {
          if (isCodeCellModel(cell.model)) {
            cell.model.outputs.add({
              output_type: 'error',
              ename: 'ZeroDivisionError',
              evalue: 'division by zero',
              traceback: [
                '\u001b[0;31mZeroDivisionError\u001b[0m Traceback',
                '\u001b[0;32m----> 1\u001b[0m 1/0'
              ]
            });
          }
          return 'error';
        };
        server.answer(1, [runItem(first, { state: 'apply' })]);
        await settle();
        expect(server.posts[1].body['applied']).toEqual({
          cell_id: first,
          source: 'import pandas as pd',
          outputs:
            'ZeroDivisionError: division by zero\nZeroDivisionError Traceback\n----> 1 1/0',
          status: 'error'
        });
      });

      it('runs nothing when another page claimed it (409)', async () => {
        server.postAnswers.set('qloop/outside/claim', [
          409,
          {
            ok: false,
            message: 'another page applies this change, or it is gone'
          }
        ]);
        server.answer(1, [runItem(second)]);
        await settle();
        click(card(panel, 'r1'), '.qloop-outside-approve');
        await settle();
        expect(kernel.ran).toEqual([]);
        expect(server.posts).toEqual([
          { route: 'qloop/outside/claim', body: { id: 'r1' } }
        ]);
        expect(cards(panel)).toHaveLength(0);
      });

      it('runs an allowed cell at once, once; shows it running with Stop meanwhile', async () => {
        let release = () => undefined as void;
        kernel.hold = new Promise<void>(resolve => (release = resolve));
        const item = runItem(second, { state: 'apply' });
        server.answer(1, [item]);
        await settle();
        expect(cards(panel)).toHaveLength(0);
        expect(kernel.ran).toEqual([[second, 'df = load()\nplot(df)']]);
        // The answers that follow: the same item, then the server's "running".
        server.answer(2, [item]);
        await settle();
        server.answer(3, [{ ...item, state: 'running' }]);
        await settle();
        const node = card(panel, 'r1');
        expect(
          node.querySelector<HTMLElement>('.qloop-outside-waiting')!.hidden
        ).toBe(true);
        expect(
          node.querySelector('.qloop-outside-running-line')!.textContent
        ).toBe('cursor · run_cell · running…');
        click(node, '.qloop-outside-stop');
        await settle();
        expect(server.posts).toEqual([
          { route: 'qloop/outside/claim', body: { id: 'r1' } },
          { route: 'qloop/outside/stop', body: { id: 'r1' } }
        ]);
        kernel.script = () => 'abort';
        release();
        await settle();
        server.answer(4, [{ ...item, state: 'running' }]);
        await settle();
        expect(kernel.ran).toHaveLength(1);
        expect(server.posts.map(post => post.route)).toEqual([
          'qloop/outside/claim',
          'qloop/outside/stop',
          'qloop/outside/decide'
        ]);
        expect(server.posts[2].body['applied']).toEqual({
          cell_id: second,
          source: 'df = load()\nplot(df)',
          outputs: '',
          status: 'aborted'
        });
        server.answer(5, []);
        await settle();
        expect(cards(panel)).toHaveLength(0);
      });

      it('sends the decision again after it failed, without running again', async () => {
        server.postAnswers.set('qloop/outside/decide', [
          500,
          { message: 'down' }
        ]);
        const item = runItem(first);
        server.answer(1, [item]);
        await settle();
        click(card(panel, 'r1'), '.qloop-outside-approve');
        await settle();
        expect(
          card(panel, 'r1').querySelector('.qloop-outside-error')!.textContent
        ).toBe('Not sent: down');
        server.postAnswers.delete('qloop/outside/decide');
        server.answer(2, [{ ...item, state: 'running' }]);
        await settle();
        expect(kernel.ran).toHaveLength(1);
        expect(server.posts.map(post => post.route)).toEqual([
          'qloop/outside/claim',
          'qloop/outside/decide',
          'qloop/outside/decide'
        ]);
        expect(server.posts[2].body).toEqual(server.posts[1].body);
        server.answer(3, [{ ...item, state: 'running' }]);
        await settle();
        expect(server.posts).toHaveLength(3);
      });

      it.each([
        [
          'a markdown cell',
          'notes',
          'cell notes is a markdown cell: nothing to run'
        ],
        ['a missing cell', 'gone', 'no cell with id gone in the notebook']
      ])(
        'posts applied.error for %s and runs nothing',
        async (_, id, error) => {
          context.model.sharedModel.insertCell(2, {
            id: 'notes',
            cell_type: 'markdown',
            source: '# Notes',
            metadata: {}
          });
          const before = notebookJSON();
          server.answer(1, [runItem(id)]);
          await settle();
          click(card(panel, 'r1'), '.qloop-outside-approve');
          await settle();
          expect(kernel.ran).toEqual([]);
          expect(notebookJSON()).toBe(before);
          expect(server.posts).toEqual([
            { route: 'qloop/outside/claim', body: { id: 'r1' } },
            {
              route: 'qloop/outside/decide',
              body: {
                id: 'r1',
                decision: 'approve',
                reason: '',
                applied: { error }
              }
            }
          ]);
        }
      );

      it("runs with JupyterLab's own execution by default: no kernel, an error", async () => {
        panel.dispose(); // its poll ends: a view with the default executor
        panel = new FakeView(context);
        Widget.attach(panel, document.body);
        const requests = new OutsideRequests(makeSettings(server));
        showOutsideRequests(panel, requests, nullTranslator.load('qloop'));
        await settle();
        server.answer(1, [runItem(second, { state: 'apply' })]);
        await settle();
        expect(server.posts[1].body['applied']).toEqual({
          error: 'the notebook has no kernel'
        });
      });

      it('Deny posts deny with the reason, claims nothing and runs nothing', async () => {
        server.answer(1, [runItem(second)]);
        await settle();
        const node = card(panel, 'r1');
        node.querySelector<HTMLInputElement>('.qloop-outside-reason')!.value =
          'not now';
        click(node, '.qloop-outside-deny');
        await settle();
        expect(kernel.ran).toEqual([]);
        expect(server.posts).toEqual([
          {
            route: 'qloop/outside/decide',
            body: { id: 'r1', decision: 'deny', reason: 'not now' }
          }
        ]);
      });
    });
  });
});

describe('saveOutsideEntry', () => {
  let model: NotebookModel;

  beforeEach(() => {
    model = new NotebookModel();
  });

  afterEach(() => model.dispose());

  it('starts the entries, and finds an entry already saved by its id', () => {
    const first = outsideEntry({ result: 'one' });
    const second = outsideEntry({ id: 'e2' });
    expect(saveOutsideEntry(model, first)).toBe('saved');
    expect(saveOutsideEntry(model, outsideEntry({ result: 'two' }))).toBe(
      'present'
    );
    expect(saveOutsideEntry(model, second)).toBe('saved');
    expect(model.getMetadata(OUTSIDE_KEY)).toEqual({
      entries: [first, second]
    });
  });

  it.each([
    [['not', 'an', 'object']],
    ['text'],
    [{ entries: 'nope' }],
    [{ other: 1 }]
  ])('refuses to change %j', saved => {
    model.setMetadata(OUTSIDE_KEY, saved);
    expect(saveOutsideEntry(model, outsideEntry())).toBe('refused');
    expect(model.getMetadata(OUTSIDE_KEY)).toEqual(saved);
  });
});

describe('OutsideRecords', () => {
  it('acknowledges again when the acknowledgement failed', async () => {
    const server = new FakeServer();
    server.postAnswers.set('qloop/outside/saved', [500, {}]);
    const records = new OutsideRecords(
      new OutsideRequests(makeSettings(server))
    );
    const model = new NotebookModel();
    const items = parsePending({
      version: 1,
      items: [record('r1', outsideEntry())]
    })!.items;
    records.save(model, items);
    await settle();
    records.save(model, items);
    await settle();
    expect(server.posts.map(post => post.body)).toEqual([
      { id: 'r1' },
      { id: 'r1' }
    ]);
    expect((model.getMetadata(OUTSIDE_KEY) as JSONObject)['entries']).toEqual([
      outsideEntry()
    ]);
    model.dispose();
  });

  it('saves only into its own key: an item for another is not read', () => {
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    const other = { ...record('r1', outsideEntry()), key: 'qloop_grants' };
    expect(parsePending({ version: 1, items: [other] })).toEqual({
      version: 1,
      items: []
    });
    expect(warn).toHaveBeenCalledTimes(1);
    warn.mockRestore();
  });
});

describe('parsePending', () => {
  it('keeps the items it can read and leaves out the others', () => {
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    const pending = parsePending({
      version: 2,
      items: [
        approval(),
        { ...approval({ id: 'no-code' }), code: 3 },
        { ...approval({ id: 'bad-state' }), state: 'done' },
        { kind: 'record', id: 'r', key: OUTSIDE_KEY, entry: [] },
        'junk'
      ]
    });
    expect(pending).toEqual({ version: 2, items: [approval()] });
    expect(warn).toHaveBeenCalledTimes(4);
    expect(parsePending({ items: [] })).toBeNull();
    expect(parsePending([])).toBeNull();
    warn.mockRestore();
  });

  it('reads whether the client is verified and can hold a grant', () => {
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    const pending = parsePending({
      version: 1,
      items: [
        approval({ id: 'a', verified: false, grantable: true }),
        approval({ id: 'b' }),
        { ...approval({ id: 'c' }), verified: 'yes' },
        { ...approval({ id: 'd' }), grantable: 0 }
      ]
    });
    expect(pending).toEqual({
      version: 1,
      items: [
        approval({ id: 'a', verified: false, grantable: true }),
        approval({ id: 'b' })
      ]
    });
    expect(warn).toHaveBeenCalledTimes(2);
    warn.mockRestore();
  });

  it('reads the cell change of an approval, and "apply" only with one', () => {
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    const add = { op: 'add', cell_type: 'code', after_cell_id: 'x' };
    const pending = parsePending({
      version: 1,
      items: [
        { ...approval({ id: 'c1' }), cell: add },
        {
          ...approval({ id: 'c2', state: 'apply' }),
          cell: { op: 'edit', cell_id: 'x' }
        },
        {
          ...approval({ id: 'c3' }),
          cell: { op: 'add', cell_type: 'markdown' }
        },
        {
          ...approval({ id: 'c4', state: 'apply' }),
          cell: { op: 'run', cell_id: 'x' }
        },
        { ...approval({ id: 'no-cell', state: 'apply' }) },
        { ...approval({ id: 'run-no-id' }), cell: { op: 'run' } },
        { ...approval({ id: 'move' }), cell: { op: 'move', cell_id: 'x' } },
        { ...approval({ id: 'raw' }), cell: { ...add, cell_type: 'raw' } },
        { ...approval({ id: 'no-id' }), cell: { op: 'edit' } },
        { ...approval({ id: 'not-object' }), cell: 'add' }
      ]
    });
    expect(pending!.items).toEqual([
      approval({
        id: 'c1',
        cell: { op: 'add', cell_type: 'code', after_cell_id: 'x' }
      }),
      approval({
        id: 'c2',
        state: 'apply',
        cell: { op: 'edit', cell_id: 'x' }
      }),
      approval({
        id: 'c3',
        cell: { op: 'add', cell_type: 'markdown', after_cell_id: null }
      }),
      approval({
        id: 'c4',
        state: 'apply',
        cell: { op: 'run', cell_id: 'x' }
      })
    ]);
    expect(warn).toHaveBeenCalledTimes(6);
    warn.mockRestore();
  });

  it('waits 2 s, then twice as long, up to 30 s', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map(retryDelay)).toEqual([
      2000, 4000, 8000, 16000, 30000, 30000, 30000
    ]);
  });
});

describe('OutsideBoard', () => {
  function board(trans = nullTranslator.load('qloop')) {
    const sent: [string, string][] = [];
    const done = (): Promise<PostOutcome> => Promise.resolve({ outcome: 'ok' });
    const widget = new OutsideBoard({
      trans,
      actions: {
        decide: (item, decision) => {
          sent.push([item.id, decision.decision]);
          return done();
        },
        stop: id => {
          sent.push([id, 'stop']);
          return done();
        }
      }
    });
    Widget.attach(widget, document.body);
    return { widget, sent };
  }

  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('marks invisible and confusable characters in the code', () => {
    const { widget } = board();
    const code = 'x = "abc\u202Edef"\ny\u200B = 1';
    widget.setRequests([approval({ code })]);
    const pre = widget.node.querySelector('pre.qloop-outside-code')!;
    const marks = Array.from(
      pre.querySelectorAll(`.${MARK_CLASS}`),
      m => m.textContent
    );
    expect(marks).toEqual([charMark('\u202E'), charMark('\u200B')]);
    expect(pre.textContent).not.toContain('\u202E');
    widget.dispose();
  });

  it('never reads server text as HTML', () => {
    const { widget } = board();
    widget.setRequests([
      approval({
        title: EVIL,
        client: EVIL,
        tool: EVIL,
        code: EVIL,
        risk: EVIL,
        reasons: [EVIL]
      })
    ]);
    expect(widget.node.querySelector('img')).toBeNull();
    const node = widget.node.querySelector<HTMLElement>(`.${OUTSIDE_CLASS}`)!;
    expect(node.querySelector('.qloop-outside-title')!.textContent).toBe(EVIL);
    expect(node.querySelector('.qloop-outside-reasons li')!.textContent).toBe(
      EVIL
    );
    expect(node.querySelector('pre')!.textContent).toBe(EVIL);
    expect(node.getAttribute(RISK_ATTRIBUTE)).toBe(EVIL);
    widget.setRequests([
      approval({ state: 'running', client: EVIL, tool: EVIL })
    ]);
    expect(widget.node.querySelector('img')).toBeNull();
    expect(node.querySelector('.qloop-outside-running-line')!.textContent).toBe(
      `${EVIL} · ${EVIL} · running…`
    );
    expect((window as unknown as { hacked?: number }).hacked).toBeUndefined();
    widget.dispose();
  });

  it('translates its own words', () => {
    const { widget } = board(shouting.load('qloop'));
    widget.setRequests([approval()]);
    const node = widget.node.querySelector<HTMLElement>(`.${OUTSIDE_CLASS}`)!;
    expect(buttons(node).map(b => b.textContent)).toEqual([
      'APPROVE',
      'DENY',
      'ALWAYS ALLOW',
      'EDIT',
      'RUN EDITED',
      'CANCEL',
      'STOP'
    ]);
    expect(node.querySelector('.qloop-outside-risk')!.textContent).toBe(
      'CLASS: write'
    );
    expect(node.querySelector<HTMLInputElement>('input')!.placeholder).toBe(
      'REASON (OPTIONAL, SENT TO THE AGENT)'
    );
    widget.dispose();
  });

  it('marks a client not yet verified, and sends the name the user gives it', () => {
    const decisions: DecisionBody[] = [];
    const widget = new OutsideBoard({
      trans: nullTranslator.load('qloop'),
      actions: {
        decide: (item, decision) => {
          decisions.push(decision);
          return Promise.resolve({ outcome: 'ok' });
        },
        stop: () => Promise.resolve({ outcome: 'ok' })
      }
    });
    Widget.attach(widget, document.body);
    widget.setRequests([
      approval({ id: 'new', verified: false }),
      approval({ id: 'known', verified: true }),
      approval({ id: 'old' })
    ]);
    const at = (id: string) =>
      widget.node.querySelector<HTMLElement>(
        `[${OUTSIDE_ID_ATTRIBUTE}="${id}"]`
      )!;
    const badge = (id: string) =>
      at(id).querySelector<HTMLElement>('.qloop-outside-unverified')!;
    const name = (id: string) =>
      at(id).querySelector<HTMLInputElement>('input.qloop-outside-name')!;
    expect(badge('new').hidden).toBe(false);
    expect(badge('new').textContent).toBe('unverified');
    expect(badge('new').title).toContain('only what the client says');
    expect(name('new').hidden).toBe(false);
    expect([badge('known').hidden, badge('old').hidden]).toEqual([true, true]);
    expect([name('known').hidden, name('old').hidden]).toEqual([true, true]);

    name('new').value = '  my Claude  ';
    click(at('new'), '.qloop-outside-always');
    name('known').value = 'ignored: hidden';
    click(at('known'), '.qloop-outside-approve');
    expect(decisions).toEqual([
      { decision: 'always', reason: '', name: 'my Claude' },
      { decision: 'approve', reason: '' }
    ]);
    widget.setRequests([approval({ id: 'new2', verified: false })]);
    name('new2').value = 'no';
    click(at('new2'), '.qloop-outside-deny');
    expect(decisions[2]).toEqual({ decision: 'deny', reason: '' });
    widget.dispose();
  });

  it('offers no Always allow for a client outside any MCP session', () => {
    const { widget } = board();
    widget.setRequests([
      approval({ id: 'x', grantable: false }),
      approval({ id: 'y', grantable: true })
    ]);
    const always = (id: string) =>
      widget.node.querySelector<HTMLButtonElement>(
        `[${OUTSIDE_ID_ATTRIBUTE}="${id}"] .qloop-outside-always`
      )!;
    expect([always('x').hidden, always('y').hidden]).toEqual([true, false]);
    widget.dispose();
  });

  it('shows one card per request, in the order they came', () => {
    const { widget, sent } = board();
    widget.setRequests([approval({ id: 'b' }), approval({ id: 'a' })]);
    widget.setRequests([
      approval({ id: 'a' }),
      approval({ id: 'b' }),
      approval({ id: 'c' })
    ]);
    expect(widget.shown).toEqual(['b', 'a', 'c']);
    expect(widget.node.querySelectorAll(`.${OUTSIDE_CLASS}`)).toHaveLength(3);
    click(
      widget.node.querySelector<HTMLElement>(`[${OUTSIDE_ID_ATTRIBUTE}="c"]`)!,
      '.qloop-outside-approve'
    );
    expect(sent).toEqual([['c', 'approve']]);
    widget.dispose();
  });
});

describe('entryBlock of a run_cell call', () => {
  const trans = nullTranslator.load('qloop');
  const copy = () => 1;
  const entry = (fields: JSONObject): JSONObject => ({
    id: 'e1',
    client: 'cursor',
    tool: 'run_cell',
    input: { source: '', op: 'run', cell_id: 'cell-2' },
    decision: 'approved by the user',
    risk: 'unknown',
    ...fields
  });

  it('shows what ran under "Ran cell", and its result', () => {
    const block = entryBlock(
      entry({ ran: 'plot(df\u200B)', result: 'cell cell-2\n<Axes>' }),
      trans,
      copy
    );
    const labels = Array.from(
      block.querySelectorAll('.qloop-outside-entry-label'),
      node => node.textContent
    );
    expect(labels).toContain('Ran cell');
    expect(labels).toContain('Result');
    const code = block.querySelector('pre.qloop-outside-entry-code')!;
    expect(code.textContent).toBe(`plot(df${charMark('\u200B')})`);
    expect(
      block.querySelector('pre.qloop-outside-entry-result')!.textContent
    ).toBe('cell cell-2\n<Axes>');
    expect(block.querySelector('.qloop-outside-entry-copy')).toBeNull();
  });

  it('says which cell did not run when nothing ran', () => {
    const block = entryBlock(
      entry({ decision: 'denied by the user', ran: null, result: '' }),
      trans,
      copy
    );
    expect(block.querySelector('pre.qloop-outside-entry-code')).toBeNull();
    expect(block.querySelector('.qloop-outside-entry-cell')!.textContent).toBe(
      'Cell cell-2 did not run'
    );
  });
});
