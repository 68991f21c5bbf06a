/**
 * The transcript view of a saved turn: record text shown as text, bidi
 * controls visible, the answer hardened, provenance and egress shown.
 */
import { MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { JSONObject } from '@lumino/coreutils';

import { trackLiveClient } from '../src/live';
import { TRANSCRIPT_MIME } from '../src/record';
import {
  EGRESS_SHOWN,
  TranscriptRenderer,
  egressText,
  formatBytes,
  imagePlaceholderText
} from '../src/transcript';
import { PAYLOADS, rendererOptions, translatedOptions } from './rendering';
import { shouting } from './translators';

const RECORD: JSONObject = {
  schema_version: 1,
  status: 'completed',
  model: 'claude-sonnet-5-5',
  prompt: 'Clean <b>df</b>',
  answer: 'Dropped **3 rows**.',
  tool_calls: [
    {
      name: 'run\u202e_code',
      input: { code: 'access = "user" # \u202e } if is_admin: \u2066' },
      decision: { kind: 'approved' },
      output_summary: '<img src=x onerror="window.__qloopPwned = 1">',
      images: [{ bytes: 23000, sha256: 'ab12cd34ef56' }]
    }
  ],
  usage: { input_tokens: 5123, output_tokens: 842 },
  cost_usd: 0.0213,
  model_calls: 4
};

const renderers: TranscriptRenderer[] = [];
afterEach(() => renderers.splice(0).forEach(renderer => renderer.dispose()));

async function render(
  data: JSONObject | string,
  options: IRenderMime.IRendererOptions = rendererOptions(TRANSCRIPT_MIME),
  metadata: JSONObject = {}
): Promise<HTMLElement> {
  const renderer = new TranscriptRenderer(options);
  renderers.push(renderer);
  await renderer.renderModel(
    new MimeModel({
      trusted: true,
      data: { [TRANSCRIPT_MIME]: data },
      metadata: { [TRANSCRIPT_MIME]: metadata }
    })
  );
  return renderer.node;
}

function text(node: HTMLElement, selector: string): string[] {
  return Array.from(node.querySelectorAll(selector)).map(
    element => element.textContent ?? ''
  );
}

describe('TranscriptRenderer', () => {
  it('shows the header, prompt, tool calls and answer', async () => {
    const node = await render(RECORD);
    expect(node.dataset.qloopStatus).toBe('completed');
    expect(text(node, '.qloop-fact')).toEqual([
      'claude-sonnet-5-5',
      '4 model calls',
      '1 tool call',
      'tokens: 5,123 in · 842 out',
      '$0.0213'
    ]);
    expect(text(node, '.qloop-prompt-text')).toEqual(['Clean <b>df</b>']);
    expect(node.querySelector('.qloop-prompt-text b')).toBeNull();
    expect(text(node, '.qloop-tool-output')).toEqual([
      '<img src=x onerror="window.__qloopPwned = 1">'
    ]);
    expect(text(node, '.qloop-image-placeholder')).toEqual([
      'image, 23 kB, sha256 ab12cd34…'
    ]);
    expect(text(node, '.qloop-answer-body strong')).toEqual(['3 rows']);
    expect(node.querySelector('.qloop-received')).toBeNull();
    expect(node.querySelector('.qloop-egress')).toBeNull();
    expect(node.querySelector('.qloop-refusal')).toBeNull();
  });

  it('counts usage as a person reads it', async () => {
    const one = await render({
      ...RECORD,
      model_calls: 1,
      usage: {
        input_tokens: 1234567,
        output_tokens: 1,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 2048
      }
    });
    expect(text(one, '.qloop-fact').slice(1, 4)).toEqual([
      '1 model call',
      '1 tool call',
      'tokens: 1,234,567 in · 1 out · 2,048 cache write'
    ]);
    const many = await render({
      ...RECORD,
      model_calls: 1200,
      tool_calls: [{ name: 'run_code' }, { name: 'run_code' }]
    });
    expect(text(many, '.qloop-fact').slice(1, 3)).toEqual([
      '1,200 model calls',
      '2 tool calls'
    ]);
  });

  it('says a turn without a model call spent nothing, without zero figures', async () => {
    const zero = { input_tokens: 0, output_tokens: 0 };
    const replayed = await render({
      ...RECORD,
      model_calls: 0,
      tool_calls: [],
      usage: { ...zero, cache_read_input_tokens: 0 },
      cost_usd: 0
    });
    expect(text(replayed, '.qloop-fact')).toEqual([
      'claude-sonnet-5-5',
      'no model call',
      'no tool call'
    ]);
    // Calls unknown (an older record): the zero usage is still said in words.
    const unknown = await render({
      ...RECORD,
      model_calls: null,
      usage: zero,
      cost_usd: 0
    });
    expect(text(unknown, '.qloop-fact')).toEqual([
      'claude-sonnet-5-5',
      '1 tool call',
      'no tokens',
      '$0.0000'
    ]);
  });

  it("shows each code step's changes, as text", async () => {
    const call = (RECORD.tool_calls as JSONObject[])[0];
    const node = await render({
      ...RECORD,
      tool_calls: [
        {
          ...call,
          changes: [
            { name: 'y', kind: 'created', summary: 'created (int 3)' },
            {
              name: 'df',
              kind: 'changed',
              summary:
                'DataFrame 600×5 → 598×5, column <b>date</b> str → datetime64[us]'
            },
            { name: 'old', kind: 'deleted', summary: 'deleted (was int 5)' }
          ]
        },
        { ...call, changes: [] },
        call
      ]
    });
    expect(text(node, '.qloop-change')).toEqual([
      'y: created (int 3)',
      'df: DataFrame 600×5 → 598×5, column <b>date</b> str → datetime64[us]',
      'old: deleted (was int 5)'
    ]);
    expect(node.querySelector('.qloop-change b')).toBeNull();
    const kinds = Array.from(
      node.querySelectorAll<HTMLElement>('.qloop-change')
    );
    expect(kinds.map(item => item.dataset.qloopChange)).toEqual([
      'created',
      'changed',
      'deleted'
    ]);
    expect(text(node, '.qloop-change-none')).toEqual(['no variables changed']);
    expect(node.querySelectorAll('.qloop-tool-changes')).toHaveLength(2); // none for the old step
  });

  it('shows bidi controls in code and names instead of applying them', async () => {
    const node = await render(RECORD);
    expect(text(node, '.qloop-tool-name')).toEqual(['run\\u202e_code']);
    // Code is shown as the approval card shows it (visible.ts).
    expect(text(node, '.qloop-tool-input')).toEqual([
      'access = "user" # ⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩ } if is_admin: ⟨U+2066 LEFT-TO-RIGHT ISOLATE⟩'
    ]);
    expect(text(node, '.qloop-tool-input .qloop-mark')).toEqual([
      '⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩',
      '⟨U+2066 LEFT-TO-RIGHT ISOLATE⟩'
    ]);
    expect(node.textContent).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
  });

  it('shows a received record, what was sent to the model and a refusal', async () => {
    const node = await render({
      ...RECORD,
      status: 'refused',
      received: true,
      egress: [
        { kind: 'variable', name: 'df', chars: 1234 },
        { kind: 'output', name: 'cell 3', chars: 80 },
        { kind: 'file', name: 'data\u202e.csv' },
        { kind: 'prompt', name: '', chars: 12 }
      ],
      refusal: { category: 'cyber', explanation: "I can't help with <that>." }
    });
    expect(text(node, '.qloop-received')).toEqual([
      'received from elsewhere: not signed by you'
    ]);
    expect(text(node, '.qloop-egress .qloop-section-title')).toEqual([
      'Sent to the model'
    ]);
    expect(text(node, '.qloop-egress-item')).toEqual([
      'variable df · 1,234 chars',
      'output cell 3 · 80 chars',
      'file data\\u202e.csv',
      'prompt · 12 chars'
    ]);
    expect(text(node, '.qloop-refusal-category')).toEqual(['category: cyber']);
    expect(text(node, '.qloop-refusal-explanation')).toEqual([
      "I can't help with <that>."
    ]);
  });

  it('shortens a long egress list', async () => {
    const egress = Array.from({ length: EGRESS_SHOWN + 5 }, (_, i) => ({
      kind: 'variable',
      name: `v${i}`,
      chars: i
    }));
    const node = await render({ ...RECORD, egress });
    expect(node.querySelectorAll('.qloop-egress-item')).toHaveLength(
      EGRESS_SHOWN
    );
    expect(text(node, '.qloop-egress-more')).toEqual(['and 5 more']);
  });

  it('tolerates provenance fields of the wrong type', async () => {
    const node = await render({
      ...RECORD,
      received: 'yes',
      egress: { df: 3 },
      refusal: ['cyber']
    });
    expect(node.querySelector('.qloop-received')).toBeNull();
    expect(node.querySelector('.qloop-egress')).toBeNull();
    expect(node.querySelector('.qloop-refusal')).toBeNull();
    expect(text(node, '.qloop-answer-body strong')).toEqual(['3 rows']);
  });

  it('hardens the saved answer of a trusted output', async () => {
    const node = await render({ ...RECORD, answer: PAYLOADS.join('\n\n') });
    const answer = node.querySelector('.qloop-answer-body')!;
    expect(
      answer.querySelectorAll('script, style, iframe, svg, form, button, img')
    ).toHaveLength(0);
    expect(
      answer.querySelectorAll('[style], [onerror], [onload]')
    ).toHaveLength(0);
    expect(answer.innerHTML).not.toContain('127.0.0.1');
    expect(answer.textContent).toContain('remote picture');
  });

  it('explains an unreadable record', async () => {
    const node = await render('not a record');
    expect(node.classList.contains('qloop-transcript-unreadable')).toBe(true);
    expect(node.textContent).toBe(
      'unreadable qloop record: expected a JSON object, got string'
    );
  });

  it('folds the view next to the live output of the same page', async () => {
    trackLiveClient('client-1', { connect: () => undefined });
    const node = await render(RECORD, rendererOptions(TRANSCRIPT_MIME), {
      live_client: 'client-1'
    });
    expect(node.classList.contains('qloop-transcript-live')).toBe(true);
    expect(text(node, 'details > summary')).toEqual([
      'saved transcript of this turn'
    ]);
    const other = await render(RECORD, rendererOptions(TRANSCRIPT_MIME), {
      live_client: 'elsewhere'
    });
    expect(other.querySelector('details')).toBeNull();
  });

  it('shows the received notice when the kernel marks the shown record', async () => {
    const node = await render(RECORD, rendererOptions(TRANSCRIPT_MIME), {
      received: true
    });
    expect(text(node, '.qloop-received')).toEqual([
      'received from elsewhere: not signed by you'
    ]);
    const unmarked = await render(RECORD, rendererOptions(TRANSCRIPT_MIME), {
      received: 'yes'
    });
    expect(unmarked.querySelector('.qloop-received')).toBeNull();
  });

  it('translates its words', async () => {
    const node = await render(
      { ...RECORD, received: true },
      translatedOptions(TRANSCRIPT_MIME, shouting)
    );
    expect(text(node, '.qloop-status')).toEqual(['COMPLETED']);
    expect(text(node, '.qloop-section-title')).toContain('PROMPT');
    expect(text(node, '.qloop-received')).toEqual([
      'RECEIVED FROM ELSEWHERE: NOT SIGNED BY YOU'
    ]);
    expect(text(node, '.qloop-decision')).toEqual(['APPROVED']);
    expect(text(node, '.qloop-fact').slice(1, 3)).toEqual([
      '4 MODEL CALLS',
      '1 TOOL CALL'
    ]);
    // Record text is never translated.
    expect(text(node, '.qloop-prompt-text')).toEqual(['Clean <b>df</b>']);
  });
});

describe('text helpers', () => {
  it('formats sizes and image placeholders', () => {
    expect(formatBytes(812)).toBe('812 B');
    expect(formatBytes(23456)).toBe('23 kB');
    expect(formatBytes(1_400_000)).toBe('1.4 MB');
    expect(formatBytes(null)).toBe('size unknown');
    expect(imagePlaceholderText({ bytes: -1, sha256: '' })).toBe(
      'image, size unknown'
    );
  });

  it('describes an egress item', () => {
    expect(egressText({ kind: 'unknown', name: 'x', chars: null })).toBe(
      'other x'
    );
  });
});

describe('the context of a saved turn', () => {
  const CONTEXT: JSONObject = {
    system_chars: 2150,
    rules: [
      {
        path: '/home/ada/.jupyter/qloop/rules.md',
        origin: 'user',
        sha256: 'aa',
        chars: 120,
        status: 'used'
      },
      {
        path: '/work/proj/AGENTS\u202e.md',
        origin: 'project',
        sha256: 'bb',
        chars: 0,
        status: 'unapproved'
      }
    ],
    attachments: [
      { kind: 'table', name: 'sales.csv', sha256: 'cc', chars: 1834 },
      {
        kind: 'image',
        name: 'plot.png',
        sha256: 'dd',
        chars: 0,
        image_bytes: 20480,
        note: 'PNG'
      }
    ],
    tools: [
      { name: 'run_code', chars: 400 },
      { name: 'inspect_variable', chars: 350 }
    ],
    history_messages: 4,
    estimated_tokens: 1873,
    estimated_cost_usd: 0.003746,
    estimate_method: 'about 4 characters a token'
  };

  it('lists rules, attachments, tools, history and the estimate', async () => {
    const node = await render({
      ...RECORD,
      schema_version: 2,
      context: CONTEXT,
      egress: [
        { kind: 'rules', name: 'AGENTS.md', chars: 120 },
        { kind: 'cell', name: 'c-1', chars: 40 }
      ]
    });
    expect(text(node, '.qloop-context-item')).toEqual([
      'system prompt with rules: 2,150 chars',
      'your rules /home/ada/.jupyter/qloop/rules.md · used · 120 chars',
      'project rules /work/proj/AGENTS\\u202e.md · unapproved · 0 chars',
      'attached table sales.csv · 1,834 chars',
      'attached image plot.png · image, 20,480 bytes · PNG',
      '2 tool definitions · 750 chars',
      '4 earlier messages of the conversation',
      'first request: about 1,873 tokens, $0.0037 uncached (about 4 characters a token)'
    ]);
    expect(text(node, '.qloop-egress-item')).toEqual([
      'rules file AGENTS.md · 120 chars',
      'cell c-1 · 40 chars'
    ]);
  });

  it('is left out of records written before it existed', async () => {
    const node = await render(RECORD);
    expect(node.querySelector('.qloop-context')).toBeNull();
  });

  it('reads a mistyped context field by field', async () => {
    const node = await render({
      ...RECORD,
      context: {
        rules: 'AGENTS.md',
        tools: [{ name: 7 }],
        estimated_tokens: 'many'
      }
    });
    expect(text(node, '.qloop-context-item')).toEqual([
      'system prompt with rules: ? chars',
      '1 tool definition · 0 chars'
    ]);
  });
});
