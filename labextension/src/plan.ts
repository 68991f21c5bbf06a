/**
 * The plan of a `%%agent --plan` turn (`application/vnd.qloop.plan+json`,
 * `{"steps": [...], "task": ..., "cell_id": ...}`): a numbered list with
 * Run plan, Edit and Discard. Edit makes each step a text box, with buttons
 * to move it up or down, remove it, and add a step.
 *
 * The renderer has no access to the notebook: Run plan sends a bubbling
 * `qloop:run-plan` DOM event with the plan's text, Discard a
 * `qloop:discard-plan` event, and the notebook plugin in `planfirst.ts` runs
 * the plan in a `%%agent --run-plan` cell below the plan's cell, or drops the
 * kernel's kept plan. Nothing runs before Run plan.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { TRANSLATION_DOMAIN } from './labels';

/** The MIME type of a plan. */
export const PLAN_MIME = 'application/vnd.qloop.plan+json';
/** The DOM event of Run plan; its detail is an `IRunPlanDetail`. */
export const RUN_PLAN_EVENT = 'qloop:run-plan';
/** The DOM event of Discard. */
export const DISCARD_PLAN_EVENT = 'qloop:discard-plan';
/** Class of the renderer's root node. */
export const PLAN_CLASS = 'qloop-plan-output';
/** Class of the root node while the steps are edited. */
export const EDITING_CLASS = 'qloop-plan-editing';
/** Class of the root node once the plan is discarded (the list is folded). */
export const DISCARDED_CLASS = 'qloop-plan-discarded';
// A step's further lines, under its text: as the kernel writes them (plan.py).
const INDENT = '   ';

/** The detail of a Run plan event. */
export interface IRunPlanDetail {
  /** The plan as the turn receives it: numbered steps, one a line. */
  plan: string;
}

/** The steps of a plan output, or null when it is not one. */
export function planSteps(data: unknown): string[] | null {
  const steps = (data as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps) || !steps.every(s => typeof s === 'string')) {
    return null;
  }
  return steps as string[];
}

/** A step as the plan holds it: its lines trimmed, blank lines left out. */
function cleanStep(step: string): string {
  return step
    .split('\n')
    .map(line => line.trim())
    .filter(line => line !== '')
    .join('\n');
}

/** The plan's text as the turn receives it (the kernel's `plan_text`); empty steps are left out. */
export function planText(steps: readonly string[]): string {
  return steps
    .map(cleanStep)
    .filter(step => step !== '')
    .map((step, i) => `${i + 1}. ${step.split('\n').join('\n' + INDENT)}`)
    .join('\n');
}

function button(
  label: string,
  title: string,
  className: string,
  onClick: () => void
): HTMLButtonElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.className = `${className} jp-mod-styled`;
  node.textContent = label;
  node.title = title;
  node.setAttribute('aria-label', title);
  node.addEventListener('click', onClick);
  return node;
}

/** Renders `application/vnd.qloop.plan+json` outputs. */
export class PlanRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.addClass(PLAN_CLASS);
    this._trans = (options.translator ?? nullTranslator).load(
      TRANSLATION_DOMAIN
    );
  }

  /** Show the plan's steps (a re-render keeps the user's edits of the same plan). */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const steps = planSteps(model.data[PLAN_MIME]);
    if (steps === null) {
      this.node.textContent = this._trans.__(
        'unreadable qloop plan: expected {"steps": ["<text>", ...]}'
      );
      return;
    }
    const key = JSON.stringify(steps);
    if (key !== this._proposed) {
      this._proposed = key;
      this._steps = [...steps];
    }
    this._render();
  }

  /** The plan as Run plan would send it now. */
  get plan(): string {
    return planText(this._steps);
  }

  private _render(): void {
    const trans = this._trans;
    this.node.textContent = '';
    this.toggleClass(EDITING_CLASS, this._editing);
    this.toggleClass(DISCARDED_CLASS, this._discarded);
    const title = document.createElement('div');
    title.className = 'qloop-plan-title';
    title.textContent = this._discarded
      ? trans._n(
          'Plan discarded (%1 step)',
          'Plan discarded (%1 steps)',
          this._steps.length
        )
      : trans.__('Plan: nothing has run. Read or edit it, then run it.');
    this.node.appendChild(title);
    if (this._discarded) {
      return;
    }
    const list = document.createElement('ol');
    list.className = 'qloop-plan-steps';
    this._steps.forEach((step, index) =>
      list.appendChild(this._editing ? this._editor(index) : this._item(step))
    );
    this.node.appendChild(list);
    this.node.appendChild(this._actions());
  }

  private _item(step: string): HTMLElement {
    const item = document.createElement('li');
    item.className = 'qloop-plan-step';
    item.textContent = step; // untrusted: text, never HTML
    return item;
  }

  private _editor(index: number): HTMLElement {
    const trans = this._trans;
    const item = document.createElement('li');
    item.className = 'qloop-plan-step';
    const input = document.createElement('textarea');
    input.className = 'qloop-plan-step-input';
    input.value = this._steps[index];
    input.rows = Math.max(1, input.value.split('\n').length);
    input.setAttribute('aria-label', trans.__('Step %1', String(index + 1)));
    input.addEventListener('input', () => {
      this._steps[index] = input.value;
    });
    const move = (to: number) => () => {
      const [step] = this._steps.splice(index, 1);
      this._steps.splice(to, 0, step);
      this._render();
    };
    const tools = document.createElement('span');
    tools.className = 'qloop-plan-step-tools';
    const up = button(
      '↑',
      trans.__('Move step up'),
      'qloop-plan-up',
      move(index - 1)
    );
    up.disabled = index === 0;
    const down = button(
      '↓',
      trans.__('Move step down'),
      'qloop-plan-down',
      move(index + 1)
    );
    down.disabled = index === this._steps.length - 1;
    const remove = button(
      '✕',
      trans.__('Remove step'),
      'qloop-plan-remove',
      () => {
        this._steps.splice(index, 1);
        this._render();
      }
    );
    tools.append(up, down, remove);
    const row = document.createElement('div'); // a flex row: the item keeps its number
    row.className = 'qloop-plan-step-row';
    row.append(input, tools);
    item.appendChild(row);
    return item;
  }

  private _actions(): HTMLElement {
    const trans = this._trans;
    const actions = document.createElement('div');
    actions.className = 'qloop-plan-actions';
    const run = button(
      trans.__('Run plan'),
      trans.__(
        'Run this plan in a %%agent --run-plan cell below; each step under the policy and its cards'
      ),
      'qloop-plan-run',
      () => this._send(RUN_PLAN_EVENT, { plan: this.plan })
    );
    run.disabled = this.plan === '';
    const edit = button(
      this._editing ? trans.__('Done') : trans.__('Edit'),
      this._editing
        ? trans.__('Stop editing the steps')
        : trans.__('Change, add, remove or reorder the steps'),
      'qloop-plan-edit',
      () => {
        this._editing = !this._editing;
        this._render();
      }
    );
    actions.append(run, edit);
    if (this._editing) {
      actions.appendChild(
        button(
          trans.__('Add step'),
          trans.__('Add a step at the end'),
          'qloop-plan-add',
          () => {
            this._steps.push('');
            this._render();
            const inputs = this.node.querySelectorAll('textarea');
            inputs[inputs.length - 1]?.focus();
          }
        )
      );
    }
    actions.appendChild(
      button(
        trans.__('Discard'),
        trans.__('Drop this plan: the kernel forgets it and nothing runs'),
        'qloop-plan-discard',
        () => {
          this._discarded = true;
          this._editing = false;
          this._send(DISCARD_PLAN_EVENT, {});
          this._render();
        }
      )
    );
    return actions;
  }

  private _send(type: string, detail: object): void {
    this.node.dispatchEvent(new CustomEvent(type, { bubbles: true, detail }));
  }

  private readonly _trans: TranslationBundle;
  private _proposed = '';
  private _steps: string[] = [];
  private _editing = false;
  private _discarded = false;
}
