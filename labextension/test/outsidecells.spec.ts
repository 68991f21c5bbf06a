/**
 * The run of a cell for an outside agent, apart from the page: the text of
 * its outputs as the agent reads it (stream text, text/plain, errors with
 * their traceback, terminal escapes removed, bounded), and what the run
 * tells the server, read from the real cell model.
 */
import { CodeCellModel, MarkdownCellModel } from '@jupyterlab/cells';
import { KernelMessage } from '@jupyterlab/services';

import {
  CellExecutor,
  IOutsideCellWidget,
  OUTPUTS_SENT,
  outputText,
  runCell
} from '../src/outsidecells';

describe('outputText', () => {
  it('joins stream text, text/plain and errors, escapes removed', () => {
    expect(
      outputText([
        { output_type: 'stream', name: 'stdout', text: ['a\n', 'b'] },
        {
          output_type: 'stream',
          name: 'stderr',
          text: '\u001b[31mwarn\u001b[0m\n'
        },
        {
          output_type: 'display_data',
          data: { 'text/plain': '<Figure>', 'image/png': 'iVBOR' },
          metadata: {}
        },
        {
          output_type: 'display_data',
          data: { 'image/png': 'x' },
          metadata: {}
        },
        {
          output_type: 'execute_result',
          execution_count: 2,
          data: { 'text/plain': ['4', '2'] },
          metadata: {}
        },
        {
          output_type: 'error',
          ename: 'KeyError',
          evalue: "'x'",
          traceback: [
            '\u001b[1;31mKeyError\u001b[0m: \u001b]8;;file:///a\u0007link\u001b]8;;\u0007'
          ]
        },
        'not an output'
      ])
    ).toBe("a\nb\nwarn\n<Figure>\n42\nKeyError: 'x'\nKeyError: link");
  });

  it('keeps at most OUTPUTS_SENT characters, and says how many there were', () => {
    const long = 'x'.repeat(OUTPUTS_SENT * 2);
    const text = outputText([
      { output_type: 'stream', name: 'stdout', text: long }
    ]);
    expect(text.length).toBe(OUTPUTS_SENT);
    expect(text.startsWith('xxx')).toBe(true);
    expect(text.endsWith(`… (${OUTPUTS_SENT * 2} characters in all)`)).toBe(
      true
    );
    const exact = 'y'.repeat(OUTPUTS_SENT);
    expect(
      outputText([{ output_type: 'stream', name: 'stdout', text: exact }])
    ).toBe(exact);
  });
});

describe('runCell', () => {
  const yjsWarnings = ['Invalid access: Add Yjs type', '[yjs#509]'];
  let warn: jest.SpyInstance;

  beforeEach(() => {
    const log = console.warn;
    warn = jest
      .spyOn(console, 'warn')
      .mockImplementation((...args: unknown[]) => {
        const message = String(args[0]);
        if (!yjsWarnings.some(prefix => message.startsWith(prefix))) {
          log(...args);
        }
      });
  });

  /** The cell models of a test, disposed after it. */
  let models: (CodeCellModel | MarkdownCellModel)[] = [];
  const code = (id: string) => own(new CodeCellModel({ id }));
  const markdown = (id: string) => own(new MarkdownCellModel({ id }));
  function own<M extends CodeCellModel | MarkdownCellModel>(model: M): M {
    models.push(model);
    return model;
  }

  afterEach(() => {
    models.forEach(model => model.dispose());
    models = [];
    warn.mockRestore();
  });

  function reply(status: 'ok' | 'abort'): KernelMessage.IExecuteReplyMsg {
    const content =
      status === 'ok'
        ? { status, execution_count: 3, user_expressions: {} }
        : { status };
    return KernelMessage.createMessage({
      msgType: 'execute_reply',
      channel: 'shell',
      session: 'fake',
      content: content as KernelMessage.IExecuteReplyMsg['content']
    });
  }

  it('runs the code cell as it is then, and reports source, outputs, status', async () => {
    const model = code('c1');
    model.sharedModel.setSource('print(1)');
    const cells: IOutsideCellWidget[] = [{ model: markdown('m1') }, { model }];
    const ran: string[] = [];
    const execute: CellExecutor = cell => {
      ran.push(cell.model.id);
      model.outputs.add({ output_type: 'stream', name: 'stdout', text: '1\n' });
      return Promise.resolve(reply('ok'));
    };
    expect(await runCell(cells, 'c1', execute)).toEqual({
      cell_id: 'c1',
      source: 'print(1)',
      outputs: '1\n',
      status: 'ok'
    });
    expect(ran).toEqual(['c1']);
  });

  it('says aborted for a run the kernel aborted, ok when nothing ran (empty source)', async () => {
    const model = code('c1');
    const cells = [{ model }];
    expect(
      await runCell(cells, 'c1', () => Promise.resolve(reply('abort')))
    ).toMatchObject({ status: 'aborted' });
    expect(
      await runCell(cells, 'c1', () => Promise.resolve(undefined))
    ).toEqual({ cell_id: 'c1', source: '', outputs: '', status: 'ok' });
  });

  it('runs nothing for a markdown cell or a missing one; a failed run is an error', async () => {
    const cells = [{ model: markdown('m1') }, { model: code('c1') }];
    const ran: string[] = [];
    const execute: CellExecutor = cell => {
      ran.push(cell.model.id);
      return Promise.reject(new Error('Canceled future for execute_request'));
    };
    expect(await runCell(cells, 'm1', execute)).toEqual({
      error: 'cell m1 is a markdown cell: nothing to run'
    });
    expect(await runCell(cells, 'gone', execute)).toEqual({
      error: 'no cell with id gone in the notebook'
    });
    expect(ran).toEqual([]);
    expect(await runCell(cells, 'c1', execute)).toEqual({
      error: 'Canceled future for execute_request'
    });
    expect(ran).toEqual(['c1']);
  });
});
