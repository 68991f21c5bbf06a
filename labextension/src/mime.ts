/**
 * The MIME extension: a readable view of saved agent turns in outputs.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { TRANSCRIPT_MIME } from './record';
import { TranscriptRenderer } from './transcript';

/** Renderer factory for the transcript MIME type. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  // The view writes record text as text and sanitizes the Markdown answer,
  // so it may render in untrusted notebooks too.
  safe: true,
  mimeTypes: [TRANSCRIPT_MIME],
  createRenderer: options => new TranscriptRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'qloop-kernel:transcript',
  description: 'Renders saved qloop agent turns.',
  rendererFactory,
  // Ahead of the text/markdown and text/plain fallbacks in the same output.
  rank: 0
};

export default extension;
