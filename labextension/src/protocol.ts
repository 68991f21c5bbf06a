/**
 * The `qloop` comm protocol: requests from the kernel, acknowledgements back.
 *
 * Every request carries an `op` and a `request_id`; every request gets exactly
 * one `ack` with the same `request_id`. A malformed request gets `ok: false`
 * with the reason and never throws. The kernel sends these operations: `hello`
 * (which frontend and version is there, which operations it answers, and,
 * when the lookup reaches the notebook, its path and saved approval grants),
 * `set_metadata` (save a record in a cell), `set_notebook_metadata` (save the
 * approval grants in the notebook that holds the given cell),
 * `read_notebook` (a bounded view of the notebook's cells and outputs), and
 * `propose` (a new cell or an edit of a cell, for the user to accept or
 * reject), and, for a cell the agent runs, `cell_source` (a cell's type and
 * whole source) and `set_outputs` (that cell's new outputs, and its source as
 * it ran), and `revert_cell` (the user's Undo of an accepted cell). The ack of `propose` comes when the user decides (or at once for
 * a proposal the kernel sends already accepted, `accepted: true`, by its
 * approval policy or a grant); the others are answered at once. A proposal withdrawn because its comm or notebook closed
 * gets no ack: the kernel takes the closed comm as a rejection.
 *
 * The requests and their answers are the types generated from the protocol's
 * schema (generated/protocol.ts): the page answers every operation there, and
 * reads and answers only the fields there.
 */
import { JSONObject } from '@lumino/coreutils';

import type {
  Answers,
  Done,
  HelloAnswer,
  KernelRequest,
  ProposeRequest,
  Refusal,
  SetNotebookMetadataRequest
} from './generated/protocol';
import { ICellJSON, notebookView } from './notebookview';
import {
  DELETED_REASON,
  IDecision,
  IProposal,
  IProposalEffect,
  ProposalBoard,
  ProposalCellType
} from './proposals';
import { METADATA_KEY, Untrusted, isJSONObject } from './record';

/** The metadata operation the bridge needs from a cell model. */
export interface ICellMetadata {
  setMetadata(key: string, value: unknown): void;
}

/** The notebook itself: its path and its notebook-level metadata. */
export interface INotebookMetadata {
  readonly path: string;
  getMetadata(key: string): unknown;
  setMetadata(key: string, value: unknown): void;
}

/** Finds a cell of the notebook a kernel belongs to. */
export interface ICellLookup {
  /** The cell with this id, or undefined when the notebook has none. */
  findCell(cellId: string): ICellMetadata | undefined;
  /** The notebook, when this lookup can reach it (and it is open). */
  notebook?(): INotebookMetadata | undefined;
  /** Every cell as nbformat JSON, in order, when this lookup can reach the notebook. */
  cellsJSON?(): ICellJSON[] | undefined;
  /** The notebook's cells as proposals change them, when this lookup can show proposals. */
  proposals?(): IProposalNotebook | undefined;
  /**
   * A turn's record was saved in cell `cellId`: a page that has no output of
   * that turn (it was reloaded while the turn ran) shows it from the record.
   */
  recordSaved?(cellId: string, record: JSONObject): void;
  /** A cell the agent may run (its source, and its outputs set), when this lookup can. */
  runnableCell?(cellId: string): IRunnableCell | undefined;
}

/** A cell whose source the kernel runs for the agent, and whose outputs it then sets. */
export interface IRunnableCell {
  readonly cellType: string;
  getSource(): string;
  setSource(source: string): void;
  /**
   * Replace the cell's outputs (nbformat output JSON) and clear its execution
   * count; `effect` says what the run did to the kernel's variables ('' for
   * nothing), shown on the cell.
   */
  setOutputs(outputs: JSONObject[], effect: string): void;
}

/** A cell that a proposal reads and changes. */
export interface IProposalCell extends ICellMetadata {
  getSource(): string;
  setSource(source: string): void;
  getMetadata(key: string): unknown;
  deleteMetadata(key: string): void;
}

/** What a proposal needs from the notebook: its cells and where proposals wait. */
export interface IProposalNotebook {
  readonly board: ProposalBoard;
  cell(cellId: string): IProposalCell | undefined;
  /** Insert a cell right after the cell `afterId`; returns the new cell's id. */
  insertCell(
    afterId: string,
    cellType: ProposalCellType,
    source: string,
    metadata: JSONObject
  ): string;
  /** Delete the cell; nothing happens when it is gone already. */
  removeCell(cellId: string): void;
  /**
   * The id of a cell already marked as the new cell of proposal `id` (a page
   * reloaded while it waited, or another page under collaboration), if any.
   */
  proposedCell?(id: string): string | undefined;
}

/** The reply to one request. */
export interface IAck extends JSONObject {
  op: 'ack';
  request_id: string | number | null;
  ok: boolean;
}

/** What the page says of itself in every `hello` answer. */
export type Hello = Pick<HelloAnswer, 'frontend' | 'version'>;

/** An operation the kernel asks for. */
type Op = KernelRequest['op'];

/** A request of operation `O` as it arrives. */
type RequestOf<O extends Op> = Untrusted<Extract<KernelRequest, { op: O }>>;

/** The fields the answer of operation `O` adds to the ack. */
type AnswerOf<O extends Op> = Omit<Answers[O], 'op' | 'request_id' | 'ok'>;

/** What a request answers: an ack now, or later (null: no ack, the comm or notebook closed). */
export type Answer = IAck | Promise<IAck | null>;

/** Metadata keys a kernel may write. */
export const WRITABLE_KEYS: readonly string[] = [METADATA_KEY];
/** The notebook-level key of the saved approval grants (signed by the kernel). */
export const GRANTS_KEY: SetNotebookMetadataRequest['key'] = 'qloop_grants';
/** Notebook-level metadata keys a kernel may write. */
export const NOTEBOOK_WRITABLE_KEYS: readonly string[] = [GRANTS_KEY];
/** Cell metadata of a proposed new cell while it waits: `{id, kind, agent_cell}`. */
export const PROPOSAL_KEY = 'qloop_proposal';
/** Cell metadata of an accepted proposal: the provenance the kernel sent. */
export const PROVENANCE_KEY = 'qloop_provenance';

type RequestId = IAck['request_id'];

class RequestError extends Error {}

function ack(requestId: RequestId, answer: AnswerOf<Op>): IAck {
  const done = { op: 'ack', request_id: requestId, ok: true } satisfies Done;
  return { ...done, ...answer };
}

function refusal(requestId: RequestId, error: string): IAck {
  return {
    op: 'ack',
    request_id: requestId,
    ok: false,
    error
  } satisfies Refusal;
}

function requestIdOf(data: RequestOf<Op>): RequestId {
  const id = data['request_id'];
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** A field of a request, which must be a non-empty string. */
function requireString<R extends object>(
  data: R,
  field: keyof R & string
): string {
  const value = (data as JSONObject)[field];
  if (typeof value !== 'string' || value.length === 0) {
    throw new RequestError(`'${field}' must be a non-empty string`);
  }
  return value;
}

function requireWritableKey(data: RequestOf<'set_metadata'>): string {
  const key = requireString(data, 'key');
  if (!WRITABLE_KEYS.includes(key)) {
    throw new RequestError(
      `key '${key}' is not writable (writable: ${WRITABLE_KEYS.join(', ')})`
    );
  }
  return key;
}

function requireCell(
  data: { readonly cell_id?: unknown },
  cells: ICellLookup
): ICellMetadata {
  const cellId = requireString(data, 'cell_id');
  const cell = cells.findCell(cellId);
  if (!cell) {
    throw new RequestError(`no cell with id ${cellId}`);
  }
  return cell;
}

function setMetadata(
  data: RequestOf<'set_metadata'>,
  cells: ICellLookup
): AnswerOf<'set_metadata'> {
  const key = requireWritableKey(data);
  const value = data['value'];
  if (!isJSONObject(value)) {
    throw new RequestError("'value' must be a JSON object");
  }
  // The cell model skips a write of an equal value: the notebook stays clean.
  requireCell(data, cells).setMetadata(key, value);
  if (key === METADATA_KEY) {
    cells.recordSaved?.(data['cell_id'] as string, value);
  }
  return {};
}

/** The notebook's path and saved grants, for `hello` (nothing without a notebook). */
function notebookHello(
  cells: ICellLookup
): Pick<AnswerOf<'hello'>, 'notebook_path' | 'notebook_grants'> {
  const notebook = cells.notebook?.();
  if (!notebook) {
    return {};
  }
  const grants = notebook.getMetadata(GRANTS_KEY);
  return {
    notebook_path: notebook.path,
    notebook_grants: isJSONObject(grants) ? grants : null
  };
}

function setNotebookMetadata(
  data: RequestOf<'set_notebook_metadata'>,
  cells: ICellLookup
): AnswerOf<'set_notebook_metadata'> {
  const key = requireString(data, 'key');
  if (!NOTEBOOK_WRITABLE_KEYS.includes(key)) {
    throw new RequestError(
      `notebook key '${key}' is not writable (writable: ${NOTEBOOK_WRITABLE_KEYS.join(', ')})`
    );
  }
  const value = data['value'];
  if (!isJSONObject(value)) {
    throw new RequestError("'value' must be a JSON object");
  }
  // Only the notebook holding the running cell takes the write: another
  // notebook on the same kernel answers with a refusal.
  requireCell(data, cells);
  const notebook = cells.notebook?.();
  if (!notebook) {
    throw new RequestError('no notebook to write to');
  }
  notebook.setMetadata(key, value);
  return {};
}

/** The `cell_ids` of a request: null (absent or null) means every cell. */
function requireCellIds(data: RequestOf<'read_notebook'>): string[] | null {
  const value = data['cell_ids'];
  if (value === undefined || value === null) {
    return null;
  }
  if (
    !Array.isArray(value) ||
    !value.every(id => typeof id === 'string' && id.length > 0)
  ) {
    throw new RequestError(
      "'cell_ids' must be an array of non-empty strings, or null for every cell"
    );
  }
  return value as string[];
}

function readNotebook(
  data: RequestOf<'read_notebook'>,
  cells: ICellLookup
): AnswerOf<'read_notebook'> {
  const cellIds = requireCellIds(data);
  const outputs = data['outputs'] ?? true;
  if (typeof outputs !== 'boolean') {
    throw new RequestError("'outputs' must be a boolean");
  }
  if (data['cell_id'] !== undefined) {
    // Only the notebook holding the running cell answers (a kernel can be
    // shared by two notebooks: the other one refuses).
    requireCell(data, cells);
  }
  const all = cells.cellsJSON?.();
  if (!all) {
    throw new RequestError('no notebook to read');
  }
  const path = cells.notebook?.()?.path ?? '';
  return notebookView(path, all, cellIds, outputs);
}

/** A proposal as it arrives: an addition or an edit. */
type ProposalFields = Untrusted<ProposeRequest['proposal']>;

/** A field of the `proposal` object, or the refusal naming it. */
function proposalString(
  proposal: ProposalFields,
  field: keyof ProposalFields,
  allowEmpty = false
): string {
  const value = proposal[field];
  if (typeof value !== 'string' || (!allowEmpty && value.length === 0)) {
    const what = allowEmpty ? 'a string' : 'a non-empty string';
    throw new RequestError(`'proposal.${field}' must be ${what}`);
  }
  return value;
}

function proposalReasons(proposal: ProposalFields): string[] {
  const value = proposal['reasons'] ?? [];
  if (!Array.isArray(value) || !value.every(line => typeof line === 'string')) {
    throw new RequestError("'proposal.reasons' must be an array of strings");
  }
  return value as string[];
}

/** The proposal's data effect (absent: none was sent), or the refusal of a malformed one. */
function proposalEffect(proposal: ProposalFields): IProposalEffect | undefined {
  const value = proposal['effect'];
  if (value === undefined) {
    return undefined;
  }
  const changes = isJSONObject(value) ? value['changes'] : undefined;
  const note = isJSONObject(value) ? value['note'] : undefined;
  if (
    !Array.isArray(changes) ||
    !changes.every(line => typeof line === 'string') ||
    typeof note !== 'string'
  ) {
    throw new RequestError(
      "'proposal.effect' must hold 'changes' (strings) and 'note' (a string)"
    );
  }
  return { changes: changes as string[], note };
}

/** A cell named by a field of the proposal, which must be a cell of this notebook. */
function proposalCell(
  proposal: ProposalFields,
  field: keyof ProposalFields,
  cells: ICellLookup
): string {
  const cellId = proposalString(proposal, field);
  if (!cells.findCell(cellId)) {
    throw new RequestError(`no cell with id ${cellId} ('proposal.${field}')`);
  }
  return cellId;
}

/** A validated `propose` request. */
interface IProposeRequest {
  proposal: IProposal;
  /** The cell the new cell goes after (add). */
  after: string;
  provenance: JSONObject;
  /** Accepted already (by the approval policy or a grant): applied without asking. */
  accepted: boolean;
  /** Put the new cell after the new cell of this waiting proposal, when it is there. */
  afterProposal?: string;
}

/** Check a `propose` request; throws the refusal of a malformed one. */
function parsePropose(
  data: RequestOf<'propose'>,
  cells: ICellLookup
): IProposeRequest {
  const agentCell = requireString(data, 'cell_id');
  requireCell(data, cells);
  const value = data['proposal'];
  if (!isJSONObject(value)) {
    throw new RequestError("'proposal' must be a JSON object");
  }
  const proposal: ProposalFields = value;
  const id = proposalString(proposal, 'id');
  const kind = proposal['kind'];
  if (kind !== 'add' && kind !== 'edit') {
    throw new RequestError(
      `'proposal.kind' must be 'add' or 'edit', not ${JSON.stringify(kind ?? null)}`
    );
  }
  const source = proposalString(proposal, 'source', true);
  const risk = proposalString({ risk: '', ...proposal }, 'risk', true);
  const reasons = proposalReasons(proposal);
  const effect = proposalEffect(proposal);
  const provenance = proposal['provenance'];
  if (!isJSONObject(provenance)) {
    throw new RequestError("'proposal.provenance' must be a JSON object");
  }
  const run = proposal['run'] ?? false;
  if (typeof run !== 'boolean') {
    throw new RequestError("'proposal.run' must be a boolean");
  }
  const accepted = proposal['accepted'] ?? false;
  if (typeof accepted !== 'boolean') {
    throw new RequestError("'proposal.accepted' must be a boolean");
  }
  let cellType: ProposalCellType = 'code';
  let after = '';
  let afterProposal: string | undefined;
  let cellId = '';
  if (kind === 'add') {
    const type = proposal['cell_type'];
    if (type !== 'code' && type !== 'markdown') {
      throw new RequestError(
        "'proposal.cell_type' must be 'code' or 'markdown'"
      );
    }
    cellType = type;
    after = proposalCell(proposal, 'after', cells);
    const waiting = proposal['after_proposal'];
    if (waiting !== undefined && typeof waiting !== 'string') {
      throw new RequestError("'proposal.after_proposal' must be a string");
    }
    afterProposal = waiting || undefined;
  } else {
    cellId = proposalCell(proposal, 'target', cells);
  }
  return {
    proposal: {
      id,
      kind,
      cellType,
      source,
      cellId,
      agentCell,
      risk,
      reasons,
      ...(run && kind === 'add' && cellType === 'code' ? { run: true } : {}),
      ...(effect && cellType === 'code' ? { effect } : {})
    },
    after,
    provenance,
    accepted,
    ...(afterProposal ? { afterProposal } : {})
  };
}

/** Apply an accepted proposal; the ack's fields (rejected when its cell is gone). */
function accept(
  notebook: IProposalNotebook,
  proposal: IProposal,
  provenance: JSONObject
): AnswerOf<'propose'> {
  const cell = notebook.cell(proposal.cellId);
  if (!cell) {
    return {
      decision: 'rejected',
      cell_id: proposal.cellId,
      source: '',
      reason: DELETED_REASON
    };
  }
  // What an accepted edit replaced, for Undo to put back.
  const before: Pick<
    AnswerOf<'propose'>,
    'previous' | 'previous_provenance'
  > = {};
  if (proposal.kind === 'add') {
    cell.deleteMetadata(PROPOSAL_KEY);
  } else {
    cell.deleteMetadata(PROPOSAL_KEY);
    const earlier = cell.getMetadata(PROVENANCE_KEY);
    before.previous = cell.getSource();
    before.previous_provenance = isJSONObject(earlier) ? earlier : null;
    cell.setSource(proposal.source);
  }
  cell.setMetadata(PROVENANCE_KEY, provenance);
  return {
    decision: 'accepted',
    cell_id: proposal.cellId,
    source: cell.getSource(),
    reason: '',
    ...before
  };
}

/**
 * Take an accepted cell back (the user's Undo of the step that made it): an
 * added cell is deleted, an edited cell gets its source and provenance from
 * before. Refused when the cell's source is no longer the accepted one: the
 * user's later work is never undone.
 */
function revertCell(
  data: RequestOf<'revert_cell'>,
  cells: ICellLookup
): AnswerOf<'revert_cell'> {
  requireCell(data, cells);
  const notebook = cells.proposals?.();
  if (!notebook) {
    throw new RequestError('this notebook view cannot take cells back');
  }
  const target = requireString(data, 'target');
  const kind = data['kind'];
  if (kind !== 'add' && kind !== 'edit') {
    throw new RequestError("'kind' must be add or edit");
  }
  const source = data['source'];
  const previous = kind === 'edit' ? data['previous'] : '';
  if (typeof source !== 'string' || typeof previous !== 'string') {
    throw new RequestError(
      kind === 'add'
        ? "'source' must be a string"
        : "'source' and 'previous' must be strings"
    );
  }
  const cell = notebook.cell(target);
  if (!cell) {
    throw new RequestError(`no cell with id ${target}`);
  }
  if (cell.getSource() !== source) {
    throw new RequestError(
      `cell ${target} was changed since it was accepted: left as it is`
    );
  }
  notebook.board.dismissEffect(target);
  if (kind === 'add') {
    notebook.removeCell(target);
    return {};
  }
  cell.setSource(previous);
  const provenance = data['previous_provenance'];
  if (isJSONObject(provenance)) {
    cell.setMetadata(PROVENANCE_KEY, provenance);
  } else {
    cell.deleteMetadata(PROVENANCE_KEY);
  }
  return {};
}

/**
 * Apply the user's decision to the notebook; the ack's fields, or null when
 * withdrawn or decided on another page. A page that follows another page's
 * proposal (`follows`) leaves it in the shared notebook when withdrawn: the
 * proposing page owns it.
 */
function applyDecision(
  notebook: IProposalNotebook,
  proposal: IProposal,
  provenance: JSONObject,
  decision: IDecision | null,
  follows = false
): AnswerOf<'propose'> | null {
  if (decision?.decision === 'elsewhere' || (decision === null && follows)) {
    return null;
  }
  if (decision?.decision === 'accepted') {
    return accept(notebook, proposal, provenance);
  }
  // Rejected or withdrawn: the new cell goes, an edited cell stays as it was.
  if (proposal.kind === 'add') {
    // Its mark first, in a change of its own: another page of a shared
    // notebook sees the decision before the cell goes, and answers nothing.
    notebook.cell(proposal.cellId)?.deleteMetadata(PROPOSAL_KEY);
    notebook.removeCell(proposal.cellId);
  } else {
    notebook.cell(proposal.cellId)?.deleteMetadata(PROPOSAL_KEY);
  }
  if (decision === null) {
    return null;
  }
  return {
    decision: 'rejected',
    cell_id: proposal.cellId,
    source: '',
    reason: decision.reason
  };
}

/**
 * Show a proposal in the notebook and answer once the user decides: a new
 * cell is inserted now (marked as proposed), an edit waits on its target.
 * A proposal accepted already is applied and answered at once.
 */
function propose(
  data: RequestOf<'propose'>,
  cells: ICellLookup,
  signal?: AbortSignal,
  follows = false
): AnswerOf<'propose'> | Promise<AnswerOf<'propose'> | null> {
  const request = parsePropose(data, cells);
  const notebook = cells.proposals?.();
  if (!notebook) {
    throw new RequestError('this notebook view cannot show proposals');
  }
  const { id, agentCell } = request.proposal;
  if (notebook.board.has(id)) {
    throw new RequestError(`a proposal with id ${id} already waits`);
  }
  if (follows) {
    return follow(notebook, request, signal);
  }
  let proposal = request.proposal;
  if (proposal.kind === 'add') {
    const mark = { id, kind: 'add', agent_cell: agentCell };
    // A proposal sent again (this page took over the comm of a page that
    // closed while it waited) finds its cell still in the notebook.
    const cellId =
      notebook.proposedCell?.(id) ??
      notebook.insertCell(
        afterOf(notebook, request),
        proposal.cellType,
        proposal.source,
        request.accepted ? {} : { [PROPOSAL_KEY]: mark }
      );
    proposal = { ...proposal, cellId };
  }
  if (request.accepted) {
    return accept(notebook, proposal, request.provenance);
  }
  if (proposal.kind === 'edit') {
    // Marked while it waits: another page of a shared notebook finds it, and
    // sees when it is decided.
    const mark = { id, kind: 'edit', agent_cell: agentCell };
    notebook.cell(proposal.cellId)?.setMetadata(PROPOSAL_KEY, mark);
  }
  const shown = proposal;
  return presentWatched(notebook, shown, signal).then(decision =>
    applyDecision(notebook, shown, request.provenance, decision)
  );
}

/** Where a new cell goes: after the new cell of a proposal it follows while that one waits. */
function afterOf(
  notebook: IProposalNotebook,
  request: IProposeRequest
): string {
  const waiting = notebook.board.waiting.find(
    proposal => proposal.id === request.afterProposal
  );
  return waiting && notebook.cell(waiting.cellId)
    ? waiting.cellId
    : request.after;
}

/**
 * Withdraw a waiting proposal the kernel no longer asks about (its turn
 * ended first): a new cell goes, an edited cell stays as it was.
 */
function withdraw(
  data: RequestOf<'withdraw'>,
  cells: ICellLookup
): AnswerOf<'withdraw'> {
  requireCell(data, cells);
  const id = requireString(data, 'proposal');
  cells.proposals?.()?.board.withdraw(id);
  return {};
}

/** How often a page looks whether another page of a shared notebook decided a proposal. */
const WATCH_MS = 200;
/** How long a following page waits for the proposing page's mark to reach it. */
const FOLLOW_WAIT_MS = 30000;

/** Whether cell `cellId` carries the mark of proposal `id`. */
function marked(
  notebook: IProposalNotebook,
  cellId: string,
  id: string
): boolean {
  const mark = notebook.cell(cellId)?.getMetadata(PROPOSAL_KEY);
  return isJSONObject(mark) && mark['id'] === id;
}

/** Resolves true once `test` holds, false when `signal` aborts or `ms` pass first. */
function until(
  test: () => boolean,
  signal: AbortSignal | undefined,
  ms: number
): Promise<boolean> {
  if (test()) {
    return Promise.resolve(true);
  }
  return new Promise(resolve => {
    const started = Date.now();
    const timer = setInterval(() => {
      const found = test();
      if (found || signal?.aborted || Date.now() - started > ms) {
        clearInterval(timer);
        resolve(found);
      }
    }, WATCH_MS);
  });
}

/**
 * Present a proposal until it is decided here, withdrawn, or decided on
 * another page of the shared notebook (its cell is there without its mark:
 * `ELSEWHERE`; a cell that is gone was deleted, which rejects it).
 */
function presentWatched(
  notebook: IProposalNotebook,
  proposal: IProposal,
  signal?: AbortSignal
): Promise<IDecision | null> {
  const watching = new AbortController();
  until(
    () =>
      notebook.cell(proposal.cellId) !== undefined &&
      !marked(notebook, proposal.cellId, proposal.id),
    watching.signal,
    Infinity
  )
    .then(gone => {
      if (gone) {
        notebook.board.settleElsewhere(proposal.id);
      }
    })
    .catch(reason => console.debug('qloop: stopped watching', reason));
  return notebook.board.present(proposal, signal).finally(() => {
    watching.abort();
  });
}

/**
 * Show a proposal another page of the shared notebook made (the page that
 * runs the agent cell inserts the new cell, or marks the edited one): once
 * its mark reaches this page, the same bar shows here, and a decision made
 * here is applied and answered like one made there.
 */
async function follow(
  notebook: IProposalNotebook,
  request: IProposeRequest,
  signal?: AbortSignal
): Promise<AnswerOf<'propose'> | null> {
  let proposal = request.proposal;
  const { id } = proposal;
  if (request.accepted) {
    return null; // applied by the proposing page
  }
  const cellOf = (): string | undefined =>
    proposal.kind === 'add'
      ? notebook.proposedCell?.(id)
      : marked(notebook, proposal.cellId, id)
        ? proposal.cellId
        : undefined;
  const arrived = await until(
    () => cellOf() !== undefined,
    signal,
    FOLLOW_WAIT_MS
  );
  const cellId = cellOf();
  if (!arrived || cellId === undefined || notebook.board.has(id)) {
    return null;
  }
  proposal = { ...proposal, cellId };
  const decision = await presentWatched(notebook, proposal, signal);
  return applyDecision(notebook, proposal, request.provenance, decision, true);
}

/** The cell named by `target`, which must be a cell this lookup can run. */
function runnableTarget(target: string, cells: ICellLookup): IRunnableCell {
  const cell = cells.runnableCell?.(target);
  if (!cell) {
    throw new RequestError(`no cell with id ${target}`);
  }
  return cell;
}

function cellSource(
  data: RequestOf<'cell_source'>,
  cells: ICellLookup
): AnswerOf<'cell_source'> {
  // Only the notebook holding the running agent cell answers.
  requireCell(data, cells);
  const cell = runnableTarget(requireString(data, 'target'), cells);
  return { cell_type: cell.cellType, source: cell.getSource() };
}

const OUTPUT_TYPES = ['stream', 'display_data', 'execute_result', 'error'];

function setOutputs(
  data: RequestOf<'set_outputs'>,
  cells: ICellLookup
): AnswerOf<'set_outputs'> {
  requireCell(data, cells);
  const cell = runnableTarget(requireString(data, 'target'), cells);
  if (cell.cellType !== 'code') {
    throw new RequestError(`cell ${String(data['target'])} is not a code cell`);
  }
  const source = data['source'];
  if (typeof source !== 'string') {
    throw new RequestError("'source' must be a string");
  }
  const outputs = data['outputs'];
  if (
    !Array.isArray(outputs) ||
    !outputs.every(
      output =>
        isJSONObject(output) &&
        OUTPUT_TYPES.includes(String(output['output_type']))
    )
  ) {
    throw new RequestError(
      `'outputs' must be an array of nbformat outputs (${OUTPUT_TYPES.join(', ')})`
    );
  }
  const effect = data['effect'] ?? '';
  if (typeof effect !== 'string') {
    throw new RequestError("'effect' must be a string");
  }
  // The source that ran (an edit on the approval card included) stays with
  // the outputs it gave.
  if (cell.getSource() !== source) {
    cell.setSource(source);
  }
  cell.setOutputs(outputs as JSONObject[], effect);
  return {};
}

/** Answers a request of operation `O`: now, or later (null: no answer). */
type Operation<O extends Op> = (
  data: RequestOf<O>,
  cells: ICellLookup,
  hello: Hello,
  signal?: AbortSignal,
  follows?: boolean
) => AnswerOf<O> | Promise<AnswerOf<O> | null>;

/** Every operation of the protocol's schema, each with its answer. */
const OPERATIONS: { [O in Op]: Operation<O> } = {
  hello: (data, cells, hello) => ({
    ...hello,
    operations: Object.keys(OPERATIONS),
    ...notebookHello(cells)
  }),
  set_metadata: setMetadata,
  set_notebook_metadata: setNotebookMetadata,
  read_notebook: readNotebook,
  propose: (data, cells, hello, signal, follows) =>
    propose(data, cells, signal, follows),
  cell_source: cellSource,
  set_outputs: setOutputs,
  revert_cell: revertCell,
  withdraw
};

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Answer one request from the kernel.
 *
 * Every operation but `propose` answers at once; `propose` answers with a
 * promise of the ack, settled when the user decides, or of null when the
 * proposal is withdrawn (`signal` aborts: the comm closed) and no ack goes.
 *
 * @param data - the comm message's `data`, as received (untrusted).
 * @param cells - the cells of the notebook the kernel belongs to.
 * @param hello - what a `hello` request answers (frontend name and version).
 * @param signal - aborts when the comm the request came on closes.
 */
export function handleRequest(
  data: unknown,
  cells: ICellLookup,
  hello: Hello,
  signal?: AbortSignal,
  follows = false
): Answer {
  if (!isJSONObject(data)) {
    return refusal(null, 'a request must be a JSON object');
  }
  const requestId = requestIdOf(data);
  const op = data['op'];
  if (
    typeof op !== 'string' ||
    !Object.prototype.hasOwnProperty.call(OPERATIONS, op)
  ) {
    return refusal(requestId, `unknown op ${JSON.stringify(op ?? null)}`);
  }
  try {
    // Each operation reads its own request's fields, each checked as it is read.
    const operation = OPERATIONS[op as Op] as Operation<Op>;
    const answer = operation(data, cells, hello, signal, follows);
    if (answer instanceof Promise) {
      return answer.then(
        extra => (extra === null ? null : ack(requestId, extra)),
        error => refusal(requestId, errorMessage(error))
      );
    }
    return ack(requestId, answer);
  } catch (error) {
    return refusal(requestId, errorMessage(error));
  }
}
