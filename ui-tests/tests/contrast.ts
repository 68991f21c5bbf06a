/**
 * Contrast measurements shared by the theme specs (JupyterLab and Notebook 7).
 *
 * The probe is the approval card's code as `highlight()` makes it (run in
 * $PYTHON), the status lines and the badges, styled by the repository's
 * labextension/style/base.css and put into the page's notebook. Ratios are
 * WCAG contrast ratios of computed colours against the composited
 * background.
 */
import { Page } from '@playwright/test';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { REPOSITORY_ROOT, expect } from './fixtures';

/** Code with every kind of token the highlighter marks. */
export const SAMPLE = [
  'import os',
  'def load(path="data.csv", *, rows=10_000, scale=2.5):',
  '    """Read it."""',
  '    if path is not None and rows > 0x10:',
  '        return {"p": f"{path!r}", "n": len(os.listdir("."))}',
  "    raise ValueError('no') from None"
].join('\n');

/** What the same code reads at in JupyterLab 4's own code cells (issue 15's measurements). */
export const CELL_FLOOR: Record<string, number> = {
  'JupyterLab Light': 4.2,
  'JupyterLab Dark': 4.8
};

/** The smallest ratio among the measured elements, and which one it was. */
export interface IContrast {
  min: number;
  worst: string;
}

/** What the probe measures: card code tokens, status lines, badges. */
export interface IProbeContrast {
  card: IContrast;
  lines: IContrast;
  badges: IContrast;
}

const PROBE_ID = 'qloop-theme-probe';

const CSS = fs.readFileSync(
  path.join(REPOSITORY_ROOT, 'labextension', 'style', 'base.css'),
  'utf-8'
);

function cardCode(): string {
  const python = process.env.PYTHON || 'python';
  return execFileSync(
    python,
    [
      '-c',
      'import sys; from qloop_kernel.notebook.approval import highlight; ' +
        'print(highlight(sys.stdin.read()))'
    ],
    { input: SAMPLE, encoding: 'utf-8' }
  );
}

const LINES = ['info', 'ok', 'warn', 'error']
  .map(kind => `<div class="qloop-line qloop-${kind}">a ${kind} line</div>`)
  .join('');
const STATUSES = ['completed', 'running', 'timeout', 'error', 'unknown-state']
  .map(s => `<span class="qloop-status" data-qloop-status="${s}">${s}</span>`)
  .join(' ');
const RISKS = ['read', 'write', 'compute', 'destructive']
  .map(
    r =>
      `<span class="qloop-risk qloop-risk-${r}" style="color:red;border:1px solid red">${r}</span>`
  )
  .join(' ');

/** Minimum contrast of the text in `selector` (inside `root`) against its background. */
export async function minContrast(
  page: Pick<Page, 'evaluate'>,
  root: string,
  selector: string
): Promise<IContrast> {
  return page.evaluate(
    ({ root, selector }) => {
      const canvas = document.createElement('canvas');
      canvas.width = canvas.height = 1;
      const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
      const rgba = (css: string): number[] => {
        ctx.clearRect(0, 0, 1, 1);
        ctx.fillStyle = '#000';
        ctx.fillStyle = css;
        ctx.fillRect(0, 0, 1, 1);
        const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
        return [r, g, b, a / 255];
      };
      const over = (top: number[], under: number[]): number[] =>
        [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
      const background = (el: Element | null): number[] => {
        const layers: number[][] = [];
        for (let node = el; node; node = node.parentElement) {
          const colour = rgba(getComputedStyle(node).backgroundColor);
          if (colour[3] > 0) {
            layers.push(colour);
            if (colour[3] >= 1) {
              break;
            }
          }
        }
        let result = [255, 255, 255];
        for (const layer of layers.reverse()) {
          result = over(layer, result);
        }
        return result;
      };
      const luminance = (c: number[]): number => {
        const [r, g, b] = c.map(v => {
          const s = v / 255;
          return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      let min = Infinity;
      let worst = '';
      const base = document.querySelector(root)!;
      for (const el of Array.from(base.querySelectorAll(selector))) {
        if (!el.textContent || !el.textContent.trim()) {
          continue;
        }
        const bg = background(el);
        const fg = over(rgba(getComputedStyle(el).color), bg);
        const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
        const ratio = (hi + 0.05) / (lo + 0.05);
        if (ratio < min) {
          min = ratio;
          worst = `${el.textContent.trim().slice(0, 20)} (${getComputedStyle(el).color})`;
        }
      }
      return { min, worst };
    },
    { root, selector }
  );
}

/** The contrast of SAMPLE's tokens in the first code cell of the page's notebook. */
export async function cellCodeContrast(
  page: Pick<Page, 'evaluate'>
): Promise<IContrast> {
  return minContrast(
    page,
    '.jp-Notebook .jp-Cell .cm-content',
    '.cm-line span, .cm-line'
  );
}

/**
 * Put the probe (card code, status lines, badges, styled by base.css) into
 * the page's notebook and measure it.
 */
export async function probeContrast(
  page: Pick<Page, 'evaluate'>
): Promise<IProbeContrast> {
  await page.evaluate(
    ({ css, body, id }) => {
      document.getElementById(id)?.remove();
      const style = document.createElement('style');
      style.textContent = css;
      document.head.appendChild(style);
      const area = document.createElement('div');
      area.id = id;
      area.className = 'jp-OutputArea-output';
      area.innerHTML = body;
      document.querySelector('.jp-Notebook')!.appendChild(area);
    },
    {
      css: CSS,
      body: `${cardCode()}${LINES}<p>${STATUSES}</p><p>${RISKS}</p>`,
      id: PROBE_ID
    }
  );
  return {
    card: await minContrast(page, `#${PROBE_ID} .qloop-code`, 'span'),
    lines: await minContrast(page, `#${PROBE_ID}`, '.qloop-line'),
    badges: await minContrast(page, `#${PROBE_ID}`, '.qloop-status, .qloop-risk')
  };
}

/** One line for the test log: every figure and its worst element. */
export function describeContrast(
  label: string,
  cell: IContrast,
  probe: IProbeContrast
): string {
  const { card, lines, badges } = probe;
  return (
    `${label}: code cell ${cell.min.toFixed(2)} (${cell.worst}), card code ` +
    `${card.min.toFixed(2)} (${card.worst}), lines ${lines.min.toFixed(2)}, ` +
    `badges ${badges.min.toFixed(2)} (${badges.worst})`
  );
}

/**
 * Issue 15's bar: card code at least as legible as the same code in a code
 * cell of that theme and at least `CELL_FLOOR`; status lines and badges 4.5:1.
 */
export function expectReadable(
  theme: string,
  cell: IContrast,
  probe: IProbeContrast
): void {
  expect(cell.min).toBeLessThan(Infinity); // the cell's tokens were measured
  expect(probe.card.min).toBeGreaterThanOrEqual(cell.min - 0.01);
  expect(probe.card.min).toBeGreaterThanOrEqual(CELL_FLOOR[theme]);
  expect(probe.lines.min).toBeGreaterThanOrEqual(4.5);
  expect(probe.badges.min).toBeGreaterThanOrEqual(4.5);
}
