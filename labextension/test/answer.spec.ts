/**
 * The answer renderer: Markdown from the model through JupyterLab's parser
 * and sanitizer, then hardened, even when JupyterLab trusts the output.
 */
import { Sanitizer } from '@jupyterlab/apputils';
import { MimeModel } from '@jupyterlab/rendermime';
import { PartialJSONValue } from '@lumino/coreutils';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { AnswerRenderer } from '../src/answer';
import { ANSWER_MIME } from '../src/record';
import { PAYLOADS, rendererOptions, translatedOptions } from './rendering';
import { shouting } from './translators';

/** The flag every payload would set if it ran. */
const page = window as unknown as { __qloopPwned?: unknown };

const renderers: AnswerRenderer[] = [];

async function render(
  markdown: PartialJSONValue,
  options: IRenderMime.IRendererOptions = rendererOptions(ANSWER_MIME),
  trusted = true
): Promise<HTMLElement> {
  const renderer = new AnswerRenderer(options);
  renderers.push(renderer);
  document.body.appendChild(renderer.node);
  await renderer.renderModel(
    new MimeModel({
      trusted,
      data: { [ANSWER_MIME]: { markdown }, 'text/plain': String(markdown) }
    })
  );
  return renderer.node;
}

afterEach(() => {
  renderers.splice(0).forEach(renderer => renderer.dispose());
  document.body.textContent = '';
  delete page.__qloopPwned;
});

describe('AnswerRenderer', () => {
  it('renders Markdown', async () => {
    const node = await render(
      '# Result\n\nThe table has **3 rows**:\n\n| region | n |\n|---|---|\n| north | 2 |\n\n' +
        '```python\ndf.head()\n```\n\n- [x] cleaned\n- [ ] plotted\n\nSee [the docs](https://example.com/docs).'
    );
    const body = node.querySelector('.qloop-answer-body')!;
    expect(body.classList.contains('jp-RenderedHTMLCommon')).toBe(true);
    // JupyterLab's heading anchor stays, pointing into the page.
    expect(body.querySelector('h1')?.textContent).toBe('Result¶');
    expect(
      body.querySelector('h1 a.jp-InternalAnchorLink')?.getAttribute('target')
    ).toBe('_self');
    expect(body.querySelector('strong')?.textContent).toBe('3 rows');
    expect(body.querySelector('table td')?.textContent).toBe('north');
    expect(body.querySelector('pre code')?.textContent).toBe('df.head()');
    expect(body.textContent).toContain('☑ cleaned');
    expect(body.textContent).toContain('☐ plotted');
    const link = body.querySelector('a[href="https://example.com/docs"]')!;
    expect(link.getAttribute('target')).toBe('_blank');
    expect(link.getAttribute('rel')).toBe('noopener noreferrer');
  });

  it.each([true, false])(
    'removes every payload from a trusted=%s output',
    async trusted => {
      const node = await render(
        PAYLOADS.join('\n\n'),
        rendererOptions(ANSWER_MIME),
        trusted
      );
      const body = node.querySelector('.qloop-answer-body')!;
      expect(
        body.querySelectorAll(
          'script, style, iframe, object, embed, svg, form, input, button, video'
        )
      ).toHaveLength(0);
      const attributes = Array.from(body.querySelectorAll('*')).flatMap(
        element => element.getAttributeNames()
      );
      for (const name of attributes) {
        expect(name).toMatch(
          /^(href|target|rel|title|alt|class|open|data-jupyter-id)$/
        );
      }
      for (const anchor of Array.from(body.querySelectorAll('a[href]'))) {
        expect(anchor.getAttribute('href')).toMatch(/^(https?:|#)/);
      }
      expect(body.querySelectorAll('img')).toHaveLength(0);
      expect(body.innerHTML).not.toContain('127.0.0.1');
      expect(body.innerHTML).not.toMatch(/javascript:|data:text/i);
      expect(body.textContent).toContain('remote picture');
      expect(body.textContent).toContain('markdown picture');
      expect(body.textContent).toContain('\\u202e');
      expect(body.textContent).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
      expect(page.__qloopPwned).toBeUndefined();
    }
  );

  it("always runs the application's sanitizer, even for a trusted output", async () => {
    const real = new Sanitizer();
    const seen: string[] = [];
    const recording: IRenderMime.ISanitizer = {
      sanitize: (dirty, options) => {
        seen.push(dirty);
        return real.sanitize(dirty, options);
      }
    };
    await render(
      '**hi** <img src=x onerror="window.__qloopPwned = 1">',
      rendererOptions(ANSWER_MIME, { sanitizer: recording }),
      true
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain('<strong>hi</strong>');
  });

  it('shows images embedded in the answer', async () => {
    const png =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const node = await render(`![plot](${png})`);
    expect(node.querySelector('img')?.getAttribute('src')).toBe(png);
  });

  it('shows the answer as text without a Markdown parser', async () => {
    const node = await render(
      '<b>bold?</b> \u202e',
      rendererOptions(ANSWER_MIME, { markdownParser: null })
    );
    const pre = node.querySelector('pre.qloop-answer-text')!;
    expect(pre.querySelector('b')).toBeNull();
    expect(pre.textContent).toBe('<b>bold?</b> \\u202e');
  });

  it('shows the answer as text when the parser fails', async () => {
    const failing: IRenderMime.IMarkdownParser = {
      render: () => Promise.reject(new Error('parser broke'))
    };
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    const node = await render(
      '**x** <img src=x onerror="window.__qloopPwned=1">',
      rendererOptions(ANSWER_MIME, { markdownParser: failing })
    );
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
    expect(node.querySelector('pre.qloop-answer-text')?.textContent).toBe(
      '**x** <img src=x onerror="window.__qloopPwned=1">'
    );
    expect(node.querySelector('img')).toBeNull();
  });

  it.each([null, 5, ['x']])(
    'says when the data is not {"markdown": text}: %j',
    async markdown => {
      const node = await render(markdown);
      expect(node.classList.contains('qloop-answer-output-unreadable')).toBe(
        true
      );
      expect(node.textContent).toBe(
        'unreadable qloop answer: expected {"markdown": "<text>"}'
      );
    }
  );

  it('translates what it says', async () => {
    const node = await render(7, translatedOptions(ANSWER_MIME, shouting));
    expect(node.textContent).toBe(
      'UNREADABLE QLOOP ANSWER: EXPECTED {"MARKDOWN": "<TEXT>"}'
    );
  });

  it('keeps the newest of two overlapping renders', async () => {
    const pending: Array<() => void> = [];
    const slow: IRenderMime.IMarkdownParser = {
      render: source =>
        new Promise(resolve => pending.push(() => resolve(`<p>${source}</p>`)))
    };
    const renderer = new AnswerRenderer(
      rendererOptions(ANSWER_MIME, { markdownParser: slow })
    );
    renderers.push(renderer);
    const model = (markdown: string) =>
      new MimeModel({ trusted: true, data: { [ANSWER_MIME]: { markdown } } });
    const first = renderer.renderModel(model('partial'));
    const second = renderer.renderModel(model('partial and complete'));
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(pending).toHaveLength(2);
    pending[1]();
    await second;
    pending[0]();
    await first;
    expect(renderer.node.textContent).toBe('partial and complete');
  });
});
