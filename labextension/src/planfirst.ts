/**
 * Plan first in the notebook: the "Plan first" toggle of an agent cell
 * (`qloop:toggle-plan-first`, in the cell's context menu and the palette),
 * which adds or removes `--plan` on its `%%agent` line, and what the plan
 * list's buttons (`plan.ts`) ask of the notebook: Run plan inserts a
 * `%%agent --run-plan` cell below the plan's cell, with the plan cell's other
 * options and the (edited) plan as its text, and runs it; Discard runs
 * `%agent --discard-plan` silently, so the kernel forgets its kept plan.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';

/* eslint-disable jupyter/prefer-lazy-imports -- every notebook view listens for
   the plan list's events at once, and these are a few hundred bytes. */
import { TRANSLATION_DOMAIN } from './labels';
import { eachPanel } from './notebooks';
import { DISCARD_PLAN_EVENT, IRunPlanDetail, RUN_PLAN_EVENT } from './plan';
/* eslint-enable jupyter/prefer-lazy-imports */

/** The command of the toggle. */
export const TOGGLE_PLAN_FIRST = 'qloop:toggle-plan-first';
/** What the kernel runs for Discard. */
export const DISCARD_PLAN_CODE = '%agent --discard-plan';
const CELL_MAGIC = '%%agent';
// The options followed by a value word (qloop_kernel/notebook/options.py; tests/test_plan.py
// holds the two lists to each other).
export const VALUED_FLAGS = [
  '--approve',
  '--max-turns',
  '--max-cost',
  '--max-tokens',
  '--timeout',
  '--code-timeout',
  '--model',
  '--provider',
  '--with'
];
// Options of the plan cell a run of its plan does not take.
const NOT_CARRIED = [
  '--plan',
  '--run-plan',
  '--discard-plan',
  '--new',
  '--fresh'
];

/** An option of the `%%agent` line: its flag, with its value where it takes one. */
type OptionWords = string[];

/** The `%%agent` line of a cell's source split: its options, the rest of the line, the body. */
export function agentLine(
  source: string
): { options: OptionWords[]; rest: string; body: string | null } | null {
  const [first, ...body] = source.split('\n');
  const line = first.trim();
  if (line !== CELL_MAGIC && !line.startsWith(CELL_MAGIC + ' ')) {
    return null;
  }
  const words = line
    .slice(CELL_MAGIC.length)
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  const options: OptionWords[] = [];
  let index = 0;
  while (index < words.length && words[index].startsWith('--')) {
    const valued =
      VALUED_FLAGS.includes(words[index]) && index + 1 < words.length;
    options.push(words.slice(index, index + (valued ? 2 : 1)));
    index += valued ? 2 : 1;
  }
  const rest = words.slice(index).join(' ');
  return { options, rest, body: body.length ? body.join('\n') : null };
}

function joinSource(
  options: OptionWords[],
  rest: string,
  body: string | null
): string {
  const line = [CELL_MAGIC, ...options.flat(), ...(rest ? [rest] : [])].join(
    ' '
  );
  return body === null ? line : `${line}\n${body}`;
}

/** Whether a cell's `%%agent` line has `--plan`. */
export function isPlanFirst(source: string): boolean {
  return agentLine(source)?.options.some(o => o[0] === '--plan') ?? false;
}

/** The source with `--plan` added to (`on`) or removed from its `%%agent` line; other options kept. */
export function withPlanFirst(source: string, on: boolean): string {
  const parsed = agentLine(source);
  if (parsed === null) {
    return source;
  }
  const options = parsed.options.filter(o => o[0] !== '--plan');
  return joinSource(
    on ? [['--plan'], ...options] : options,
    parsed.rest,
    parsed.body
  );
}

/** The source of the cell that runs `plan`, with the plan cell's other options. */
export function runPlanSource(planSource: string, plan: string): string {
  const options = agentLine(planSource)?.options ?? [];
  const carried = options.filter(o => !NOT_CARRIED.includes(o[0]));
  return joinSource([['--run-plan'], ...carried], '', plan);
}

/** The index of the notebook's cell whose node holds the event's target, or -1. */
function cellIndexOf(panel: NotebookPanel, event: Event): number {
  const target = event.target as Node | null;
  return panel.content.widgets.findIndex(
    cell => target !== null && cell.node.contains(target)
  );
}

/** Run a plan below its cell, and drop the kernel's plan on Discard, in one notebook view. */
export function acceptPlans(panel: NotebookPanel): void {
  const notebook = panel.content;
  notebook.node.addEventListener(RUN_PLAN_EVENT, event => {
    const detail = (event as CustomEvent<IRunPlanDetail>).detail;
    const index = cellIndexOf(panel, event);
    const model = notebook.model;
    if (index < 0 || !model || typeof detail?.plan !== 'string') {
      return;
    }
    event.stopPropagation();
    const source = model.cells.get(index).sharedModel.getSource();
    model.sharedModel.insertCell(index + 1, {
      cell_type: 'code',
      source: runPlanSource(source, detail.plan),
      metadata: {}
    });
    notebook.activeCellIndex = index + 1;
    notebook.deselectAll();
    void NotebookActions.run(notebook, panel.sessionContext);
  });
  notebook.node.addEventListener(DISCARD_PLAN_EVENT, event => {
    if (cellIndexOf(panel, event) < 0) {
      return;
    }
    event.stopPropagation();
    const kernel = panel.sessionContext.session?.kernel;
    kernel?.requestExecute({
      code: DISCARD_PLAN_CODE,
      silent: true,
      store_history: false
    });
  });
}

/** The toggle command, in the palette and the context menu of code cells. */
function addToggle(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  palette: ICommandPalette | null,
  trans: TranslationBundle
): void {
  const active = () => tracker.currentWidget?.content.activeCell ?? null;
  const source = () => active()?.model.sharedModel.getSource() ?? '';
  app.commands.addCommand(TOGGLE_PLAN_FIRST, {
    label: trans.__('Plan first'),
    caption: trans.__(
      'Add or remove --plan on the selected agent cell: the agent answers with a plan and runs nothing'
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isEnabled: () =>
      active()?.model.type === 'code' && agentLine(source()) !== null,
    isToggled: () => isPlanFirst(source()),
    execute: () => {
      const cell = active();
      if (cell === null || agentLine(source()) === null) {
        return;
      }
      cell.model.sharedModel.setSource(
        withPlanFirst(source(), !isPlanFirst(source()))
      );
    }
  });
  palette?.addItem({ command: TOGGLE_PLAN_FIRST, category: trans.__('qloop') });
  app.contextMenu.addItem({
    command: TOGGLE_PLAN_FIRST,
    selector: '.jp-Notebook .jp-CodeCell',
    rank: 60
  });
}

/** Plan first: the toggle, and the plan list's Run plan and Discard in every notebook view. */
export const planFirstPlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:plan-first',
  description:
    'Toggles plan first on agent cells, and runs or discards the plans of plan turns.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null,
    palette: ICommandPalette | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    eachPanel(tracker, acceptPlans);
    addToggle(app, tracker, palette, trans);
  }
};
