/**
 * The MIME extensions: the agent's answer, and a readable view of saved
 * agent turns. Both treat their content as untrusted, so they are marked safe
 * and render in untrusted notebooks too.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { AnswerRenderer } from './answer';
import { PLAN_MIME, PlanRenderer } from './plan';
import { ANSWER_MIME, TRANSCRIPT_MIME } from './record';
import { TranscriptRenderer } from './transcript';

/** Renderer factory for the transcript MIME type. */
export const transcriptRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [TRANSCRIPT_MIME],
  createRenderer: options => new TranscriptRenderer(options)
};

/** Renderer factory for the answer MIME type. */
export const answerRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [ANSWER_MIME],
  createRenderer: options => new AnswerRenderer(options)
};

/** Renderer factory for the plan MIME type. */
export const planRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [PLAN_MIME],
  createRenderer: options => new PlanRenderer(options)
};

const extensions: IRenderMime.IExtension[] = [
  {
    id: 'qloop-kernel:transcript',
    description: 'Renders saved qloop agent turns.',
    rendererFactory: transcriptRendererFactory,
    // Ahead of the text/markdown and text/plain fallbacks in the same output.
    rank: 0
  },
  {
    id: 'qloop-kernel:answer',
    description: "Renders the qloop agent's answer as untrusted Markdown.",
    rendererFactory: answerRendererFactory,
    // Ahead of the text/plain fallback in the same output.
    rank: 0
  },
  {
    id: 'qloop-kernel:plan',
    description:
      'Renders the plan of a qloop plan turn as an editable list with Run plan, Edit and Discard.',
    rendererFactory: planRendererFactory,
    // Ahead of the text/html and text/plain fallbacks in the same output.
    rank: 0
  }
];

export default extensions;
