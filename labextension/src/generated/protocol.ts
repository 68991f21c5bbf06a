/**
 * Generated from qloop_kernel/schema/protocol.schema.json by `jlpm schema`:
 * do not edit. docs/schema.md says how the types are kept in step.
 */

import type { CellRecord } from './record';

/**
 * Any message of the ``qloop`` and ``qloop.waiting`` comms.
 */
export type ProtocolMessage = KernelRequest | PageMessage | WaitingMessage;
/**
 * A request the kernel sends on the ``qloop`` comm (in its open message or later).
 */
export type KernelRequest =
  | HelloRequest
  | SetMetadataRequest
  | SetNotebookMetadataRequest
  | ReadNotebookRequest
  | ProposeRequest
  | WithdrawRequest
  | CellSourceRequest
  | SetOutputsRequest
  | RevertAddRequest
  | RevertEditRequest;
/**
 * A message the page sends on the ``qloop`` comm.
 */
export type PageMessage =
  | Done
  | Refusal
  | HelloAnswer
  | ReadNotebookAnswer
  | ProposeAnswer
  | CellSourceAnswer
  | Attached;
/**
 * One output of a cell, bounded.
 */
export type OutputView = StreamView | ErrorView | RichView | OtherView;
/**
 * A message on the ``qloop.waiting`` comm, either way.
 */
export type WaitingMessage = Waiting | Describe;

/**
 * Which frontend holds the notebook, which operations it answers, and the notebook's path
 * and saved grants.
 */
export interface HelloRequest {
  op: 'hello';
  request_id: string;
}
/**
 * Save a turn's record in the agent cell's metadata.
 */
export interface SetMetadataRequest {
  op: 'set_metadata';
  request_id: string;
  cell_id: string;
  key: 'qloop';
  value: CellRecord;
}
/**
 * Save the approval grants in the notebook that holds the cell ``cell_id``.
 */
export interface SetNotebookMetadataRequest {
  op: 'set_notebook_metadata';
  request_id: string;
  cell_id: string;
  key: 'qloop_grants';
  value: NotebookGrantsValue;
}
/**
 * The notebook's approval grants as saved in its metadata, signed for its path.
 */
export interface NotebookGrantsValue {
  version: number;
  grants: {
    [k: string]: unknown;
  }[];
  signature: string;
}
/**
 * A bounded view of the notebook's cells (``cell_ids`` null: every cell).
 */
export interface ReadNotebookRequest {
  op: 'read_notebook';
  request_id: string;
  cell_id: string;
  cell_ids: string[] | null;
  outputs: boolean;
}
/**
 * A cell change for the user to accept or reject; answered when the user decides.
 */
export interface ProposeRequest {
  op: 'propose';
  request_id: string;
  cell_id: string;
  proposal: AddProposal | EditProposal;
}
/**
 * A new cell, after the cell ``after`` (or after the new cell of ``after_proposal`` while
 * that proposal waits).
 */
export interface AddProposal {
  id: string;
  source: string;
  risk: string;
  reasons: string[];
  provenance: Provenance;
  accepted: boolean;
  run: boolean;
  effect?: ProposalEffect;
  kind: 'add';
  cell_type: 'code' | 'markdown';
  after: string;
  after_proposal?: string;
}
/**
 * What an accepted cell keeps in its metadata: the agent cell and step that made it, signed
 * over the source it was proposed with.
 */
export interface Provenance {
  agent_cell: string;
  call_id: string;
  source_sha256: string;
  signature: string;
}
/**
 * What a proposed code cell would change, from a run ahead that was taken back: one line per
 * variable (``changes``), or why it was not run ahead, or not to its end (``note``, then shown
 * instead).
 */
export interface ProposalEffect {
  changes: string[];
  note: string;
}
/**
 * A new source for the cell ``target``.
 */
export interface EditProposal {
  id: string;
  source: string;
  risk: string;
  reasons: string[];
  provenance: Provenance;
  accepted: boolean;
  run: boolean;
  effect?: ProposalEffect;
  kind: 'edit';
  target: string;
}
/**
 * Take back a waiting proposal: its turn ended first.
 */
export interface WithdrawRequest {
  op: 'withdraw';
  request_id: string;
  cell_id: string;
  proposal: string;
}
/**
 * The type and whole source of the cell ``target``, which the agent runs.
 */
export interface CellSourceRequest {
  op: 'cell_source';
  request_id: string;
  cell_id: string;
  target: string;
}
/**
 * The outputs of the cell ``target`` after the agent ran it, and its source as it ran.
 */
export interface SetOutputsRequest {
  op: 'set_outputs';
  request_id: string;
  cell_id: string;
  target: string;
  source: string;
  outputs: {
    [k: string]: unknown;
  }[];
  effect: string;
}
/**
 * Undo an accepted new cell: delete it, unless its source changed since.
 */
export interface RevertAddRequest {
  op: 'revert_cell';
  request_id: string;
  cell_id: string;
  kind: 'add';
  target: string;
  source: string;
}
/**
 * Undo an accepted edit: the source and provenance from before, unless it changed since.
 */
export interface RevertEditRequest {
  op: 'revert_cell';
  request_id: string;
  cell_id: string;
  kind: 'edit';
  target: string;
  source: string;
  previous: string;
  previous_provenance: {
    [k: string]: unknown;
  } | null;
}
/**
 * The answer of a request that returns nothing.
 */
export interface Done {
  op: 'ack';
  request_id: string | number | null;
  ok: true;
}
/**
 * A request the page cannot answer: malformed, or about a cell it does not hold.
 */
export interface Refusal {
  op: 'ack';
  request_id: string | number | null;
  ok: false;
  error: string;
}
/**
 * The frontend, its version and operations; the notebook's path and saved grants when the
 * page holds the notebook.
 */
export interface HelloAnswer {
  op: 'ack';
  request_id: string | number | null;
  ok: true;
  frontend: string;
  version: string;
  operations: string[];
  notebook_path?: string;
  notebook_grants?: {
    [k: string]: unknown;
  } | null;
}
/**
 * The notebook's view.
 */
export interface ReadNotebookAnswer {
  op: 'ack';
  request_id: string | number | null;
  ok: true;
  notebook_path: string;
  total_cells: number;
  cells: CellView[];
  missing: string[];
}
/**
 * One cell in order: its id, type, execution count, bounded source and outputs.
 */
export interface CellView {
  id: string;
  cell_type: string;
  execution_count: number | null;
  agent: boolean;
  source: string;
  source_chars: number;
  outputs?: OutputView[];
  more_outputs?: number;
  omitted?: true;
}
export interface StreamView {
  output_type: 'stream';
  name: string;
  text: string;
  chars: number;
}
export interface ErrorView {
  output_type: 'error';
  ename: string;
  evalue: string;
}
/**
 * A result or display: its text/plain form and the names of its mime types, never its data.
 */
export interface RichView {
  output_type: 'execute_result' | 'display_data';
  text: string;
  chars: number;
  mime: string[];
}
/**
 * An output of another type: named only.
 */
export interface OtherView {
  output_type: string;
}
/**
 * The user's decision: the cell it was applied to, its source then (an edit made before
 * accepting included), or the reason it was rejected. An accepted edit says what it replaced.
 */
export interface ProposeAnswer {
  op: 'ack';
  request_id: string | number | null;
  ok: true;
  decision: 'accepted' | 'rejected';
  cell_id: string;
  source: string;
  reason: string;
  previous?: string;
  previous_provenance?: {
    [k: string]: unknown;
  } | null;
}
export interface CellSourceAnswer {
  op: 'ack';
  request_id: string | number | null;
  ok: true;
  cell_type: string;
  source: string;
}
/**
 * A page took the comm over (a reload): the kernel sends again what waits for an answer.
 */
export interface Attached {
  op: 'attached';
}
/**
 * An approval card waits in cell ``cell_id``: ``model_id`` is its widget (sent on open and
 * as the answer of ``describe``).
 */
export interface Waiting {
  op: 'waiting';
  cell_id: string;
  model_id: string;
}
/**
 * A page that connected later asks which cell waits.
 */
export interface Describe {
  op: 'describe';
}

/**
 * A new cell after the cell ``after_cell_id`` (null: at the end of the notebook).
 */
export interface AddCellChange {
  op: 'add';
  cell_type: 'code' | 'markdown';
  after_cell_id: string | null;
}

/**
 * The answer of each request, by its ``op``.
 */
export interface Answers {
  hello: HelloAnswer;
  set_metadata: Done;
  set_notebook_metadata: Done;
  read_notebook: ReadNotebookAnswer;
  propose: ProposeAnswer;
  withdraw: Done;
  cell_source: CellSourceAnswer;
  set_outputs: Done;
  revert_cell: Done;
}

/**
 * The page added or edited the cell ``cell_id``.
 */
export interface AppliedCell {
  cell_id: string;
}

/**
 * A new source for the cell ``cell_id``.
 */
export interface EditCellChange {
  op: 'edit';
  cell_id: string;
}

/**
 * What the step did: ``ok`` when it ran, ``error`` when it raised or was stopped, ``refused``
 * when it did not run or was undone (the step guard); the text as the model reads a tool
 * result (outputs, value, error, the variables it changed), redacted in the kernel.
 */
export interface HostAnswer {
  op: 'ack';
  request_id: string;
  ok: true;
  status: 'ok' | 'error' | 'refused';
  text: string;
  images: HostImage[];
  changes?: string[];
  not_undone?: string[];
}

/**
 * Stop on the card of a step the host has not begun: it is answered ``refused`` without
 * running (one that has begun is interrupted instead).
 */
export interface HostCancel {
  op: 'cancel';
  request_id: string;
}

export interface HostImage {
  mime: string;
  data: string;
}

export type HostMessage = HostRequest | HostCancel | HostStarted | HostAnswer;

/**
 * An outside agent's step the server has decided to run (its policy, a grant or the card):
 * the kernel session runs it as the in-notebook agent's ``run_code`` runs.
 */
export interface HostRequest {
  op: 'run_step';
  request_id: string;
  call_id: string;
  client: string;
  code: string;
  timeout_s: number | null;
}

/**
 * The host begins to run the step: from now on a Stop interrupts the kernel (before, the
 * interrupt would land in whatever the step waits behind).
 */
export interface HostStarted {
  op: 'started';
  request_id: string;
}

/**
 * The page could not apply the change: why.
 */
export interface NotApplied {
  error: string;
}

/**
 * The answer of ``agent_cell``: the ``%%agent`` cell's source and record, the code steps its
 * run replays, whether every entry verified with this user's key, and the entries left out.
 */
export interface OutsideAgentCell {
  ok: true;
  source: string;
  record: {
    [k: string]: unknown;
  };
  steps: number;
  own: boolean;
  skipped: number;
}

/**
 * The body of ``agent_cell``: the notebook's saved entries in order, as the page holds them
 * (the server leaves out those it cannot read), and the id of the cell to add.
 */
export interface OutsideAgentCellRequest {
  id: string;
  entries: unknown[];
}

export type OutsideApplied = AppliedCell | RanCell | NotApplied;

/**
 * A call that waits for the user (``waiting``), runs once approved (``running``), or a cell
 * change the policy or a grant allows, for the page to apply at once (``apply``, no card).
 * ``client`` is the name the agent announced until the user approves a call of its MCP session
 * (``verified``), then the name the user confirmed; ``grantable``: the client holds a session,
 * to which an "always allow" is bound. For a cell change, ``code`` is the proposed source ("" for
 * a run: the notebook has the source).
 */
export interface OutsideApproval {
  id: string;
  kind: 'approval';
  state: 'waiting' | 'running' | 'apply';
  client: string;
  tool: string;
  title: string;
  code: string;
  risk: string;
  reasons: string[];
  editable: boolean;
  verified: boolean;
  grantable: boolean;
  cell?: OutsideCellChange;
}

export type OutsideCellChange = AddCellChange | EditCellChange | RunCellChange;

/**
 * The body of ``decide``: the user's decision on the item ``id``; ``code`` is the edited code
 * (``edit``), ``applied`` what the page did with a cell change, ``name`` the name the user gave
 * an unverified client.
 */
export interface OutsideDecision {
  id: string;
  decision: 'approve' | 'deny' | 'always' | 'edit';
  reason?: string;
  code?: string;
  applied?: OutsideApplied;
  name?: string;
}

/**
 * The saved record of one call (``server/record.py``), signed with this user's key over its
 * other fields: who called, the tool and its input, who decided and why, the code that ran, and
 * a bounded, redacted copy of the result.
 */
export interface OutsideEntry {
  id: string;
  at: string;
  client: string;
  tool: string;
  input: {
    [k: string]: unknown;
  };
  decision: string;
  reason: string;
  ran: string | null;
  risk: string | null;
  result: string;
  result_chars: number;
  is_error: boolean;
  ran_redacted?: true;
  signature: string;
}

/**
 * A refused request (400, 401, 403, 404 of an item), as the Jupyter server writes it.
 */
export interface OutsideError {
  message: string;
  reason?: string | null;
  traceback?: string;
}

export type OutsideItem = OutsideApproval | OutsideRecordItem;

/**
 * The body of ``claim``, ``stop`` and ``saved``: the item's id.
 */
export interface OutsideItemRef {
  id: string;
}

export type OutsidePageMessage =
  OutsideItemRef | OutsideDecision | OutsideAgentCellRequest;

/**
 * The answer of ``pending``: the notebook's whole list once its version passes ``after``.
 */
export interface OutsidePending {
  version: number;
  items: OutsideItem[];
}

/**
 * The answer of ``decide``, ``claim``, ``stop`` and ``saved``: ``ok`` (200), or not (409:
 * decided, taken by another page, or gone) with the reason.
 */
export interface OutsidePostAnswer {
  ok: boolean;
  message?: string;
}

/**
 * An entry for a page to append to the notebook's ``qloop_outside`` metadata, then
 * acknowledge (``saved``).
 */
export interface OutsideRecordItem {
  id: string;
  kind: 'record';
  key: 'qloop_outside';
  entry: OutsideEntry;
}

/**
 * What each route of ``qloop/outside`` answers when it serves the request.
 */
export interface OutsideRoutes {
  pending: OutsidePending;
  decide: OutsidePostAnswer;
  claim: OutsidePostAnswer;
  stop: OutsidePostAnswer;
  saved: OutsidePostAnswer;
  agent_cell: OutsideAgentCell;
}

export type OutsideServerMessage =
  OutsidePending | OutsidePostAnswer | OutsideAgentCell | OutsideError;

/**
 * The page ran the cell ``cell_id``: its source then, its outputs' text, the reply's status.
 */
export interface RanCell {
  cell_id: string;
  source: string;
  outputs: string;
  status: 'ok' | 'error' | 'aborted';
}

/**
 * Run the cell ``cell_id`` as it is when approved: the card shows its source.
 */
export interface RunCellChange {
  op: 'run';
  cell_id: string;
}
