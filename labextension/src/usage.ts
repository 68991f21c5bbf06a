/**
 * The usage panel, "qloop usage": what this user's model calls cost, from the
 * ledger their kernels write, as the Jupyter server's `qloop/usage` route
 * reports it (the same report as `qloop usage` in a terminal): tables by day,
 * by notebook and by model, the totals, lines of the ledger that could not be
 * read, and today's spend against the admin's daily cap. Opened by the command
 * "Show qloop usage" from the palette, in the main area of JupyterLab or the
 * right side panel of Notebook 7. Ledger text (notebook paths, model names)
 * is set as text.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

/* eslint-disable jupyter/prefer-lazy-imports -- a few small functions, needed
   by the plugin's activation and its panel. */
import { TRANSLATION_DOMAIN } from './labels';
import { isJSONObject } from './record';
import { element } from './dom';
/* eslint-enable jupyter/prefer-lazy-imports */

/** The command that opens the panel. */
export const SHOW_USAGE = 'qloop:show-usage';
/** Class of the panel. */
export const USAGE_CLASS = 'qloop-usage';
/** Attribute of the panel: `loading`, `ready` or `failed`. */
export const USAGE_STATE_ATTRIBUTE = 'data-qloop-usage-state';
/** The days the panel offers; the first shown is 30. */
export const USAGE_DAYS = [7, 30, 90];
const USAGE_ROUTE = 'qloop/usage';
const COUNTERS = [
  'calls',
  'steps',
  'input_tokens',
  'output_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
  'unpriced_calls'
] as const;

/** Calls, steps, the four token counters and the cost of a group of calls. */
export type UsageFigures = Record<(typeof COUNTERS)[number], number> & {
  /** USD of the calls whose price was known. */
  cost_usd: number;
};

/** Today's spend against the admin's daily cap. */
export interface IUsageCap {
  max_cost_per_day: number;
  spent_today: number;
  /** "the admin setting max_cost_per_day in <file>" */
  source: string;
  resets_in: string;
}

/** The server's usage report (`qloop_kernel/usage.py`). */
export interface IUsageReport {
  ledger: string;
  days: number;
  since: string;
  unreadable_lines: number;
  by_day: (UsageFigures & { day: string })[];
  by_notebook: (UsageFigures & { notebook: string })[];
  by_model: (UsageFigures & { model: string })[];
  totals: UsageFigures;
  cap: IUsageCap | null;
}

function isFigures(value: unknown, key?: string): value is UsageFigures {
  return (
    isJSONObject(value) &&
    typeof value['cost_usd'] === 'number' &&
    COUNTERS.every(name => typeof value[name] === 'number') &&
    (key === undefined || typeof value[key] === 'string')
  );
}

function isCap(value: unknown): value is IUsageCap {
  return (
    isJSONObject(value) &&
    typeof value['max_cost_per_day'] === 'number' &&
    typeof value['spent_today'] === 'number' &&
    typeof value['source'] === 'string' &&
    typeof value['resets_in'] === 'string'
  );
}

function isList(value: unknown, key: string): boolean {
  return Array.isArray(value) && value.every(row => isFigures(row, key));
}

/** The server's answer as a usage report, or null when it is not one. */
export function parseUsage(data: unknown): IUsageReport | null {
  if (
    !isJSONObject(data) ||
    typeof data['ledger'] !== 'string' ||
    typeof data['days'] !== 'number' ||
    typeof data['since'] !== 'string' ||
    typeof data['unreadable_lines'] !== 'number' ||
    !isList(data['by_day'], 'day') ||
    !isList(data['by_notebook'], 'notebook') ||
    !isList(data['by_model'], 'model') ||
    !isFigures(data['totals']) ||
    (data['cap'] !== null && !isCap(data['cap']))
  ) {
    return null;
  }
  return data as unknown as IUsageReport;
}

const counts = new Intl.NumberFormat('en-US');

/** USD as `qloop usage` shows it: `$0.2500`, with the calls of no known price. */
export function costText(
  figures: UsageFigures,
  trans: TranslationBundle
): string {
  if (figures.calls > 0 && figures.unpriced_calls === figures.calls) {
    return trans.__('unknown');
  }
  const cost = `$${figures.cost_usd.toFixed(4)}`;
  return figures.unpriced_calls > 0
    ? trans.__('%1 + %2 unpriced', cost, figures.unpriced_calls)
    : cost;
}

function columns(trans: TranslationBundle): [string, string][] {
  return [
    ['cost', trans.__('Cost (USD)')],
    ['calls', trans.__('Model calls')],
    ['steps', trans.__('Steps')],
    ['input_tokens', trans.__('Input tokens')],
    ['output_tokens', trans.__('Output tokens')],
    ['cache_read_input_tokens', trans.__('Cache read')],
    ['cache_creation_input_tokens', trans.__('Cache write')]
  ];
}

function cells(figures: UsageFigures, trans: TranslationBundle): string[] {
  return [
    costText(figures, trans),
    ...columns(trans)
      .slice(1)
      .map(([name]) => counts.format(figures[name as keyof UsageFigures]))
  ];
}

/** One table: a row per group, then the totals. */
function table(
  key: 'day' | 'notebook' | 'model',
  label: string,
  rows: (UsageFigures & Record<string, unknown>)[],
  totals: UsageFigures,
  trans: TranslationBundle
): HTMLElement {
  const node = element('table', `qloop-usage-table qloop-usage-by-${key}`);
  node.append(element('caption', 'qloop-usage-caption', label));
  const head = element('tr', '');
  for (const title of [label, ...columns(trans).map(([, t]) => t)]) {
    const th = element('th', '', title);
    th.scope = 'col';
    head.append(th);
  }
  node.createTHead().append(head);
  const body = node.createTBody();
  const add = (name: string, figures: UsageFigures, className: string) => {
    const row = element('tr', className);
    const th = element('th', '', name);
    th.scope = 'row';
    row.append(th, ...cells(figures, trans).map(t => element('td', '', t)));
    body.append(row);
  };
  for (const row of rows) {
    add(String(row[key]), row, 'qloop-usage-row');
  }
  add(trans.__('Total'), totals, 'qloop-usage-total');
  // A narrow panel (Notebook 7's side panel) scrolls each table sideways.
  const scroll = element('div', 'qloop-usage-table-scroll');
  scroll.append(node);
  return scroll;
}

/** The daily cap's line and bar, or the line that none is set. */
function capPart(cap: IUsageCap | null, trans: TranslationBundle): HTMLElement {
  const part = element('div', 'qloop-usage-cap');
  if (cap === null) {
    part.append(
      element(
        'p',
        'qloop-usage-cap-line',
        trans.__('No daily spend cap is set by the admin.')
      )
    );
    return part;
  }
  const reached = cap.spent_today >= cap.max_cost_per_day;
  part.classList.toggle('qloop-usage-cap-reached', reached);
  part.append(
    element(
      'p',
      'qloop-usage-cap-line',
      trans.__(
        'Today: $%1 of the daily cap $%2 (%3); it resets at 00:00 UTC, in %4.',
        cap.spent_today.toFixed(4),
        cap.max_cost_per_day.toFixed(2),
        cap.source,
        cap.resets_in
      )
    )
  );
  const bar = element('div', 'qloop-usage-cap-bar');
  const fill = element('div', 'qloop-usage-cap-fill');
  const share = Math.min(1, cap.spent_today / cap.max_cost_per_day);
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-label', trans.__("Today's spend of the daily cap"));
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', String(cap.max_cost_per_day));
  bar.setAttribute('aria-valuenow', String(cap.spent_today));
  bar.append(fill);
  part.append(bar);
  return part;
}

/** The totals in one line. */
function totalsLine(
  report: IUsageReport,
  trans: TranslationBundle
): HTMLElement {
  const { totals } = report;
  return element(
    'p',
    'qloop-usage-totals',
    trans.__(
      'Last %1 days (since %2): %3 over %4 model calls and %5 steps; %6 input, %7 output, %8 cache read and %9 cache write tokens.',
      report.days,
      report.since,
      costText(totals, trans),
      counts.format(totals.calls),
      counts.format(totals.steps),
      counts.format(totals.input_tokens),
      counts.format(totals.output_tokens),
      counts.format(totals.cache_read_input_tokens),
      counts.format(totals.cache_creation_input_tokens)
    )
  );
}

/** What the panel shows of a report. */
export function renderUsage(
  report: IUsageReport,
  trans: TranslationBundle
): HTMLElement[] {
  const shown: HTMLElement[] = [capPart(report.cap, trans)];
  if (report.totals.calls === 0) {
    shown.push(
      element(
        'p',
        'qloop-usage-empty',
        trans.__('No model calls recorded since %1.', report.since)
      )
    );
  } else {
    const { totals } = report;
    shown.push(
      totalsLine(report, trans),
      table('day', trans.__('Day'), report.by_day, totals, trans),
      table(
        'notebook',
        trans.__('Notebook'),
        report.by_notebook,
        totals,
        trans
      ),
      table('model', trans.__('Model'), report.by_model, totals, trans)
    );
  }
  if (report.unreadable_lines > 0) {
    shown.push(
      element(
        'p',
        'qloop-usage-unreadable',
        trans._n(
          '%1 line of the ledger could not be read (skipped).',
          '%1 lines of the ledger could not be read (skipped).',
          report.unreadable_lines
        )
      )
    );
  }
  shown.push(
    element('p', 'qloop-usage-ledger', trans.__('Ledger: %1', report.ledger))
  );
  return shown;
}

export type UsageAnswer =
  | { outcome: 'ok'; report: IUsageReport }
  | { outcome: 'failed'; message: string };

/** Ask the Jupyter server for the usage of the last `days` days. */
export async function fetchUsage(
  settings: ServerConnection.ISettings,
  days: number,
  trans: TranslationBundle
): Promise<UsageAnswer> {
  const url =
    URLExt.join(settings.baseUrl, USAGE_ROUTE) +
    URLExt.objectToQueryString({ days: String(days) });
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, {}, settings);
  } catch (error) {
    return { outcome: 'failed', message: String(error) };
  }
  const body: unknown = await response.json().catch(() => null);
  if (response.status === 404) {
    return {
      outcome: 'failed',
      message: trans.__(
        "The Jupyter server does not serve qloop's usage: install qloop-kernel in the server's environment and restart it."
      )
    };
  }
  if (response.status !== 200) {
    const said = isJSONObject(body) ? body['message'] : undefined;
    return {
      outcome: 'failed',
      message: typeof said === 'string' ? said : `HTTP ${response.status}`
    };
  }
  const report = parseUsage(body);
  return report
    ? { outcome: 'ok', report }
    : { outcome: 'failed', message: trans.__('not a usage report') };
}

/** Fetches the usage of a number of days. */
export type UsageSource = (days: number) => Promise<UsageAnswer>;

/** The panel: days, Refresh, and the report. */
export class UsagePanel extends Widget {
  constructor(
    private readonly _source: UsageSource,
    private readonly _trans: TranslationBundle
  ) {
    super();
    this.addClass(USAGE_CLASS);
    const trans = _trans;
    const controls = element('div', 'qloop-usage-controls');
    const label = element('label', 'qloop-usage-days-label', trans.__('Days'));
    for (const days of USAGE_DAYS) {
      const option = element('option', '', trans.__('Last %1 days', days));
      option.value = String(days);
      this._days.append(option);
    }
    this._days.value = '30';
    label.append(this._days);
    this._days.addEventListener('change', () => void this.refresh());
    this._refresh.type = 'button';
    this._refresh.textContent = trans.__('Refresh');
    this._refresh.addEventListener('click', () => void this.refresh());
    this._status.setAttribute('role', 'status');
    controls.append(label, this._refresh, this._status);
    this.node.append(controls, this._report);
    void this.refresh();
  }

  /** The days shown. */
  get days(): number {
    return Number(this._days.value);
  }

  /** Fetch the report again and show it (a later refresh wins). */
  async refresh(): Promise<void> {
    const asked = ++this._asked;
    this.node.setAttribute(USAGE_STATE_ATTRIBUTE, 'loading');
    this._status.textContent = this._trans.__('Loading…');
    const answer = await this._source(this.days);
    if (asked !== this._asked || this.isDisposed) {
      return;
    }
    if (answer.outcome === 'failed') {
      this.node.setAttribute(USAGE_STATE_ATTRIBUTE, 'failed');
      this._status.textContent = this._trans.__(
        'The usage could not be read: %1',
        answer.message
      );
      return;
    }
    this._status.textContent = '';
    this._report.replaceChildren(...renderUsage(answer.report, this._trans));
    this.node.setAttribute(USAGE_STATE_ATTRIBUTE, 'ready');
  }

  private _asked = 0;
  private readonly _days = element('select', 'qloop-usage-days');
  private readonly _refresh = element(
    'button',
    'qloop-outside-button qloop-usage-refresh'
  );
  private readonly _status = element('span', 'qloop-usage-status');
  private readonly _report = element('div', 'qloop-usage-report');
}

/** Add the command that opens the panel (one at a time), and its palette item. */
export function addUsageCommand(
  app: Pick<JupyterFrontEnd, 'commands' | 'shell'>,
  source: UsageSource,
  trans: TranslationBundle,
  palette: ICommandPalette | null
): void {
  let widget: MainAreaWidget<UsagePanel> | null = null;
  app.commands.addCommand(SHOW_USAGE, {
    label: trans.__('Show qloop usage'),
    caption: trans.__(
      "Cost, tokens and steps of this user's model calls by day, notebook and model, and the daily cap"
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    execute: () => {
      if (widget === null || widget.isDisposed) {
        widget = new MainAreaWidget({ content: new UsagePanel(source, trans) });
        widget.id = 'qloop-usage';
        widget.title.label = trans.__('qloop usage');
        widget.title.closable = true;
        app.shell.add(widget, 'main');
        if (widget.parent === null) {
          // Notebook 7 keeps its main area for the notebook: the side panel.
          app.shell.add(widget, 'right', { rank: 1000 });
        }
      } else {
        void widget.content.refresh();
      }
      app.shell.activateById(widget.id);
    }
  });
  palette?.addItem({ command: SHOW_USAGE, category: trans.__('qloop') });
}

/** The usage panel and its command, in JupyterLab and Notebook 7. */
export const usagePlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:usage',
  description:
    "Shows the cost, tokens and steps of the user's qloop model calls by day, notebook and model, and the admin's daily cap.",
  autoStart: true,
  optional: [ITranslator, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    translator: ITranslator | null,
    palette: ICommandPalette | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const settings = app.serviceManager.serverSettings;
    addUsageCommand(
      app,
      days => fetchUsage(settings, days, trans),
      trans,
      palette
    );
  }
};
