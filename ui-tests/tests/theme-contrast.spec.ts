/**
 * Colours read in every theme: the contrast of the approval card's code
 * tokens, the status lines and the badges against their backgrounds, from
 * computed styles, in JupyterLab Light and Dark.
 *
 * The card's code is the HTML `highlight()` makes (run in $PYTHON) styled by
 * the repository's labextension/style/base.css; its tokens must read at least
 * as well as the same code in one of JupyterLab's own code cells in that
 * theme (and at least the figures measured in those cells: 4.2:1 in Light,
 * 4.8:1 in Dark). Status lines and badges need 4.5:1.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { expect, REPOSITORY_ROOT, test } from './fixtures';

const SAMPLE = [
  'import os',
  'def load(path="data.csv", *, rows=10_000, scale=2.5):',
  '    """Read it."""',
  '    if path is not None and rows > 0x10:',
  '        return {"p": f"{path!r}", "n": len(os.listdir("."))}',
  "    raise ValueError('no') from None"
].join('\n');

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
async function minContrast(
  page: IJupyterLabPageFixture,
  root: string,
  selector: string
): Promise<{ min: number; worst: string }> {
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

/** What the same code reads at in JupyterLab 4's own code cells (issue 15's measurements). */
const CELL_FLOOR: Record<string, number> = {
  'JupyterLab Light': 4.2,
  'JupyterLab Dark': 4.8
};

for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
  test.describe(`theme colours (${theme})`, () => {
    test('card code, status lines and badges read well', async ({ page }) => {
      await page.theme.setTheme(theme);
      await page.notebook.createNew();
      await page.notebook.setCell(0, 'code', SAMPLE);
      await page.notebook.enterCellEditingMode(0);
      await page.notebook.leaveCellEditingMode(0);
      const cellCode = await minContrast(
        page,
        '.jp-Notebook .jp-Cell .cm-content',
        '.cm-line span, .cm-line'
      );

      const html = cardCode();
      await page.evaluate(
        ({ css, body }) => {
          const style = document.createElement('style');
          style.textContent = css;
          document.head.appendChild(style);
          const area = document.createElement('div');
          area.id = 'qloop-theme-probe';
          area.className = 'jp-OutputArea-output';
          area.innerHTML = body;
          document.querySelector('.jp-Notebook')!.appendChild(area);
        },
        { css: CSS, body: `${html}${LINES}<p>${STATUSES}</p><p>${RISKS}</p>` }
      );
      const card = await minContrast(
        page,
        '#qloop-theme-probe .qloop-code',
        'span'
      );
      const lines = await minContrast(
        page,
        '#qloop-theme-probe',
        '.qloop-line'
      );
      const badges = await minContrast(
        page,
        '#qloop-theme-probe',
        '.qloop-status, .qloop-risk'
      );
      console.log(
        `${theme}: code cell ${cellCode.min.toFixed(2)} (${cellCode.worst}), card code ` +
          `${card.min.toFixed(2)} (${card.worst}), lines ${lines.min.toFixed(2)}, ` +
          `badges ${badges.min.toFixed(2)} (${badges.worst})`
      );
      expect(cellCode.min).toBeLessThan(Infinity); // the cell's tokens were measured
      expect(card.min).toBeGreaterThanOrEqual(cellCode.min - 0.01);
      expect(card.min).toBeGreaterThanOrEqual(CELL_FLOOR[theme]);
      expect(lines.min).toBeGreaterThanOrEqual(4.5);
      expect(badges.min).toBeGreaterThanOrEqual(4.5);
    });
  });
}
