/**
 * Untrusted text never runs, loads or covers the page: a payload list in an
 * answer output, in a saved transcript record, in a mirror-only record and in
 * an answer the running kernel displays (an output JupyterLab trusts), in the
 * Light and Dark themes, before and after the notebook is trusted.
 *
 * The notebook is written by the test. Every payload that ran would set
 * `window.__qloopPwned`; the remote images point at 127.0.0.1:9.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator, Request } from '@playwright/test';

import { cell, expect, markerOf, test, waitForIdleKernel } from './fixtures';

const ANSWER_MIME = 'application/vnd.qloop.answer+json';
const TRANSCRIPT_MIME = 'application/vnd.qloop.transcript+json';
const REMOTE_HOST = '127.0.0.1:9';
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const RLO = '\u202e';

const PAYLOADS = [
  'Start of the answer with **bold** text.',
  '<script>window.__qloopPwned = "script"</script>',
  '<img src=x onerror="window.__qloopPwned = \'img\'">',
  '<svg onload="window.__qloopPwned = \'svg\'"><circle r="5"/></svg>',
  '<svg><script>window.__qloopPwned = "svg-script"</script></svg>',
  '<details open ontoggle="window.__qloopPwned = \'details\'"><summary>more</summary>hidden</details>',
  '<iframe src="javascript:parent.__qloopPwned = \'iframe\'"></iframe>',
  '<iframe srcdoc="<script>parent.__qloopPwned = \'srcdoc\'</script>"></iframe>',
  "[click me](javascript:window.__qloopPwned='md-link')",
  '<a href="javascript:window.__qloopPwned = \'a\'">html link</a>',
  '<a href="data:text/html,<script>parent.__qloopPwned=1</script>">data link</a>',
  '<form action="javascript:window.__qloopPwned = \'form\'"><input name="q"><button>Approve</button></form>',
  '<button data-commandlinker-command="notebook:run-all-cells">Run all</button>',
  '<div style="position:fixed;inset:0;z-index:9999;background:red">cover</div>',
  '<div class="jp-Dialog">borrowed dialog</div>',
  '<style>body { display: none !important }</style>',
  `<img src="http://${REMOTE_HOST}/x.png" alt="remote picture">`,
  `![markdown picture](http://${REMOTE_HOST}/md.png)`,
  `<object data="http://${REMOTE_HOST}/o.swf"></object><embed src="http://${REMOTE_HOST}/e.swf">`,
  "$\\href{javascript:window.__qloopPwned='math'}{x}$ and " +
    '$\\style{position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:99999;background:red}{\\text{math cover}}$',
  `\`\`\`python\naccess_level = "user" # ${RLO} } if is_admin: ⁦ begin admins only\n\`\`\``,
  `<span dir="rtl">rtl</span> <bdo dir="rtl">bdo</bdo> file${RLO}gnp.exe`,
  `![plot](${PNG})`,
  '[the docs](https://example.com/docs)',
  'End of the answer.'
];
const ANSWER = PAYLOADS.join('\n\n');

const RECORD = {
  schema_version: 2,
  session_id: 'received',
  prompt: `Summarise ${RLO}the table <img src=x onerror="window.__qloopPwned='prompt'">`,
  model: 'claude-sonnet-5-5',
  status: 'completed',
  answer: ANSWER,
  received: true,
  egress: [{ kind: 'variable', name: `df${RLO}x`, chars: 120 }],
  tool_calls: [
    {
      name: `run${RLO}_code`,
      input: { code: `access = "user" # ${RLO} } if is_admin: ⁦` },
      decision: { kind: 'approved' },
      output_summary: '<script>window.__qloopPwned = "output"</script>'
    }
  ],
  updated_at: '2026-12-02T10:00:00.000001+00:00'
};

function codeCell(
  id: string,
  source: string,
  outputs: object[] = [],
  metadata: object = {}
) {
  return {
    cell_type: 'code',
    id,
    metadata,
    execution_count: null,
    source,
    outputs
  };
}

function display(data: Record<string, unknown>) {
  return { output_type: 'display_data', data, metadata: {} };
}

/** The kernel cell: displays the payloads as the agent's answer does. */
const LIVE_SOURCE = [
  'import json',
  'from IPython.display import display',
  `answer = json.loads(${JSON.stringify(JSON.stringify(ANSWER))})`,
  `display({"${ANSWER_MIME}": {"markdown": answer}, "text/plain": answer}, raw=True)`
].join('\n');

const ANSWER_CELL = 0;
const SAVED_CELL = 1;
const MIRROR_CELL = 2;
const LIVE_CELL = 3;

const NOTEBOOK = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: {
    kernelspec: {
      name: 'python3',
      display_name: 'Python 3',
      language: 'python'
    }
  },
  cells: [
    codeCell('answer', '%%agent summarise', [
      display({ [ANSWER_MIME]: { markdown: ANSWER }, 'text/plain': ANSWER })
    ]),
    codeCell(
      'saved',
      '%%agent summarise',
      [display({ [TRANSCRIPT_MIME]: RECORD, 'text/plain': 'agent turn' })],
      { qloop: RECORD }
    ),
    codeCell('mirror', '%%agent summarise', [
      display({
        [TRANSCRIPT_MIME]: { ...RECORD, session_id: 'mirror-only' },
        'text/plain': 'agent turn'
      })
    ]),
    codeCell('live', LIVE_SOURCE)
  ]
};

/** Write the crafted notebook into the test's folder and open it. */
async function openCrafted(
  page: IJupyterLabPageFixture,
  tmpPath: string
): Promise<void> {
  const serverPath = `${tmpPath}/untrusted.ipynb`;
  expect(
    await page.contents.uploadContent(
      JSON.stringify(NOTEBOOK),
      'text',
      serverPath
    )
  ).toBe(true);
  expect(await page.notebook.openByPath(serverPath)).toBe(true);
  await page.notebook.activate('untrusted.ipynb');
}

/** The rendered answers in cell `index`: the answer output or the view's answer. */
async function answerBodies(
  page: IJupyterLabPageFixture,
  index: number
): Promise<Locator> {
  return (await cell(page, index)).locator('.qloop-answer-body');
}

/** Everything one rendered answer must (not) contain. */
async function expectHardened(body: Locator): Promise<void> {
  await expect(body).toContainText('End of the answer.');
  await expect(body.locator('strong').first()).toHaveText('bold');
  // What the page's typesetter makes of math (MathJax's own elements and
  // inline styles) is not from the payload; everything else is.
  const forbidden = await body
    .locator(
      'script, style, iframe, object, embed, svg, form, input, button, [onerror], [onload], [ontoggle], [style], [data-commandlinker-command], .jp-Dialog'
    )
    .evaluateAll(nodes =>
      nodes
        .filter(node => node.closest('mjx-container') === null)
        .map(node => node.outerHTML)
    );
  expect(forbidden).toEqual([]);
  await expect(body.locator('mjx-container')).toHaveCount(2);
  await expect(body.locator('.qloop-image-removed')).toContainText([
    'remote picture',
    'markdown picture'
  ]);
  // The embedded image stays; no other image does.
  await expect(body.locator('img')).toHaveCount(1);
  await expect(body.locator('img')).toHaveAttribute('src', PNG);
  const links = await body.locator('a[href]').evaluateAll(anchors =>
    anchors.map(a => ({
      href: a.getAttribute('href') ?? '',
      target: a.getAttribute('target'),
      rel: a.getAttribute('rel')
    }))
  );
  for (const link of links) {
    if (link.href.startsWith('#')) {
      continue;
    }
    expect(link.href).toMatch(/^https?:/);
    expect(link.target).toBe('_blank');
    expect(link.rel).toBe('noopener noreferrer');
  }
  expect(links.map(link => link.href)).toContain('https://example.com/docs');
  // Bidi controls are shown, never applied.
  await expect(body.locator('pre code .qloop-bidi').first()).toHaveText(
    '\\u202e'
  );
  expect(await body.textContent()).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
  // The script links are text now: clicking them does nothing.
  await body.getByText('click me').click();
  await body.getByText('html link').click();
}

/** Nothing ran, nothing loaded from the remote host, nothing covers the page. */
async function expectNothingHappened(
  page: IJupyterLabPageFixture,
  requests: string[]
): Promise<void> {
  expect(await page.evaluate(() => (window as any).__qloopPwned)).toBe(
    undefined
  );
  expect(requests.filter(url => url.includes(REMOTE_HOST))).toEqual([]);
  const cover = await page.evaluate(() => {
    const x = window.innerWidth / 2;
    const y = window.innerHeight / 2;
    const element = document.elementFromPoint(x, y);
    const fixed = Array.from(
      document.querySelectorAll('.jp-OutputArea *')
    ).filter(node => getComputedStyle(node).position === 'fixed').length;
    return {
      insideShell: element !== null && element.closest('#main') !== null,
      bodyShown: getComputedStyle(document.body).display !== 'none',
      fixed
    };
  });
  expect(cover).toEqual({ insideShell: true, bodyShown: true, fixed: 0 });
}

async function expectTranscriptText(
  page: IJupyterLabPageFixture,
  index: number
): Promise<void> {
  const view = (await cell(page, index)).locator('.qloop-transcript');
  await expect(view.locator('.qloop-received')).toHaveText(
    'received from elsewhere: not signed by you'
  );
  await expect(view.locator('.qloop-tool-name')).toHaveText('run\\u202e_code');
  // Code is shown as the approval card shows it: each control as a named mark.
  await expect(view.locator('.qloop-tool-input .qloop-mark')).toHaveText([
    '⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩',
    '⟨U+2066 LEFT-TO-RIGHT ISOLATE⟩'
  ]);
  await expect(view.locator('.qloop-tool-output')).toHaveText(
    '<script>window.__qloopPwned = "output"</script>'
  );
  await expect(view.locator('.qloop-prompt-text img')).toHaveCount(0);
  await expect(view.locator('.qloop-egress-item')).toHaveText([
    'variable df\\u202ex · 120 chars'
  ]);
}

async function expectAllHardened(
  page: IJupyterLabPageFixture,
  requests: string[],
  indexes: number[]
): Promise<void> {
  for (const index of indexes) {
    const bodies = await answerBodies(page, index);
    await expect(bodies).toHaveCount(1);
    await expectHardened(bodies);
  }
  await expectTranscriptText(page, SAVED_CELL);
  await expectTranscriptText(page, MIRROR_CELL);
  await expectNothingHappened(page, requests);
}

for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
  test.describe(`untrusted text (${theme})`, () => {
    test('never runs, loads or covers the page', async ({ page, tmpPath }) => {
      test.setTimeout(180000);
      const requests: string[] = [];
      page.on('request', (request: Request) => requests.push(request.url()));
      await page.theme.setTheme(theme);
      await openCrafted(page, tmpPath);

      // (a) the answer output, (b) the saved record, (c) the mirror-only
      // record, which the extension copies into the cell metadata.
      await expect
        .poll(() => markerOf(page, MIRROR_CELL))
        .toMatchObject({ marked: true, status: 'completed' });
      await expectAllHardened(page, requests, [
        ANSWER_CELL,
        SAVED_CELL,
        MIRROR_CELL
      ]);

      // The same answer displayed by the running kernel: a trusted output.
      await waitForIdleKernel(page);
      await page.notebook.runCell(LIVE_CELL, { inplace: true });
      await expect(await answerBodies(page, LIVE_CELL)).toHaveCount(1);
      await expectAllHardened(page, requests, [
        ANSWER_CELL,
        SAVED_CELL,
        MIRROR_CELL,
        LIVE_CELL
      ]);

      // Trusting the notebook re-renders its saved outputs as trusted.
      // (The command returns when its dialog closes: not awaited here.)
      await page.evaluate(() => {
        void (window as any).jupyterapp.commands.execute('notebook:trust');
      });
      await page.locator('.jp-Dialog .jp-mod-accept').click();
      await expect(page.locator('.jp-Dialog')).toHaveCount(0);
      await expectAllHardened(page, requests, [
        ANSWER_CELL,
        SAVED_CELL,
        MIRROR_CELL,
        LIVE_CELL
      ]);
      expect(await page.theme.getTheme()).toBe(theme);
    });
  });
}
