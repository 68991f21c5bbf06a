/**
 * A denied step in the transcript view reads in the person's words: the
 * decision and their reason, not the instructions the model was sent.
 */
import { MimeModel } from '@jupyterlab/rendermime';

import { TRANSCRIPT_MIME } from '../src/record';
import { TranscriptRenderer } from '../src/transcript';
import { rendererOptions } from './rendering';

it('shows a denial with its reason and without the text the model read', async () => {
  const renderer = new TranscriptRenderer(rendererOptions(TRANSCRIPT_MIME));
  await renderer.renderModel(
    new MimeModel({
      trusted: true,
      data: {
        [TRANSCRIPT_MIME]: {
          schema_version: 2,
          status: 'completed',
          prompt: 'Set y.',
          tool_calls: [
            {
              name: 'run_code',
              input: { code: 'y = 42' },
              decision: { kind: 'denied', reason: 'not on shared data' },
              is_error: true,
              output_summary:
                'The user denied this call: not on shared data\nIt was not run. ' +
                'Take the reason into account; do not repeat the same call.'
            },
            {
              name: 'run_code',
              input: { code: '1 / 0' },
              decision: { kind: 'approved' },
              is_error: true,
              output_summary: 'ZeroDivisionError: division by zero'
            }
          ]
        }
      }
    })
  );
  const node = renderer.node;
  const decisions = Array.from(node.querySelectorAll('.qloop-decision')).map(
    n => n.textContent
  );
  expect(decisions[0]).toBe('denied: not on shared data');
  expect(node.textContent).not.toContain('Take the reason into account');
  expect(node.textContent).not.toContain('The user denied');
  // An error of a step that ran is still shown.
  expect(node.textContent).toContain('ZeroDivisionError: division by zero');
  renderer.dispose();
});
