/**
 * The extension shows code by the rule of `qloop_kernel/visible.py`: the
 * vectors in visible-vectors.json are that module's output (a Python test
 * checks it), so the transcript view and the card show the same marks.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import { MimeModel } from '@jupyterlab/rendermime';
import { JSONObject } from '@lumino/coreutils';

import { TRANSCRIPT_MIME } from '../src/record';
import { SOURCE_NOTICE_CLASS, TranscriptRenderer } from '../src/transcript';
import { MARK_CLASS, asShown, pieces, shownNodes } from '../src/visible';
import { rendererOptions } from './rendering';

const VECTORS: { code: string; shown: string }[] = JSON.parse(
  readFileSync(join(__dirname, 'visible-vectors.json'), 'utf-8')
);

const HIDDEN_TAIL =
  'harmless = 1' + ' '.repeat(400) + '; import os; HIDDEN_TAIL = 1';

function record(code: string): JSONObject {
  return {
    schema_version: 1,
    status: 'completed',
    model: 'claude-sonnet-5-5',
    prompt: 'p',
    answer: '',
    tool_calls: [
      {
        name: 'run_code',
        input: { code },
        decision: { kind: 'approved' }
      }
    ]
  };
}

async function rendered(
  code: string
): Promise<[TranscriptRenderer, HTMLElement]> {
  const renderer = new TranscriptRenderer(rendererOptions(TRANSCRIPT_MIME));
  await renderer.renderModel(
    new MimeModel({ trusted: true, data: { [TRANSCRIPT_MIME]: record(code) } })
  );
  return [renderer, renderer.node];
}

describe('visible', () => {
  it.each(VECTORS.map(v => [v.code.slice(0, 30), v]))(
    'shows %j as the kernel does',
    (_, vector) => {
      expect(asShown(vector.code)).toBe(vector.shown);
      expect(
        pieces(vector.code)
          .map(p => p.text)
          .join('')
      ).toBe(vector.code);
    }
  );

  it('marks a 5,000-character line once per hidden character', () => {
    const line = "x = '" + 'ab\u200bcd'.repeat(1000) + "'";
    const shown = asShown(line);
    expect(shown.split('⟨U+200B ZERO WIDTH SPACE⟩').length).toBe(1001);
    expect(shown.replace(/⟨U\+200B ZERO WIDTH SPACE⟩/g, '')).toBe(
      line.replace(/\u200b/g, '')
    );
  });

  it('puts each mark in a styled span, text as text', () => {
    const node = document.createElement('pre');
    node.appendChild(shownNodes(document, 'a\u3164 = "<b>"'));
    expect(node.querySelector('b')).toBeNull();
    expect(node.querySelector(`.${MARK_CLASS}`)?.textContent).toBe(
      '⟨U+3164 HANGUL FILLER⟩'
    );
    expect(node.textContent).toBe('a⟨U+3164 HANGUL FILLER⟩ = "<b>"');
  });
});

describe('TranscriptRenderer code', () => {
  it('shows the hidden tail with its run as a mark', async () => {
    const [renderer, node] = await rendered(HIDDEN_TAIL);
    expect(node.querySelector('.qloop-tool-input')?.textContent).toBe(
      'harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1'
    );
    renderer.dispose();
  });

  it("shows the cell's saved record when its code differs", async () => {
    const [renderer, node] = await rendered('x = 1');
    renderer.showSource(record('x = 1'));
    expect(node.querySelector(`.${SOURCE_NOTICE_CLASS}`)).toBeNull();
    renderer.showSource(record('import os; os.remove("f")'));
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(node.querySelector('.qloop-tool-input')?.textContent).toBe(
      'import os; os.remove("f")'
    );
    expect(node.querySelector(`.${SOURCE_NOTICE_CLASS}`)).not.toBeNull();
    renderer.showSource(null);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(node.querySelector('.qloop-tool-input')?.textContent).toBe('x = 1');
    renderer.dispose();
  });

  it('keeps the output of a running turn', async () => {
    const [renderer, node] = await rendered('x = 1');
    renderer.showSource({ ...record('x = 2'), status: 'running' });
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(node.querySelector('.qloop-tool-input')?.textContent).toBe('x = 1');
    renderer.dispose();
  });
});
