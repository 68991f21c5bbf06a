/**
 * The usage panel: the server's report as tables by day, notebook and model
 * with their totals, the cap line, the count of unread ledger lines; ledger
 * text set as text; days and Refresh ask again (the latest answer wins); the
 * command opens one panel, in the main area or (Notebook 7) the side panel.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { PromiseDelegate } from '@lumino/coreutils';
import { Panel, Widget } from '@lumino/widgets';

import {
  IUsageReport,
  SHOW_USAGE,
  USAGE_STATE_ATTRIBUTE,
  UsageAnswer,
  UsageFigures,
  UsagePanel,
  addUsageCommand,
  parseUsage,
  renderUsage
} from '../src/usage';

const EVIL = '<img src=x onerror="window.hacked = 1">.ipynb';
const trans = nullTranslator.load('qloop');

function figures(
  calls: number,
  cost: number,
  unpriced = 0,
  tokens = 100
): UsageFigures {
  return {
    calls,
    steps: calls * 2,
    input_tokens: tokens * 10,
    output_tokens: tokens,
    cache_read_input_tokens: 5,
    cache_creation_input_tokens: 1,
    cost_usd: cost,
    unpriced_calls: unpriced
  };
}

function report(fields: Partial<IUsageReport> = {}): IUsageReport {
  return {
    ledger: '/home/ana/.local/share/jupyter/qloop/usage.jsonl',
    days: 30,
    since: '2026-11-08',
    unreadable_lines: 2,
    by_day: [
      { day: '2026-12-06', ...figures(1, 1) },
      { day: '2026-12-07', ...figures(3, 0.75, 1, 1234) }
    ],
    by_notebook: [
      { notebook: EVIL, ...figures(1, 0, 1) },
      { notebook: 'sales.ipynb', ...figures(3, 1.75) }
    ],
    by_model: [{ model: 'claude-haiku-5-5', ...figures(4, 1.75, 1) }],
    totals: figures(4, 1.75, 1, 1334),
    cap: {
      max_cost_per_day: 5,
      spent_today: 0.75,
      source:
        'the admin setting max_cost_per_day in /etc/jupyter/qloop_admin.json',
      resets_in: '3 h 12 min'
    },
    ...fields
  };
}

function shown(nodes: HTMLElement[]): HTMLElement {
  const host = document.createElement('div');
  host.append(...nodes);
  return host;
}

/** Each row of a table as its cells' texts. */
function rowsOf(host: HTMLElement, key: string): string[][] {
  const rows = host.querySelectorAll(`.qloop-usage-by-${key} tr`);
  return Array.from(rows).map(row =>
    Array.from(row.children).map(cell => cell.textContent ?? '')
  );
}

describe('renderUsage', () => {
  it('shows a table by day, notebook and model with totals', () => {
    const host = shown(renderUsage(report(), trans));
    expect(rowsOf(host, 'day')).toEqual([
      [
        'Day',
        'Cost (USD)',
        'Model calls',
        'Steps',
        'Input tokens',
        'Output tokens',
        'Cache read',
        'Cache write'
      ],
      ['2026-12-06', '$1.0000', '1', '2', '1,000', '100', '5', '1'],
      [
        '2026-12-07',
        '$0.7500 + 1 unpriced',
        '3',
        '6',
        '12,340',
        '1,234',
        '5',
        '1'
      ],
      ['Total', '$1.7500 + 1 unpriced', '4', '8', '13,340', '1,334', '5', '1']
    ]);
    expect(rowsOf(host, 'notebook').map(row => row.slice(0, 2))).toEqual([
      ['Notebook', 'Cost (USD)'],
      [EVIL, 'unknown'],
      ['sales.ipynb', '$1.7500'],
      ['Total', '$1.7500 + 1 unpriced']
    ]);
    expect(rowsOf(host, 'model').map(row => row[0])).toEqual([
      'Model',
      'claude-haiku-5-5',
      'Total'
    ]);
    expect(host.querySelector('.qloop-usage-totals')?.textContent).toBe(
      'Last 30 days (since 2026-11-08): $1.7500 + 1 unpriced over 4 model calls and 8 steps; 13,340 input, 1,334 output, 5 cache read and 1 cache write tokens.'
    );
  });

  it('sets ledger text as text, never as HTML', () => {
    const host = shown(renderUsage(report({ ledger: '<b>ledger</b>' }), trans));
    expect(host.querySelector('img')).toBeNull();
    expect(host.querySelector('b')).toBeNull();
    expect(host.textContent).toContain(EVIL);
    expect(host.querySelector('.qloop-usage-ledger')?.textContent).toBe(
      'Ledger: <b>ledger</b>'
    );
  });

  it("shows today's spend against the admin's cap, and when it is reached", () => {
    const host = shown(renderUsage(report(), trans));
    const cap = host.querySelector('.qloop-usage-cap')!;
    expect(cap.textContent).toBe(
      'Today: $0.7500 of the daily cap $5.00 (the admin setting max_cost_per_day in /etc/jupyter/qloop_admin.json); it resets at 00:00 UTC, in 3 h 12 min.'
    );
    expect(cap.classList.contains('qloop-usage-cap-reached')).toBe(false);
    const fill = cap.querySelector<HTMLElement>('.qloop-usage-cap-fill')!;
    expect(fill.style.width).toBe('15.0%');
    const over = report();
    over.cap!.spent_today = 5.01;
    const reached = shown(renderUsage(over, trans));
    const overCap = reached.querySelector('.qloop-usage-cap')!;
    expect(overCap.classList.contains('qloop-usage-cap-reached')).toBe(true);
    expect(
      overCap.querySelector<HTMLElement>('.qloop-usage-cap-fill')!.style.width
    ).toBe('100.0%');
    const none = shown(renderUsage(report({ cap: null }), trans));
    expect(none.querySelector('.qloop-usage-cap')?.textContent).toBe(
      'No daily spend cap is set by the admin.'
    );
  });

  it('counts the ledger lines that could not be read, and says when there is nothing', () => {
    const two = shown(renderUsage(report(), trans));
    expect(two.querySelector('.qloop-usage-unreadable')?.textContent).toBe(
      '2 lines of the ledger could not be read (skipped).'
    );
    const empty = report({
      unreadable_lines: 1,
      by_day: [],
      by_notebook: [],
      by_model: [],
      totals: figures(0, 0, 0, 0)
    });
    const host = shown(renderUsage(empty, trans));
    expect(host.querySelector('table')).toBeNull();
    expect(host.querySelector('.qloop-usage-empty')?.textContent).toBe(
      'No model calls recorded since 2026-11-08.'
    );
    expect(host.querySelector('.qloop-usage-unreadable')?.textContent).toBe(
      '1 line of the ledger could not be read (skipped).'
    );
    const clean = shown(renderUsage(report({ unreadable_lines: 0 }), trans));
    expect(clean.querySelector('.qloop-usage-unreadable')).toBeNull();
  });
});

describe('parseUsage', () => {
  it('reads a report and refuses anything else', () => {
    const good = JSON.parse(JSON.stringify(report()));
    expect(parseUsage(good)).toEqual(good);
    expect(parseUsage({ ...good, cap: null })).not.toBeNull();
    expect(parseUsage({ ...good, cap: { max_cost_per_day: 5 } })).toBeNull();
    expect(parseUsage({ ...good, totals: { calls: 1 } })).toBeNull();
    expect(
      parseUsage({ ...good, by_model: [{ ...figures(1, 1), model: 3 }] })
    ).toBeNull();
    expect(parseUsage({ ...good, by_day: 'x' })).toBeNull();
    expect(parseUsage(null)).toBeNull();
  });
});

/** A usage source whose answers the test gives, recording the days asked. */
class Source {
  readonly asked: number[] = [];
  readonly pending: PromiseDelegate<UsageAnswer>[] = [];

  get fetch(): (days: number) => Promise<UsageAnswer> {
    return days => {
      this.asked.push(days);
      const answer = new PromiseDelegate<UsageAnswer>();
      this.pending.push(answer);
      return answer.promise;
    };
  }
}

async function settle(): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, 0));
}

describe('UsagePanel', () => {
  it('asks for 30 days, then for the days chosen and on Refresh; the latest answer wins', async () => {
    const source = new Source();
    const panel = new UsagePanel(source.fetch, trans);
    expect(source.asked).toEqual([30]);
    expect(panel.node.getAttribute(USAGE_STATE_ATTRIBUTE)).toBe('loading');
    const select = panel.node.querySelector('select')!;
    expect(Array.from(select.options).map(o => o.textContent)).toEqual([
      'Last 7 days',
      'Last 30 days',
      'Last 90 days'
    ]);
    select.value = '90';
    select.dispatchEvent(new Event('change'));
    expect(source.asked).toEqual([30, 90]);
    source.pending[1].resolve({ outcome: 'ok', report: report({ days: 90 }) });
    source.pending[0].resolve({ outcome: 'ok', report: report() });
    await settle();
    expect(panel.node.getAttribute(USAGE_STATE_ATTRIBUTE)).toBe('ready');
    expect(
      panel.node.querySelector('.qloop-usage-totals')?.textContent
    ).toMatch(/^Last 90 days/);
    panel.node
      .querySelector<HTMLButtonElement>('.qloop-usage-refresh')!
      .click();
    expect(source.asked).toEqual([30, 90, 90]);
    source.pending[2].resolve({ outcome: 'failed', message: 'HTTP 503' });
    await settle();
    expect(panel.node.getAttribute(USAGE_STATE_ATTRIBUTE)).toBe('failed');
    expect(panel.node.querySelector('.qloop-usage-status')?.textContent).toBe(
      'The usage could not be read: HTTP 503'
    );
    panel.dispose();
  });
});

/** JupyterLab's shell (`main` takes widgets), or Notebook 7's (`main` refuses them). */
class FakeShell {
  readonly areas = { main: new Panel(), right: new Panel() };
  readonly added: string[] = [];
  readonly activated: string[] = [];

  constructor(private readonly _mainTakes: boolean) {}

  add(widget: Widget, area: 'main' | 'right'): void {
    this.added.push(area);
    if (area === 'right' || this._mainTakes) {
      this.areas[area].addWidget(widget);
    }
  }

  activateById(id: string): void {
    this.activated.push(id);
  }
}

describe('addUsageCommand', () => {
  function setUp(mainTakes: boolean) {
    const commands = new CommandRegistry();
    const shell = new FakeShell(mainTakes);
    const items: unknown[] = [];
    const palette = {
      addItem: (options: unknown) => items.push(options)
    } as unknown as ICommandPalette;
    const source = new Source();
    const app = { commands, shell } as unknown as Pick<
      JupyterFrontEnd,
      'commands' | 'shell'
    >;
    addUsageCommand(app, source.fetch, trans, palette);
    return { commands, shell, items, source };
  }

  it('is in the palette under qloop and opens one panel in the main area', async () => {
    const { commands, shell, items, source } = setUp(true);
    expect(commands.label(SHOW_USAGE)).toBe('Show qloop usage');
    expect(items).toEqual([{ command: SHOW_USAGE, category: 'qloop' }]);
    await commands.execute(SHOW_USAGE);
    expect(shell.added).toEqual(['main']);
    const widget = shell.areas.main.widgets[0] as MainAreaWidget;
    expect(widget.content).toBeInstanceOf(UsagePanel);
    expect(widget.title.label).toBe('qloop usage');
    await commands.execute(SHOW_USAGE);
    expect(shell.added).toEqual(['main']); // the same panel, asked again
    expect(source.asked).toEqual([30, 30]);
    expect(shell.activated).toEqual([widget.id, widget.id]);
    widget.dispose();
    await commands.execute(SHOW_USAGE);
    expect(shell.added).toEqual(['main', 'main']);
  });

  it('opens the panel in the side panel where the main area keeps the notebook (Notebook 7)', async () => {
    const { commands, shell } = setUp(false);
    await commands.execute(SHOW_USAGE);
    expect(shell.added).toEqual(['main', 'right']);
    expect(shell.areas.right.widgets).toHaveLength(1);
    expect(shell.activated).toEqual([shell.areas.right.widgets[0].id]);
  });
});
