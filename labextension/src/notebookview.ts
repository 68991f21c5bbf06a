/**
 * What `read_notebook` answers: a bounded view of the notebook's cells for
 * the kernel's agent. Sources and the text of outputs are cut to fixed
 * lengths, and once the whole answer would pass ANSWER_CHARS the later cells
 * keep only their id, type, execution count and sizes. Rich outputs give the
 * names of their mime types and their text/plain form, never their data.
 *
 * The kernel builds the same view for headless runs: the names and bounds here
 * are shared with it and must not drift.
 *
 * This module imports nothing at run time, so the benchmark loads it under
 * plain node.
 */
import type {
  CellView,
  OutputView,
  ReadNotebookAnswer
} from './generated/protocol';

/** Characters of a cell's source put in the answer. */
export const SOURCE_CHARS = 3000;
/** Characters of an output's text (or an error's value) put in the answer. */
export const OUTPUT_CHARS = 500;
/** Characters of an error's name put in the answer. */
export const ENAME_CHARS = 200;
/** Outputs of one cell put in the answer. */
export const OUTPUTS_PER_CELL = 5;
/** Characters of sources, output texts and error values in one answer. */
export const ANSWER_CHARS = 30000;
/** The cell metadata key that marks an agent cell (record.ts METADATA_KEY). */
export const AGENT_KEY = 'qloop';

/** A cell as nbformat JSON: what a cell model's `toJSON()` returns. */
export interface ICellJSON {
  readonly id?: string;
  readonly cell_type: string;
  readonly source: string | readonly string[];
  readonly metadata?: { readonly [key: string]: unknown };
  readonly execution_count?: number | null;
  readonly outputs?: readonly unknown[];
}

/** The answer of `read_notebook`, without the ack's own fields. */
export type NotebookView = Omit<ReadNotebookAnswer, 'op' | 'request_id' | 'ok'>;

/** A text cut to a length, and the length of the whole text. */
interface ICutText {
  text: string;
  chars: number;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first `limit` characters, without a lone half of a surrogate pair at the end. */
function head(text: string, limit: number): string {
  if (text.length <= limit) {
    return text;
  }
  const code = text.charCodeAt(limit - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit);
}

/**
 * An nbformat multiline string (a string or an array of strings), cut to
 * `limit`; an array is joined only as far as the cut, since a stream can
 * hold megabytes of lines.
 */
function cutText(value: unknown, limit: number): ICutText {
  if (typeof value === 'string') {
    return { text: head(value, limit), chars: value.length };
  }
  if (!Array.isArray(value)) {
    return { text: '', chars: 0 };
  }
  let text = '';
  let chars = 0;
  for (const part of value) {
    if (typeof part !== 'string') {
      continue;
    }
    if (text.length < limit) {
      text += part;
    }
    chars += part.length;
  }
  return { text: head(text, limit), chars };
}

function multilineLength(value: unknown): number {
  return cutText(value, 0).chars;
}

function outputView(output: unknown): OutputView {
  if (!isObject(output)) {
    return { output_type: 'unknown' };
  }
  const type = String(output['output_type'] ?? 'unknown');
  if (type === 'stream') {
    const { text, chars } = cutText(output['text'], OUTPUT_CHARS);
    const name = typeof output['name'] === 'string' ? output['name'] : '';
    return { output_type: type, name, text, chars };
  }
  if (type === 'error') {
    return {
      output_type: type,
      ename: cutText(output['ename'], ENAME_CHARS).text,
      evalue: cutText(output['evalue'], OUTPUT_CHARS).text
    };
  }
  if (type === 'execute_result' || type === 'display_data') {
    // Only text/plain is read: image and other data never enter the answer.
    const data = isObject(output['data']) ? output['data'] : {};
    const { text, chars } = cutText(data['text/plain'], OUTPUT_CHARS);
    return { output_type: type, text, chars, mime: Object.keys(data).sort() };
  }
  return { output_type: type };
}

/** Characters an output adds to the answer's budget. */
function outputChars(view: OutputView): number {
  if ('text' in view) {
    return view.text.length;
  }
  if ('evalue' in view) {
    return view.evalue.length;
  }
  return 0;
}

function outputsOf(cell: ICellJSON): readonly unknown[] {
  return Array.isArray(cell.outputs) ? cell.outputs : [];
}

/** The fields every cell keeps, omitted or not. */
function cellHeader(cell: ICellJSON) {
  const isCode = cell.cell_type === 'code';
  const count = cell.execution_count;
  return {
    id: typeof cell.id === 'string' ? cell.id : '',
    cell_type: cell.cell_type,
    execution_count: isCode && typeof count === 'number' ? count : null,
    agent: isObject(cell.metadata) && AGENT_KEY in cell.metadata
  };
}

/** A cell whose content did not fit the budget: sizes only. */
function omittedCell(cell: ICellJSON, outputs: boolean): CellView {
  const view: CellView = {
    ...cellHeader(cell),
    source: '',
    source_chars: multilineLength(cell.source)
  };
  if (outputs) {
    view.outputs = [];
    view.more_outputs = outputsOf(cell).length;
  }
  view.omitted = true;
  return view;
}

/** A cell with its content, and the characters it adds to the budget. */
function fullCell(cell: ICellJSON, outputs: boolean): [CellView, number] {
  const { text, chars } = cutText(cell.source, SOURCE_CHARS);
  const view: CellView = {
    ...cellHeader(cell),
    source: text,
    source_chars: chars
  };
  let used = text.length;
  if (outputs) {
    const all = outputsOf(cell);
    view.outputs = all.slice(0, OUTPUTS_PER_CELL).map(outputView);
    view.more_outputs = all.length - view.outputs.length;
    for (const output of view.outputs) {
      used += outputChars(output);
    }
  }
  return [view, used];
}

/**
 * Build the answer of `read_notebook`.
 *
 * @param path - the notebook's path ('' when unknown).
 * @param cells - every cell of the notebook, in order, as nbformat JSON.
 * @param cellIds - the ids asked for, or null for every cell.
 * @param outputs - whether to include the cells' outputs.
 */
export function notebookView(
  path: string,
  cells: readonly ICellJSON[],
  cellIds: readonly string[] | null,
  outputs: boolean
): NotebookView {
  const asked = cellIds === null ? null : new Set(cellIds);
  const found = new Set<string>();
  const views: CellView[] = [];
  let used = 0;
  let spent = false;
  for (const cell of cells) {
    const id = typeof cell.id === 'string' ? cell.id : '';
    if (asked !== null && !asked.has(id)) {
      continue;
    }
    found.add(id);
    if (!spent) {
      const [view, chars] = fullCell(cell, outputs);
      if (used + chars <= ANSWER_CHARS) {
        used += chars;
        views.push(view);
        continue;
      }
      // From the first cell that does not fit on, every cell is sizes only.
      spent = true;
    }
    views.push(omittedCell(cell, outputs));
  }
  const missing = asked === null ? [] : [...asked].filter(id => !found.has(id));
  return {
    notebook_path: path,
    total_cells: cells.length,
    cells: views,
    missing
  };
}
