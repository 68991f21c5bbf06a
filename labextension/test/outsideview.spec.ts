/**
 * The view of the outside agents' calls saved in a notebook: one block per
 * entry from the real notebook model's metadata, every text set as text and
 * code with its invisible characters marked, following the metadata as it
 * changes; "Copy to cell" inserts the code as a new code cell; the command
 * opens one view per notebook, in the main area or (Notebook 7) beside it.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { NotebookModel } from '@jupyterlab/notebook';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { JSONObject, JSONValue } from '@lumino/coreutils';

import type { OutsideEntry } from '../src/generated/protocol';
import { Signal } from '@lumino/signaling';
import { Panel, Widget } from '@lumino/widgets';

import { OUTSIDE_KEY, saveOutsideEntry } from '../src/outside';
import {
  IOutsideCallsPanel,
  OUTSIDE_ENTRY_CLASS,
  OUTSIDE_TOOL_ATTRIBUTE,
  OUTSIDE_VIEW_CLASS,
  AgentCellAnswer,
  OutsideCallsView,
  RESULT_SHOWN,
  parseAgentCell,
  SHOW_OUTSIDE_CALLS,
  addOutsideCallsCommand
} from '../src/outsideview';
import { MARK_CLASS, charMark } from '../src/visible';

const EVIL = '<img src=x onerror="window.hacked = 1">';
const trans = nullTranslator.load('qloop');
const yjsWarnings = ['Invalid access: Add Yjs type', '[yjs#509]'];

/** console.warn without Yjs's warnings about a model used before it is attached. */
function quietYjsWarnings(): jest.SpyInstance {
  const log = console.warn;
  return jest
    .spyOn(console, 'warn')
    .mockImplementation((...args: unknown[]) => {
      const message = String(args[0]);
      if (!yjsWarnings.some(prefix => message.startsWith(prefix))) {
        log(...args);
      }
    });
}

function runEntry(fields: Partial<OutsideEntry> = {}): OutsideEntry {
  return {
    id: 'e1',
    at: '2026-12-05T12:00:00+00:00',
    client: 'claude-code',
    tool: 'run_code',
    input: { code: 'df.describe()' },
    decision: 'approved by the user',
    reason: 'looks fine',
    ran: 'df.describe()',
    risk: 'read',
    result: 'count 3',
    result_chars: 7,
    is_error: false,
    signature: 'v1:abc',
    ...fields
  };
}

function blocks(view: Widget): HTMLElement[] {
  return Array.from(
    view.node.querySelectorAll<HTMLElement>(`.${OUTSIDE_ENTRY_CLASS}`)
  );
}

function field(block: HTMLElement, key: string): string | null {
  return (
    block.querySelector(`.qloop-outside-entry-${key}`)?.textContent ?? null
  );
}

describe('OutsideCallsView', () => {
  let model: NotebookModel;
  let view: OutsideCallsView;
  let copied: number[];
  let warn: jest.SpyInstance;

  beforeEach(() => {
    warn = quietYjsWarnings();
    model = new NotebookModel();
    model.sharedModel.insertCell(0, {
      id: 'first',
      cell_type: 'code',
      source: 'import pandas as pd',
      metadata: {}
    });
    copied = [];
  });

  afterEach(() => {
    view?.dispose();
    model.dispose();
    warn.mockRestore();
  });

  function open(entries: unknown[] | null): OutsideCallsView {
    if (entries !== null) {
      model.setMetadata(OUTSIDE_KEY, { entries } as JSONObject);
    }
    view = new OutsideCallsView({
      model,
      trans,
      copied: index => copied.push(index)
    });
    Widget.attach(view, document.body);
    return view;
  }

  it('shows one block per entry, oldest first, with its fields, code and result', () => {
    open([
      runEntry(),
      runEntry({ id: 'e2', client: 'cursor', ran: null, reason: '' }),
      ['not', 'an', 'entry'],
      'text'
    ]);
    expect(view.node.classList).toContain(OUTSIDE_VIEW_CLASS);
    expect(
      view.node.querySelector('.qloop-outside-view-note')!.textContent
    ).toBe(
      "Entries are saved by this notebook's pages; qloop show says which your key signed."
    );
    expect(
      view.node.querySelector('.qloop-outside-view-note code')!.textContent
    ).toBe('qloop show');
    const [ran, denied, list, text] = blocks(view);
    expect(blocks(view)).toHaveLength(4);
    expect(ran.getAttribute(OUTSIDE_TOOL_ATTRIBUTE)).toBe('run_code');
    expect(
      ['at', 'client', 'tool', 'decision', 'reason', 'risk'].map(key =>
        field(ran, key)
      )
    ).toEqual([
      '2026-12-05T12:00:00+00:00',
      'claude-code',
      'run_code',
      'approved by the user',
      'looks fine',
      'read'
    ]);
    expect(
      Array.from(ran.querySelectorAll('dt'), dt => dt.textContent)
    ).toEqual(['When', 'Client', 'Tool', 'Decision', 'Reason', 'Class']);
    expect(ran.querySelector('pre.qloop-outside-entry-code')!.textContent).toBe(
      'df.describe()'
    );
    expect(ran.textContent).toContain('Ran');
    expect(
      ran.querySelector('pre.qloop-outside-entry-result')!.textContent
    ).toBe('count 3');
    expect(ran.querySelector('.qloop-outside-entry-copy')!.textContent).toBe(
      'Copy to cell'
    );
    // Denied: what was asked is shown, and there is nothing to copy.
    expect(field(denied, 'client')).toBe('cursor');
    expect(field(denied, 'reason')).toBeNull();
    expect(denied.textContent).toContain('Asked to run (it did not run)');
    expect(
      denied.querySelector('pre.qloop-outside-entry-code')!.textContent
    ).toBe('df.describe()');
    expect(denied.querySelector('.qloop-outside-entry-copy')).toBeNull();
    for (const unreadable of [list, text]) {
      expect(unreadable.textContent).toBe('an unreadable entry');
      expect(unreadable.classList).toContain('qloop-outside-entry-unreadable');
    }
  });

  it('says which cell a cell change added or edited, with nothing to copy', () => {
    open([
      runEntry({
        tool: 'add_cell',
        input: {
          source: '# Notes',
          op: 'add',
          cell_type: 'markdown',
          after_cell_id: null
        },
        ran: '# Notes',
        result: 'cell 4f2a'
      }),
      runEntry({
        tool: 'edit_cell',
        input: { source: 'x = 2', op: 'edit', cell_id: 'first' },
        ran: 'x = 3',
        result: 'cell first'
      }),
      runEntry({
        tool: 'edit_cell',
        decision: 'denied by the user',
        input: { source: 'x = 2', op: 'edit', cell_id: 'first' },
        ran: null,
        result: ''
      })
    ]);
    const [added, edited, denied] = blocks(view);
    expect(added.querySelector('.qloop-outside-entry-cell')!.textContent).toBe(
      'Added as cell 4f2a'
    );
    expect(edited.querySelector('.qloop-outside-entry-cell')!.textContent).toBe(
      'Applied to cell first'
    );
    expect(
      edited.querySelector('pre.qloop-outside-entry-code')!.textContent
    ).toBe('x = 3');
    expect(denied.querySelector('.qloop-outside-entry-cell')!.textContent).toBe(
      'No cell was changed'
    );
    expect(denied.textContent).toContain('Proposed source (not applied)');
    expect(view.node.querySelector('.qloop-outside-entry-copy')).toBeNull();
    expect(view.node.querySelector('.qloop-outside-entry-result')).toBeNull();
  });

  it('marks invisible and confusable characters in the code', () => {
    const code = 'x = "abc\u202Edef"\ny\u200B = 1';
    open([runEntry({ ran: code })]);
    const pre = view.node.querySelector('pre.qloop-outside-entry-code')!;
    expect(
      Array.from(pre.querySelectorAll(`.${MARK_CLASS}`), m => m.textContent)
    ).toEqual([charMark('\u202E'), charMark('\u200B')]);
    expect(pre.textContent).not.toContain('\u202E');
  });

  it('never reads a saved text as HTML', () => {
    const entry = runEntry({
      at: EVIL,
      client: EVIL,
      tool: EVIL,
      decision: EVIL,
      reason: EVIL,
      risk: EVIL,
      ran: EVIL,
      result: EVIL
    });
    open([entry, runEntry({ ran: EVIL, result: EVIL })]);
    expect(view.node.querySelector('img')).toBeNull();
    const [block, run] = blocks(view);
    for (const key of ['at', 'client', 'tool', 'decision', 'reason', 'risk']) {
      expect(field(block, key)).toBe(EVIL);
    }
    expect(block.getAttribute(OUTSIDE_TOOL_ATTRIBUTE)).toBe(EVIL);
    expect(
      block.querySelector('pre.qloop-outside-entry-code')!.textContent
    ).toBe(EVIL);
    expect(
      run.querySelector('pre.qloop-outside-entry-result')!.textContent
    ).toBe(EVIL);
    expect((window as unknown as { hacked?: number }).hacked).toBeUndefined();
  });

  it('shows the first part of a long result', () => {
    const result = 'x'.repeat(RESULT_SHOWN + 10);
    open([runEntry({ result, result_chars: 9000 })]);
    const [block] = blocks(view);
    expect(
      block.querySelector('pre.qloop-outside-entry-result')!.textContent
    ).toHaveLength(RESULT_SHOWN);
    expect(block.querySelector('.qloop-outside-entry-more')!.textContent).toBe(
      '… 9000 characters in all'
    );
  });

  it('Copy to cell inserts a code cell with the code at the end', () => {
    model.sharedModel.insertCell(1, {
      cell_type: 'markdown',
      source: '# End',
      metadata: {}
    });
    open([runEntry({ ran: 'df.plot()\nshow()' })]);
    const [block] = blocks(view);
    block
      .querySelector<HTMLButtonElement>('.qloop-outside-entry-copy')!
      .click();
    const cells = model.sharedModel.cells;
    expect(cells.map(cell => [cell.cell_type, cell.getSource()])).toEqual([
      ['code', 'import pandas as pd'],
      ['markdown', '# End'],
      ['code', 'df.plot()\nshow()']
    ]);
    expect(copied).toEqual([2]);
    expect(
      block.querySelector('.qloop-outside-entry-copied')!.textContent
    ).toBe('Copied as cell 3');
    // The entries are the notebook's record: copying leaves them as they were.
    expect(model.getMetadata(OUTSIDE_KEY)).toEqual({
      entries: [runEntry({ ran: 'df.plot()\nshow()' })]
    });
  });

  it('follows the metadata as it changes', () => {
    open(null);
    expect(
      view.node.querySelector('.qloop-outside-view-empty')!.textContent
    ).toBe("No outside agent's call is saved in this notebook.");
    expect(blocks(view)).toHaveLength(0);
    saveOutsideEntry(model, runEntry());
    expect(blocks(view)).toHaveLength(1);
    saveOutsideEntry(model, runEntry({ id: 'e2', client: 'cursor' }));
    expect(blocks(view).map(block => field(block, 'client'))).toEqual([
      'claude-code',
      'cursor'
    ]);
    expect(view.node.querySelector('.qloop-outside-view-empty')).toBeNull();
    model.setMetadata(OUTSIDE_KEY, 'not entries');
    expect(blocks(view)).toHaveLength(0);
    expect(
      view.node.querySelector('.qloop-outside-view-empty')!.textContent
    ).toBe("The notebook's qloop_outside metadata is not a list of entries.");
    view.dispose();
    model.setMetadata(OUTSIDE_KEY, { entries: [runEntry()] });
  });
});

describe('Replay as an agent cell', () => {
  let model: NotebookModel;
  let view: OutsideCallsView | undefined;
  let asked: [string, JSONValue[]][];
  let warn: jest.SpyInstance;

  const record = {
    schema_version: 2,
    prompt: 'Replay the calls claude-code made'
  };

  beforeEach(() => {
    warn = quietYjsWarnings();
    model = new NotebookModel();
    asked = [];
  });

  afterEach(() => {
    view?.dispose();
    model.dispose();
    warn.mockRestore();
  });

  function open(answer: (id: string) => AgentCellAnswer): OutsideCallsView {
    view = new OutsideCallsView({
      model,
      trans,
      makeAgentCell: async (id, entries) => {
        asked.push([id, entries]);
        return answer(id);
      }
    });
    Widget.attach(view, document.body);
    return view;
  }

  function button(): HTMLButtonElement {
    return view!.node.querySelector<HTMLButtonElement>(
      '.qloop-outside-view-replay'
    )!;
  }

  function status(): string {
    return (
      view!.node.querySelector('.qloop-outside-view-replay-status')!
        .textContent ?? ''
    );
  }

  async function settled(): Promise<void> {
    for (let i = 0; i < 5; i++) {
      await Promise.resolve();
    }
  }

  it('adds the agent cell the server made, with its record, at the end', async () => {
    saveOutsideEntry(model, runEntry());
    saveOutsideEntry(model, runEntry({ id: 'e2', ran: 'x = 1' }));
    open(() => ({
      outcome: 'ok',
      cell: {
        ok: true,
        source: '%%agent\nReplay the calls claude-code made',
        record,
        steps: 2,
        own: true,
        skipped: 0
      }
    }));
    expect(button().disabled).toBe(false);
    expect(button().title).toContain('%%agent cell');
    button().click();
    await settled();
    const [[id, sent]] = asked;
    expect(sent).toEqual([runEntry(), runEntry({ id: 'e2', ran: 'x = 1' })]);
    const cells = model.sharedModel.cells;
    expect(cells).toHaveLength(1);
    expect(cells[0].id).toBe(id);
    expect(cells[0].getSource()).toBe(
      '%%agent\nReplay the calls claude-code made'
    );
    expect(cells[0].getMetadata('qloop')).toEqual(record);
    expect(status()).toBe(
      'Added agent cell 1: running it replays 2 code steps without the outside agent, after your approval (the kernel needs qloop loaded: %load_ext qloop_kernel).'
    );
  });

  it('says when the cell is received or entries were left out', async () => {
    saveOutsideEntry(model, runEntry());
    open(() => ({
      outcome: 'ok',
      cell: {
        ok: true,
        source: '%%agent\nR',
        record,
        steps: 1,
        own: false,
        skipped: 2
      }
    }));
    button().click();
    await settled();
    expect(status()).toContain(
      'Not every call is signed by your key: the cell is received, and its card shows every step before anything runs.'
    );
    expect(status()).toContain('2 unreadable entries were left out.');
  });

  it('adds nothing when the server refuses, and says why', async () => {
    saveOutsideEntry(model, runEntry());
    open(() => ({ outcome: 'failed', message: 'HTTP 403' }));
    button().click();
    await settled();
    expect(model.sharedModel.cells).toHaveLength(0);
    expect(status()).toBe('No agent cell was added: HTTP 403');
    expect(button().disabled).toBe(false);
  });

  it('is disabled while no call is saved, and absent without a server', () => {
    open(() => ({ outcome: 'failed', message: '' }));
    expect(button().disabled).toBe(true);
    saveOutsideEntry(model, runEntry());
    expect(button().disabled).toBe(false);
    view!.dispose();
    view = new OutsideCallsView({ model, trans });
    expect(view.node.querySelector('.qloop-outside-view-replay')).toBeNull();
  });
});

describe('parseAgentCell', () => {
  it('reads the server answer and refuses anything else', () => {
    const good = {
      ok: true,
      source: '%%agent\nReplay',
      record: { a: 1 },
      steps: 1,
      own: true,
      skipped: 0
    };
    expect(parseAgentCell(good)).toEqual({
      ok: true,
      source: '%%agent\nReplay',
      record: { a: 1 },
      steps: 1,
      own: true,
      skipped: 0
    });
    expect(parseAgentCell({ ...good, source: 'import os' })).toBeNull();
    expect(parseAgentCell({ ...good, record: 'x' })).toBeNull();
    expect(parseAgentCell({ ...good, own: 'yes' })).toBeNull();
    expect(parseAgentCell({ ...good, ok: false })).toBeNull();
    expect(parseAgentCell(null)).toBeNull();
  });
});

/** A notebook view as the command sees it: a path, a model, a disposed signal. */
class FakePanel implements IOutsideCallsPanel {
  readonly id = 'notebook-panel-1';
  readonly disposed = new Signal<this, void>(this);
  readonly content = { activeCellIndex: 0 };
  readonly context: {
    path: string;
    pathChanged: Signal<FakePanel, string>;
    model: NotebookModel;
  };

  constructor(path: string) {
    this.context = {
      path,
      pathChanged: new Signal<FakePanel, string>(this),
      model: new NotebookModel()
    };
  }
}

/** JupyterLab's shell (`main` takes widgets), or Notebook 7's (`main` refuses them). */
class FakeShell {
  readonly areas = { main: new Panel(), right: new Panel() };
  readonly added: [string, unknown][] = [];
  readonly activated: string[] = [];

  constructor(private readonly _mainTakes: boolean) {}

  add(widget: Widget, area: 'main' | 'right', options?: unknown): void {
    this.added.push([area, options]);
    if (area === 'right' || this._mainTakes) {
      this.areas[area].addWidget(widget);
    }
  }

  activateById(id: string): void {
    this.activated.push(id);
  }
}

describe('addOutsideCallsCommand', () => {
  function setUp(mainTakes = true) {
    const commands = new CommandRegistry();
    const shell = new FakeShell(mainTakes);
    const items: unknown[] = [];
    const palette = {
      addItem: (options: unknown) => items.push(options)
    } as unknown as ICommandPalette;
    const tracker: { currentWidget: FakePanel | null } = {
      currentWidget: null
    };
    const app = { commands, shell } as unknown as Pick<
      JupyterFrontEnd,
      'commands' | 'shell'
    >;
    addOutsideCallsCommand(app, tracker, trans, palette);
    return { commands, shell, items, tracker };
  }

  it('is in the palette under qloop, enabled while a notebook is current', () => {
    const { commands, items, tracker } = setUp();
    expect(commands.label(SHOW_OUTSIDE_CALLS)).toBe(
      "Show outside agents' calls"
    );
    expect(items).toEqual([{ command: SHOW_OUTSIDE_CALLS, category: 'qloop' }]);
    expect(commands.isEnabled(SHOW_OUTSIDE_CALLS)).toBe(false);
    tracker.currentWidget = new FakePanel('work/analysis.ipynb');
    expect(commands.isEnabled(SHOW_OUTSIDE_CALLS)).toBe(true);
  });

  it('opens one view per notebook beside it, named after it, closed with it', async () => {
    const { commands, shell, tracker } = setUp();
    const panel = new FakePanel('work/analysis.ipynb');
    tracker.currentWidget = panel;
    await commands.execute(SHOW_OUTSIDE_CALLS);
    expect(shell.areas.main.widgets).toHaveLength(1);
    const widget = shell.areas.main.widgets[0] as MainAreaWidget;
    expect(widget.content).toBeInstanceOf(OutsideCallsView);
    expect(widget.title.label).toBe('Outside agents · analysis.ipynb');
    expect(shell.added).toEqual([
      ['main', { mode: 'split-right', ref: panel.id }]
    ]);
    expect(shell.activated).toEqual([widget.id]);
    await commands.execute(SHOW_OUTSIDE_CALLS);
    expect(shell.added).toHaveLength(1);
    expect(shell.activated).toEqual([widget.id, widget.id]);
    panel.context.path = 'work/renamed.ipynb';
    panel.context.pathChanged.emit('work/renamed.ipynb');
    expect(widget.title.label).toBe('Outside agents · renamed.ipynb');
    panel.disposed.emit();
    expect(widget.isDisposed).toBe(true);
    await commands.execute(SHOW_OUTSIDE_CALLS);
    expect(shell.added).toHaveLength(2);
    panel.context.model.dispose();
  });

  it('opens the view in the side panel where the main area keeps the notebook (Notebook 7)', async () => {
    const { commands, shell, tracker } = setUp(false);
    const panel = new FakePanel('analysis.ipynb');
    tracker.currentWidget = panel;
    await commands.execute(SHOW_OUTSIDE_CALLS);
    expect(shell.added.map(([area]) => area)).toEqual(['main', 'right']);
    expect(shell.areas.right.widgets).toHaveLength(1);
    expect(shell.activated).toEqual([shell.areas.right.widgets[0].id]);
    panel.context.model.dispose();
  });
});
