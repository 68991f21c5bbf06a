/**
 * Plan first in the page: the plan list (Edit, Run plan, Discard), the text
 * Run plan sends, the cell that runs it and the Plan first toggle.
 */
import { MimeModel } from '@jupyterlab/rendermime';
import { ReadonlyPartialJSONValue } from '@lumino/coreutils';
import { readFileSync } from 'fs';
import { join } from 'path';

import {
  DISCARD_PLAN_EVENT,
  DISCARDED_CLASS,
  IRunPlanDetail,
  PLAN_MIME,
  PlanRenderer,
  RUN_PLAN_EVENT,
  planText
} from '../src/plan';
import { isPlanFirst, runPlanSource, withPlanFirst } from '../src/planfirst';
import { rendererOptions } from './rendering';

const vectors: { texts: { steps: string[]; text: string }[] } = JSON.parse(
  readFileSync(join(__dirname, 'plan-vectors.json'), 'utf-8')
);
const STEPS = ['Drop the rows of df with nulls.', 'Plot a by index,\ntitled.'];

async function render(data: unknown): Promise<PlanRenderer> {
  const renderer = new PlanRenderer(rendererOptions(PLAN_MIME));
  document.body.appendChild(renderer.node);
  await renderer.renderModel(
    new MimeModel({ data: { [PLAN_MIME]: data as ReadonlyPartialJSONValue } })
  );
  return renderer;
}

function click(node: HTMLElement, selector: string): void {
  (node.querySelector(selector) as HTMLButtonElement).click();
}

afterEach(() => {
  document.body.textContent = '';
});

describe('planText', () => {
  it('writes a plan as the kernel does', () => {
    for (const { steps, text } of vectors.texts) {
      expect(planText(steps)).toBe(text);
    }
  });
});

describe('PlanRenderer', () => {
  it('shows the steps as text and sends nothing until a button is clicked', async () => {
    const sent: string[] = [];
    document.body.addEventListener(RUN_PLAN_EVENT, () => sent.push('run'));
    const renderer = await render({ steps: [...STEPS, '<img src=x>'] });
    const items = renderer.node.querySelectorAll('li');
    expect(Array.from(items).map(i => i.textContent)).toEqual([
      ...STEPS,
      '<img src=x>'
    ]);
    expect(renderer.node.querySelector('img')).toBeNull();
    expect(sent).toEqual([]);
  });

  it('runs the plan as edited: a step changed, moved, removed and added', async () => {
    const renderer = await render({ steps: [...STEPS, 'Save it.'] });
    const plans: string[] = [];
    document.body.addEventListener(RUN_PLAN_EVENT, event =>
      plans.push((event as CustomEvent<IRunPlanDetail>).detail.plan)
    );
    const node = renderer.node;
    click(node, '.qloop-plan-edit');
    const first = node.querySelector('textarea')!;
    first.value = 'Drop the rows with nulls in a.';
    first.dispatchEvent(new Event('input'));
    click(node.querySelectorAll('li')[2] as HTMLElement, '.qloop-plan-up');
    click(node.querySelectorAll('li')[2] as HTMLElement, '.qloop-plan-remove');
    click(node, '.qloop-plan-add');
    const added = node.querySelectorAll('textarea')[2];
    added.value = 'Print the shape.';
    added.dispatchEvent(new Event('input'));
    click(node, '.qloop-plan-edit'); // Done
    expect(node.querySelector('textarea')).toBeNull();
    click(node, '.qloop-plan-run');
    expect(plans).toEqual([
      '1. Drop the rows with nulls in a.\n2. Save it.\n3. Print the shape.'
    ]);
  });

  it('runs an unedited plan as the kernel kept it', async () => {
    const renderer = await render({ steps: STEPS });
    expect(renderer.plan).toBe(vectors.texts[0].text);
  });

  it('folds the list on Discard and tells the notebook', async () => {
    const renderer = await render({ steps: STEPS });
    let discarded = 0;
    document.body.addEventListener(DISCARD_PLAN_EVENT, () => discarded++);
    click(renderer.node, '.qloop-plan-discard');
    expect(discarded).toBe(1);
    expect(renderer.hasClass(DISCARDED_CLASS)).toBe(true);
    expect(renderer.node.querySelector('ol')).toBeNull();
    expect(renderer.node.textContent).toBe('Plan discarded (2 steps)');
  });

  it('says so when the output is not a plan', async () => {
    const renderer = await render({ steps: [1, 2] });
    expect(renderer.node.textContent).toContain('unreadable qloop plan');
  });
});

describe('the cell that runs a plan', () => {
  it('keeps the plan cell options but --plan, --new and --fresh, and holds the plan', () => {
    expect(
      runPlanSource(
        '%%agent --plan --approve auto --new --model m --with df Clean df.\nand plot it',
        '1. Drop.'
      )
    ).toBe('%%agent --run-plan --approve auto --model m --with df\n1. Drop.');
    expect(runPlanSource('print(1)', '1. Drop.')).toBe(
      '%%agent --run-plan\n1. Drop.'
    );
  });
});

describe('Plan first', () => {
  it('adds and removes --plan on the %%agent line, other options intact', () => {
    const source =
      '%%agent --approve auto --max-cost 0.5 Clean df\nand plot it.';
    const on = withPlanFirst(source, true);
    expect(on).toBe(
      '%%agent --plan --approve auto --max-cost 0.5 Clean df\nand plot it.'
    );
    expect(isPlanFirst(on)).toBe(true);
    expect(withPlanFirst(on, false)).toBe(source);
    expect(isPlanFirst(source)).toBe(false);
    expect(withPlanFirst('%%agent\nClean df.', true)).toBe(
      '%%agent --plan\nClean df.'
    );
    expect(withPlanFirst('%%agent --with --plan --plan x', false)).toBe(
      '%%agent --with --plan x'
    );
    expect(withPlanFirst('print(1)', true)).toBe('print(1)');
    expect(isPlanFirst('%%agent Use --plan in the text')).toBe(false);
  });
});
