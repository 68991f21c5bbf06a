/**
 * The requests of outside agents (Claude Code, Cursor, ...) that reach a
 * notebook's kernel through qloop's MCP server in the Jupyter server: each
 * notebook view long-polls the server for the notebook's pending requests,
 * shows them as cards, posts the user's decisions back, applies the cell
 * changes the user accepts (or the user's policy allows) to the notebook
 * (`outsidecells.ts`: add, edit, or run a cell), and saves the records the server hands it into the notebook's metadata
 * (`qloop_outside`).
 *
 * While a view polls, the server counts the notebook as shown: it refuses
 * outside calls for a notebook no page shows.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import { JSONExt, JSONObject, JSONValue } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';

import type {
  OutsideApproval,
  OutsideCellChange,
  OutsideEntry,
  OutsideItem,
  OutsideItemRef,
  OutsidePageMessage,
  OutsidePending,
  OutsideRecordItem
} from './generated/protocol';
import { DecisionBody, OutsideBoard, PostOutcome } from './outsidecard';
import { INotebookMetadata } from './protocol';
import {
  CellExecutor,
  IOutsideCellWidget,
  OUTSIDE_KEY,
  OutsideCellChanges,
  executeCell,
  notebookCells,
  runCell
} from './outsidecells';
import { AgentCellAnswer, parseAgentCell } from './outsideview';
import { isJSONObject } from './record';

export { OUTSIDE_KEY };
/** The server's routes, under its base URL. */
export const PENDING_ROUTE = 'qloop/outside/pending';
export const DECIDE_ROUTE = 'qloop/outside/decide';
export const STOP_ROUTE = 'qloop/outside/stop';
export const SAVED_ROUTE = 'qloop/outside/saved';
export const CLAIM_ROUTE = 'qloop/outside/claim';
export const AGENT_CELL_ROUTE = 'qloop/outside/agent_cell';

/** Milliseconds before the first retry after a failed poll, and the most. */
export const FIRST_RETRY_MS = 2000;
export const LAST_RETRY_MS = 30000;

/** What a poll came back with. */
export type PollAnswer =
  | { answer: 'pending'; pending: OutsidePending }
  /** 404: the server has no qloop extension. */
  | { answer: 'absent' }
  | { answer: 'failed'; message: string };

function isStringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every(v => typeof v === 'string');
}

/** The cell change of an approval item, or null when it is not one. */
function cellChange(data: unknown): OutsideCellChange | null {
  if (!isJSONObject(data)) {
    return null;
  }
  const op = data['op'];
  if (op === 'edit' || op === 'run') {
    const cellId = data['cell_id'];
    return typeof cellId === 'string' ? { op, cell_id: cellId } : null;
  }
  const type = data['cell_type'];
  const after = data['after_cell_id'] ?? null;
  if (
    data['op'] !== 'add' ||
    (type !== 'code' && type !== 'markdown') ||
    (after !== null && typeof after !== 'string')
  ) {
    return null;
  }
  return { op: 'add', cell_type: type, after_cell_id: after };
}

function approvalItem(data: JSONObject): OutsideApproval | null {
  const { id, state, client, tool, title, code, risk, reasons } = data;
  const { editable, verified, grantable } = data;
  const texts = [id, client, tool, title, code, risk];
  const cell =
    data['cell'] === undefined ? undefined : cellChange(data['cell']);
  if (
    !texts.every(text => typeof text === 'string') ||
    (state !== 'waiting' && state !== 'running' && state !== 'apply') ||
    !isStringList(reasons) ||
    ![editable, verified, grantable].every(flag => typeof flag === 'boolean') ||
    cell === null ||
    (state === 'apply' && cell === undefined)
  ) {
    return null;
  }
  const [itemId, itemClient, itemTool, itemTitle, itemCode, itemRisk] =
    texts as string[];
  return {
    ...(cell ? { cell } : {}),
    id: itemId,
    kind: 'approval',
    state,
    client: itemClient,
    tool: itemTool,
    title: itemTitle,
    code: itemCode,
    risk: itemRisk,
    reasons,
    editable: editable as boolean,
    verified: verified as boolean,
    grantable: grantable as boolean
  };
}

const ENTRY_TEXTS = [
  'id',
  'at',
  'client',
  'tool',
  'decision',
  'reason',
  'result',
  'signature'
];

/**
 * Whether `data` is a saved call as the server signs it. It is saved as it
 * came, fields unknown here included: the signature covers every field.
 */
export function isOutsideEntry(data: unknown): data is OutsideEntry {
  if (!isJSONObject(data)) {
    return false;
  }
  const { input, ran, risk, result_chars, is_error, ran_redacted } = data;
  const textOrNull = (value: unknown) =>
    value === null || typeof value === 'string';
  return (
    ENTRY_TEXTS.every(key => typeof data[key] === 'string') &&
    isJSONObject(input) &&
    textOrNull(ran) &&
    textOrNull(risk) &&
    typeof result_chars === 'number' &&
    typeof is_error === 'boolean' &&
    (ran_redacted === undefined || ran_redacted === true)
  );
}

function recordItem(data: JSONObject): OutsideRecordItem | null {
  const { id, key, entry } = data;
  if (typeof id !== 'string' || key !== OUTSIDE_KEY || !isOutsideEntry(entry)) {
    return null;
  }
  return { id, kind: 'record', key, entry };
}

/** The answer of the pending route, or null when it is not one; odd items are left out. */
export function parsePending(data: unknown): OutsidePending | null {
  if (
    !isJSONObject(data) ||
    typeof data['version'] !== 'number' ||
    !Array.isArray(data['items'])
  ) {
    return null;
  }
  const items: OutsideItem[] = [];
  for (const raw of data['items']) {
    const kind = isJSONObject(raw) ? raw['kind'] : undefined;
    const item =
      kind === 'approval'
        ? approvalItem(raw as JSONObject)
        : kind === 'record'
          ? recordItem(raw as JSONObject)
          : null;
    if (item) {
      items.push(item);
    } else {
      console.warn('qloop: an outside request the page cannot read', raw);
    }
  }
  return { version: data['version'], items };
}

async function failure(response: Response): Promise<string> {
  try {
    const body: unknown = await response.json();
    if (isJSONObject(body) && typeof body['message'] === 'string') {
      return body['message'];
    }
  } catch {
    // Not JSON: the status says it.
  }
  return `HTTP ${response.status}`;
}

/** The server's routes for outside requests, through Jupyter's authentication. */
export class OutsideRequests {
  constructor(readonly settings: ServerConnection.ISettings) {}

  /** Wait for the notebook's list newer than `after` (up to 25 s on the server). */
  async pending(
    path: string,
    after: number,
    signal?: AbortSignal
  ): Promise<PollAnswer> {
    const query = URLExt.objectToQueryString({ path, after: String(after) });
    const url = URLExt.join(this.settings.baseUrl, PENDING_ROUTE) + query;
    try {
      const response = await ServerConnection.makeRequest(
        url,
        { method: 'GET', signal },
        this.settings
      );
      if (response.status === 404) {
        return { answer: 'absent' };
      }
      if (response.status !== 200) {
        return { answer: 'failed', message: await failure(response) };
      }
      const pending = parsePending(await response.json());
      return pending
        ? { answer: 'pending', pending }
        : { answer: 'failed', message: 'not a list of pending requests' };
    } catch (error) {
      return { answer: 'failed', message: String(error) };
    }
  }

  /** Send the user's decision on a request. */
  decide(id: string, decision: DecisionBody): Promise<PostOutcome> {
    return this._post(DECIDE_ROUTE, { id, ...decision });
  }

  /** Take a cell change to apply it: 'taken' when another page does. */
  claim(id: string): Promise<PostOutcome> {
    return this._post(CLAIM_ROUTE, { id });
  }

  /** Interrupt a request that runs. */
  stop(id: string): Promise<PostOutcome> {
    return this._post(STOP_ROUTE, { id });
  }

  /** Say that a record is in the notebook's metadata. */
  saved(id: string): Promise<PostOutcome> {
    return this._post(SAVED_ROUTE, { id });
  }

  /** The agent cell `id` that replays the saved `entries`, made by the server. */
  async agentCell(id: string, entries: JSONValue[]): Promise<AgentCellAnswer> {
    const response = await this._send(AGENT_CELL_ROUTE, { id, entries });
    if (typeof response === 'string') {
      return { outcome: 'failed', message: response };
    }
    if (response.status !== 200) {
      return { outcome: 'failed', message: await failure(response) };
    }
    const cell = parseAgentCell(await response.json().catch(() => null));
    return cell
      ? { outcome: 'ok', cell }
      : {
          outcome: 'failed',
          message: 'the server did not answer an agent cell'
        };
  }

  private async _post(
    route: string,
    body: OutsideItemRef | OutsidePageMessage
  ): Promise<PostOutcome> {
    const response = await this._send(route, body);
    if (typeof response === 'string') {
      return { outcome: 'failed', message: response };
    }
    if (response.status === 200) {
      return { outcome: 'ok' };
    }
    if (response.status === 409) {
      return { outcome: 'taken' };
    }
    return { outcome: 'failed', message: await failure(response) };
  }

  /** POST `body` as JSON to `route`: the response, or why none came. */
  private async _send(
    route: string,
    body: OutsidePageMessage
  ): Promise<Response | string> {
    const url = URLExt.join(this.settings.baseUrl, route);
    try {
      return await ServerConnection.makeRequest(
        url,
        {
          method: 'POST',
          body: JSON.stringify(body),
          headers: { 'Content-Type': 'application/json' }
        },
        this.settings
      );
    } catch (error) {
      return String(error);
    }
  }
}

/** The wait before the retry after `failures` failed polls in a row: 2, 4, 8, 16, 30 s. */
export function retryDelay(failures: number): number {
  const delay = FIRST_RETRY_MS * 2 ** Math.max(0, failures - 1);
  return Math.min(delay, LAST_RETRY_MS);
}

/**
 * The long poll of one notebook path: each answer goes to `onAnswer`, the
 * next request asks for a newer version. A failed poll is retried after a
 * growing wait; a 404 (no qloop extension on the server) ends it.
 */
export class OutsidePoll {
  constructor(
    private readonly _requests: OutsideRequests,
    private readonly _onAnswer: (pending: OutsidePending) => void
  ) {}

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Poll for `path` from version 0, ending the poll of the old path. */
  restart(path: string): void {
    if (this._disposed) {
      return;
    }
    this._end();
    void this._loop(++this._run, path);
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._end();
  }

  /** End the current run: its request is aborted and its wait cut short. */
  private _end(): void {
    this._run += 1;
    this._controller?.abort();
    this._controller = null;
    clearTimeout(this._timer);
    this._wake?.();
    this._wake = null;
  }

  private async _loop(run: number, path: string): Promise<void> {
    let after = 0;
    let failures = 0;
    while (run === this._run) {
      const controller = new AbortController();
      this._controller = controller;
      const answer = await this._requests.pending(
        path,
        after,
        controller.signal
      );
      if (run !== this._run) {
        return; // disposed, or restarted for a new path
      }
      if (answer.answer === 'absent') {
        console.debug('qloop: no outside agent routes on this server');
        return;
      }
      if (answer.answer === 'failed') {
        failures += 1;
        await this._sleep(retryDelay(failures));
        continue;
      }
      failures = 0;
      after = answer.pending.version;
      try {
        this._onAnswer(answer.pending);
      } catch (error) {
        console.error('qloop: outside requests not shown', error);
      }
    }
  }

  private _sleep(ms: number): Promise<void> {
    return new Promise(resolve => {
      this._wake = resolve;
      this._timer = setTimeout(resolve, ms);
    });
  }

  private _run = 0;
  private _disposed = false;
  private _controller: AbortController | null = null;
  private _timer: ReturnType<typeof setTimeout> | undefined = undefined;
  private _wake: (() => void) | null = null;
}

/** What saving a record did. */
export type SaveResult = 'saved' | 'present' | 'refused';

/**
 * Append `entry` to the notebook's `qloop_outside` entries, unless an entry
 * with its id is there. A saved value of another shape is not the page's to
 * change: it is left untouched ('refused').
 */
export function saveOutsideEntry(
  notebook: Pick<INotebookMetadata, 'getMetadata' | 'setMetadata'>,
  entry: OutsideEntry
): SaveResult {
  const saved = notebook.getMetadata(OUTSIDE_KEY);
  let kept: JSONObject = {};
  let entries: unknown[] = [];
  if (saved !== undefined) {
    if (!isJSONObject(saved) || !Array.isArray(saved['entries'])) {
      return 'refused';
    }
    kept = saved;
    entries = saved['entries'];
  }
  const present = entries.some(
    old => isJSONObject(old) && JSONExt.deepEqual(old['id'], entry['id'])
  );
  if (present) {
    return 'present';
  }
  const added = [...entries, entry] as JSONValue[];
  notebook.setMetadata(OUTSIDE_KEY, { ...kept, entries: added });
  return 'saved';
}

/**
 * Saves the record items of one notebook view's answers, and acknowledges each
 * once (again after a failed acknowledgement, when the item comes back).
 */
export class OutsideRecords {
  constructor(private readonly _requests: OutsideRequests) {}

  save(
    notebook: Pick<INotebookMetadata, 'getMetadata' | 'setMetadata'>,
    items: readonly OutsideItem[]
  ): void {
    for (const item of items) {
      if (item.kind === 'record' && !this._acknowledged.has(item.id)) {
        this._saveOne(notebook, item);
      }
    }
  }

  private _saveOne(
    notebook: Pick<INotebookMetadata, 'getMetadata' | 'setMetadata'>,
    item: OutsideRecordItem
  ): void {
    if (saveOutsideEntry(notebook, item.entry) === 'refused') {
      if (!this._warned.has(item.id)) {
        this._warned.add(item.id);
        console.warn(
          `qloop: metadata '${OUTSIDE_KEY}' is not {"entries": [...]}: the outside record is not saved`,
          item
        );
      }
      return;
    }
    this._acknowledged.add(item.id);
    void this._requests.saved(item.id).then(outcome => {
      if (outcome.outcome === 'failed') {
        this._acknowledged.delete(item.id);
      }
    });
  }

  private readonly _acknowledged = new Set<string>();
  private readonly _warned = new Set<string>();
}

/** What the requests need of a notebook's context (a notebook panel's has it). */
export interface IOutsideContext {
  readonly path: string;
  readonly pathChanged: ISignal<unknown, string>;
  readonly ready: Promise<void>;
  readonly isDisposed: boolean;
  readonly model: Pick<
    INotebookModel,
    'getMetadata' | 'setMetadata' | 'sharedModel' | 'contentChanged'
  >;
}

/** What the requests need of a notebook view (a `NotebookPanel` has it). */
export interface IOutsideView {
  readonly context: IOutsideContext;
  /** Between the toolbar and the content, in JupyterLab 4 and Notebook 7. */
  readonly contentHeader: Pick<NotebookPanel['contentHeader'], 'addWidget'>;
  /** The notebook: its node, and its cells' widgets (run_cell runs one). */
  readonly content: {
    readonly node: HTMLElement;
    readonly widgets: readonly IOutsideCellWidget[];
  };
  /** The notebook's kernel session, where run_cell runs a cell. */
  readonly sessionContext: ISessionContext;
  readonly disposed: ISignal<unknown, void>;
}

/**
 * Show the outside requests of a notebook view on top of it, while it is open:
 * a board in the view's content header and a poll of the notebook's path.
 * `execute` runs a cell of the view for run_cell (JupyterLab's own run, in
 * the view's session, unless given).
 */
export function showOutsideRequests(
  panel: IOutsideView,
  requests: OutsideRequests,
  trans: TranslationBundle,
  execute: CellExecutor = cell => executeCell(cell, panel.sessionContext)
): void {
  const context = panel.context;
  const notebook = () =>
    context.isDisposed ? null : context.model.sharedModel;
  const run = (cellId: string) =>
    runCell(panel.content.widgets, cellId, execute);
  const changes = new OutsideCellChanges(requests, notebook, run);
  const board = new OutsideBoard({
    trans,
    actions: {
      decide: (item, decision) =>
        item.cell
          ? changes.decide(item, decision)
          : requests.decide(item.id, decision),
      stop: id => requests.stop(id)
    },
    cells: notebookCells(notebook),
    restoreFocus: () => panel.content.node.focus()
  });
  panel.contentHeader.addWidget(board);
  // A cell edited, added or moved: the cards of cell changes say it.
  const edited = () => board.refreshCells();
  context.model.contentChanged.connect(edited);
  const records = new OutsideRecords(requests);
  const poll = new OutsidePoll(requests, pending => {
    const approvals = pending.items.filter(
      (item): item is OutsideApproval => item.kind === 'approval'
    );
    if (!context.isDisposed) {
      records.save(context.model, pending.items);
      changes.applyAllowed(approvals);
    }
    board.setRequests(approvals.filter(item => item.state !== 'apply'));
  });
  let started = false;
  const renamed = (_: unknown, path: string) => {
    if (started) {
      poll.restart(path);
    }
  };
  context.pathChanged.connect(renamed);
  panel.disposed.connect(() => {
    poll.dispose();
    context.pathChanged.disconnect(renamed);
    context.model.contentChanged.disconnect(edited);
  });
  // Records go into the metadata: wait until the notebook is loaded.
  context.ready
    .then(() => {
      started = true;
      poll.restart(context.path);
    })
    .catch(reason => {
      // JupyterLab reports the failed load itself.
      console.debug('qloop: notebook not loaded', reason);
    });
}
