/**
 * The view `read_notebook` answers: cells in order, sources and outputs cut
 * to their bounds, no image data, and later cells omitted once the budget is
 * spent. `qloop run` builds the same view in Python: the vectors in
 * notebook-view-vectors.json are that module's output (a Python test checks
 * it), and this builder must give each of them alike.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import {
  AGENT_KEY,
  ANSWER_CHARS,
  ICellJSON,
  OUTPUTS_PER_CELL,
  OUTPUT_CHARS,
  SOURCE_CHARS,
  notebookView
} from '../src/notebookview';
import { METADATA_KEY } from '../src/record';

const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk'.repeat(50);

interface IVector {
  path: string;
  cells: ICellJSON[];
  cell_ids: string[] | null;
  outputs: boolean;
  view: unknown;
}

const VECTORS: IVector[] = JSON.parse(
  readFileSync(join(__dirname, 'notebook-view-vectors.json'), 'utf-8')
);

describe('the view qloop run builds in Python', () => {
  it.each(VECTORS.map((vector, index) => [index, vector] as const))(
    'is built alike from vector %i',
    (index, vector) => {
      expect(
        notebookView(vector.path, vector.cells, vector.cell_ids, vector.outputs)
      ).toEqual(vector.view);
    }
  );
});

function codeCell(
  id: string,
  source: string | string[],
  outputs: unknown[] = [],
  executionCount: number | null = 1
): ICellJSON {
  return {
    id,
    cell_type: 'code',
    source,
    metadata: {},
    execution_count: executionCount,
    outputs
  };
}

function stream(text: string | string[], name = 'stdout'): unknown {
  return { output_type: 'stream', name, text };
}

/** Markdown, code with each kind of output, an agent cell, unexecuted code. */
function notebook(): ICellJSON[] {
  return [
    {
      id: 'md',
      cell_type: 'markdown',
      source: ['# Title\n', 'Some text'],
      metadata: {}
    },
    codeCell(
      'run',
      'import pandas as pd\nprint("hi")\n1 / 0',
      [
        stream(['hi\n', 'there\n']),
        stream('warn\n', 'stderr'),
        {
          output_type: 'error',
          ename: 'ZeroDivisionError',
          evalue: 'division by zero',
          traceback: ['SECRET TRACEBACK LINE']
        },
        {
          output_type: 'execute_result',
          execution_count: 3,
          data: { 'text/plain': '<Figure>', 'image/png': PNG },
          metadata: {}
        }
      ],
      3
    ),
    {
      id: 'agent',
      cell_type: 'code',
      source: '%%agent\nplot it',
      metadata: { qloop: { status: 'completed' } },
      execution_count: 4,
      outputs: []
    },
    codeCell('todo', 'x = 1', [], null),
    { id: 'raw', cell_type: 'raw', source: 'raw text', metadata: {} }
  ];
}

describe('notebookView', () => {
  it('keeps the agent key of the saved record', () => {
    expect(AGENT_KEY).toBe(METADATA_KEY);
  });

  it('shows every cell in order, with its outputs and no image data', () => {
    const view = notebookView('work/a.ipynb', notebook(), null, true);
    expect(view).toEqual({
      notebook_path: 'work/a.ipynb',
      total_cells: 5,
      missing: [],
      cells: [
        {
          id: 'md',
          cell_type: 'markdown',
          execution_count: null,
          agent: false,
          source: '# Title\nSome text',
          source_chars: 17,
          outputs: [],
          more_outputs: 0
        },
        {
          id: 'run',
          cell_type: 'code',
          execution_count: 3,
          agent: false,
          source: 'import pandas as pd\nprint("hi")\n1 / 0',
          source_chars: 37,
          outputs: [
            {
              output_type: 'stream',
              name: 'stdout',
              text: 'hi\nthere\n',
              chars: 9
            },
            { output_type: 'stream', name: 'stderr', text: 'warn\n', chars: 5 },
            {
              output_type: 'error',
              ename: 'ZeroDivisionError',
              evalue: 'division by zero'
            },
            {
              output_type: 'execute_result',
              text: '<Figure>',
              chars: 8,
              mime: ['image/png', 'text/plain']
            }
          ],
          more_outputs: 0
        },
        {
          id: 'agent',
          cell_type: 'code',
          execution_count: 4,
          agent: true,
          source: '%%agent\nplot it',
          source_chars: 15,
          outputs: [],
          more_outputs: 0
        },
        {
          id: 'todo',
          cell_type: 'code',
          execution_count: null,
          agent: false,
          source: 'x = 1',
          source_chars: 5,
          outputs: [],
          more_outputs: 0
        },
        {
          id: 'raw',
          cell_type: 'raw',
          execution_count: null,
          agent: false,
          source: 'raw text',
          source_chars: 8,
          outputs: [],
          more_outputs: 0
        }
      ]
    });
    const text = JSON.stringify(view);
    expect(text).not.toContain(PNG.slice(0, 40));
    expect(text).not.toContain('SECRET TRACEBACK');
  });

  it('shows only the asked cells, in notebook order, and lists unknown ids', () => {
    const view = notebookView('', notebook(), ['todo', 'nope', 'md'], true);
    expect(view.cells.map(cell => cell.id)).toEqual(['md', 'todo']);
    expect(view.missing).toEqual(['nope']);
    expect(view.total_cells).toBe(5);
  });

  it('leaves outputs out when asked to', () => {
    const view = notebookView('', notebook(), ['run'], false);
    expect(view.cells).toEqual([
      {
        id: 'run',
        cell_type: 'code',
        execution_count: 3,
        agent: false,
        source: 'import pandas as pd\nprint("hi")\n1 / 0',
        source_chars: 37
      }
    ]);
  });

  it('shows a display_data without text/plain as its mime types only', () => {
    const view = notebookView(
      '',
      [
        codeCell('c', '', [
          {
            output_type: 'display_data',
            data: { 'image/png': PNG, 'application/json': { a: 1 } },
            metadata: {}
          },
          { output_type: 'something_new', data: { 'image/png': PNG } }
        ])
      ],
      null,
      true
    );
    expect(view.cells[0].outputs).toEqual([
      {
        output_type: 'display_data',
        text: '',
        chars: 0,
        mime: ['application/json', 'image/png']
      },
      { output_type: 'something_new' }
    ]);
  });

  it('cuts a long source, long outputs and an error name', () => {
    const view = notebookView(
      '',
      [
        codeCell('long', 'a'.repeat(10000), [
          stream('s'.repeat(2000)),
          {
            output_type: 'error',
            ename: 'E'.repeat(300),
            evalue: 'v'.repeat(900),
            traceback: []
          },
          {
            output_type: 'execute_result',
            data: { 'text/plain': ['p'.repeat(400), 'q'.repeat(400)] },
            metadata: {},
            execution_count: 1
          }
        ])
      ],
      null,
      true
    );
    const [cell] = view.cells;
    expect(cell.source).toBe('a'.repeat(SOURCE_CHARS));
    expect(cell.source_chars).toBe(10000);
    expect(cell.outputs).toEqual([
      {
        output_type: 'stream',
        name: 'stdout',
        text: 's'.repeat(OUTPUT_CHARS),
        chars: 2000
      },
      {
        output_type: 'error',
        ename: 'E'.repeat(200),
        evalue: 'v'.repeat(OUTPUT_CHARS)
      },
      {
        output_type: 'execute_result',
        text: 'p'.repeat(400) + 'q'.repeat(100),
        chars: 800,
        mime: ['text/plain']
      }
    ]);
  });

  it('does not cut a surrogate pair in half', () => {
    const source = 'a'.repeat(SOURCE_CHARS - 1) + '\u{1F600}';
    const [cell] = notebookView('', [codeCell('c', source)], null, true).cells;
    expect(cell.source).toBe('a'.repeat(SOURCE_CHARS - 1));
    expect(cell.source_chars).toBe(SOURCE_CHARS + 1);
  });

  it('keeps the first outputs of a cell and counts the rest', () => {
    const outputs = Array.from({ length: 7 }, (_, i) => stream(`line ${i}\n`));
    const [cell] = notebookView(
      '',
      [codeCell('c', 'x', outputs)],
      null,
      true
    ).cells;
    expect(OUTPUTS_PER_CELL).toBe(5);
    expect(
      cell.outputs?.map(output => 'text' in output && output.text)
    ).toEqual(['line 0\n', 'line 1\n', 'line 2\n', 'line 3\n', 'line 4\n']);
    expect(cell.more_outputs).toBe(2);
  });

  it('omits every cell after the budget is spent', () => {
    const cells = Array.from({ length: 500 }, (_, i) =>
      codeCell(`c${i}`, `# ${i}\n`.padEnd(1000, 'x'), [
        stream('o'.repeat(100000)),
        {
          output_type: 'display_data',
          data: {
            'image/png': PNG.repeat(100),
            'text/plain': 't'.repeat(5000)
          },
          metadata: {}
        }
      ])
    );
    cells.splice(300, 0, {
      id: 'small',
      cell_type: 'markdown',
      source: 'short',
      metadata: {}
    });
    const view = notebookView('big.ipynb', cells, null, true);
    const text = JSON.stringify(view);
    // ANSWER_CHARS of content, plus the fields of every cell, omitted or not.
    expect(text.length).toBeLessThan(200 * 1024);
    expect(text).not.toContain(PNG.slice(0, 40));
    expect(view.total_cells).toBe(501);
    expect(view.cells).toHaveLength(501);

    const kept = view.cells.filter(cell => !cell.omitted);
    const shown = kept.reduce(
      (sum, cell) =>
        sum +
        cell.source.length +
        (cell.outputs ?? []).reduce(
          (n, output) => n + ('text' in output ? output.text.length : 0),
          0
        ),
      0
    );
    expect(shown).toBeLessThanOrEqual(ANSWER_CHARS);
    // Every cell in full takes 1000 + 500 + 500 characters.
    expect(kept).toHaveLength(Math.floor(ANSWER_CHARS / 2000));
    expect(view.cells.slice(0, kept.length)).toEqual(kept);

    const small = view.cells.find(cell => cell.id === 'small');
    expect(small).toEqual({
      id: 'small',
      cell_type: 'markdown',
      execution_count: null,
      agent: false,
      source: '',
      source_chars: 5,
      outputs: [],
      more_outputs: 0,
      omitted: true
    });
    expect(view.cells[kept.length]).toEqual({
      id: `c${kept.length}`,
      cell_type: 'code',
      execution_count: 1,
      agent: false,
      source: '',
      source_chars: 1000,
      outputs: [],
      more_outputs: 2,
      omitted: true
    });
  });

  it('omits cells without outputs when outputs are left out', () => {
    const cells = Array.from({ length: 100 }, (_, i) =>
      codeCell(`c${i}`, 'y'.repeat(SOURCE_CHARS))
    );
    const view = notebookView('', cells, null, false);
    const omitted = view.cells.filter(cell => cell.omitted);
    expect(omitted).toHaveLength(100 - ANSWER_CHARS / SOURCE_CHARS);
    expect(omitted[0]).toEqual({
      id: `c${ANSWER_CHARS / SOURCE_CHARS}`,
      cell_type: 'code',
      execution_count: 1,
      agent: false,
      source: '',
      source_chars: SOURCE_CHARS,
      omitted: true
    });
  });
});
