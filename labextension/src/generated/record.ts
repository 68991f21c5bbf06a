/**
 * Generated from qloop_kernel/schema/record.schema.json by `jlpm schema`:
 * do not edit. docs/schema.md says how the types are kept in step.
 */

export interface CellRecord {
  schema_version?: 1 | 2;
  session_id: string;
  cell_id?: string | null;
  prompt: string;
  model: string;
  settings?: {
    [k: string]: unknown;
  };
  status:
    | 'running'
    | 'completed'
    | 'max_turns'
    | 'budget_exceeded'
    | 'timeout'
    | 'interrupted'
    | 'refused'
    | 'error';
  error?: string | null;
  answer?: string;
  messages?: {
    [k: string]: unknown;
  }[];
  tool_calls?: ToolCallRecord[];
  usage?: UsageRecord;
  cost_usd?: number | null;
  model_calls?: number;
  timings: Timings;
  egress?: EgressRecord[];
  refusal?: RefusalRecord | null;
  updated_at?: string;
  metadata_unseen?: boolean;
  fingerprint?: Fingerprint | null;
  context?: ContextRecord | null;
  plan?: PlanRecord | null;
  history?: {
    [k: string]: unknown;
  }[];
  digest?: string;
  signature?: string;
}
export interface ToolCallRecord {
  id: string;
  name: string;
  input: {
    [k: string]: unknown;
  };
  input_redacted?: boolean;
  decision: DecisionRecord;
  is_error?: boolean;
  output_summary?: string;
  duration_s?: number;
  images?: ImagePlaceholder[];
  changes?: VariableChange[] | null;
}
export interface DecisionRecord {
  kind: 'approved' | 'edited' | 'denied' | 'auto' | 'always' | 'readonly';
  reason?: string | null;
  at?: string;
}
export interface ImagePlaceholder {
  placeholder?: true;
  mime: string;
  bytes: number;
  sha256: string;
}
/**
 * What one code step did to one variable: a one-line summary, never the value itself.
 */
export interface VariableChange {
  name: string;
  kind: 'created' | 'changed' | 'deleted';
  summary: string;
  hash?: string;
}
export interface UsageRecord {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}
export interface Timings {
  started_at: string;
  ended_at?: string | null;
  elapsed_s?: number;
  approval_wait_s?: number;
}
/**
 * Something that left the kernel for the model during the turn.
 */
export interface EgressRecord {
  kind:
    | 'prompt'
    | 'variables'
    | 'variable'
    | 'output'
    | 'history'
    | 'tool'
    | 'rules'
    | 'file'
    | 'cell';
  name: string;
  chars?: number;
}
export interface RefusalRecord {
  category?: string | null;
  explanation?: string;
}
/**
 * What the turn read and changed, and with which Python and libraries: drift is told from it.
 */
export interface Fingerprint {
  python?: string;
  libraries?: {
    [k: string]: string;
  };
  read?: VariablePrint[];
  changed?: VariablePrint[];
  cells?: CellPrint[];
  sources?: SourcePrint[];
}
/**
 * What a variable was: type, shape, dtypes and a content hash of a bounded sample.
 */
export interface VariablePrint {
  name: string;
  type: string;
  shape?: string;
  dtypes?: string;
  hash?: string;
}
/**
 * A notebook cell the turn read (it defined a variable the turn used), as it was run.
 */
export interface CellPrint {
  cell_id: string;
  sha256: string;
  defines?: string[];
}
/**
 * A rules file or an attached file or cell the turn was sent: where, and the SHA-256 of it.
 */
export interface SourcePrint {
  kind: 'rules' | 'file' | 'cell';
  path: string;
  sha256: string;
}
/**
 * What the turn's first request held besides the prompt, and its estimated size and cost.
 */
export interface ContextRecord {
  system_chars?: number;
  rules?: RulesRecord[];
  attachments?: AttachmentRecord[];
  tools?: ToolSize[];
  history_messages?: number;
  estimated_tokens?: number;
  estimated_cost_usd?: number | null;
  estimate_method?: string;
}
/**
 * A rules file found for the turn: whose, its hash and size, and whether it was sent.
 */
export interface RulesRecord {
  path: string;
  origin: 'user' | 'project';
  sha256?: string;
  chars?: number;
  status: string;
}
/**
 * An item of ``--with``: its kind, name, hash and size as sent.
 */
export interface AttachmentRecord {
  kind: 'file' | 'table' | 'image' | 'variable' | 'cell';
  name: string;
  sha256?: string;
  chars?: number;
  image_bytes?: number;
  note?: string;
}
export interface ToolSize {
  name: string;
  chars?: number;
}
/**
 * A ``--run-plan`` turn's plan: the plan proposed (the ``--plan`` turn's steps, as the session
 * kept them; "" when it kept none) and the plan run (as the user edited it); ``task``: its task.
 */
export interface PlanRecord {
  task?: string;
  proposed?: string;
  run: string;
}
