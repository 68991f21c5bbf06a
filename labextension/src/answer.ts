/**
 * The agent's answer (`application/vnd.qloop.answer+json`), streamed or saved:
 * Markdown rendered as untrusted, even in outputs JupyterLab trusts.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { nullTranslator } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { TRANSLATION_DOMAIN } from './labels';
import { renderAnswer } from './markdown';
import { ANSWER_MIME, answerMarkdown } from './record';

/** Class of the renderer's root node. */
export const ANSWER_CLASS = 'qloop-answer-output';
/** Class of the node that holds the rendered Markdown. */
export const ANSWER_BODY_CLASS = 'qloop-answer-body';
const UNREADABLE_CLASS = 'qloop-answer-output-unreadable';

/** Renders `application/vnd.qloop.answer+json` outputs. */
export class AnswerRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass(ANSWER_CLASS);
  }

  /** Render the answer; while it streams, a newer update wins over an older one. */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const generation = ++this._generation;
    const trans = (this._options.translator ?? nullTranslator).load(
      TRANSLATION_DOMAIN
    );
    const markdown = answerMarkdown(model.data[ANSWER_MIME]);
    if (markdown === null) {
      this.addClass(UNREADABLE_CLASS);
      this.node.textContent = trans.__(
        'unreadable qloop answer: expected {"markdown": "<text>"}'
      );
      return;
    }
    this.removeClass(UNREADABLE_CLASS);
    const body = document.createElement('div');
    // JupyterLab's content styles (tables, code, lists) apply to this class.
    body.className = `${ANSWER_BODY_CLASS} jp-RenderedHTMLCommon`;
    await renderAnswer(
      body,
      markdown,
      this._options,
      trans,
      () => generation === this._generation
    );
    if (generation === this._generation) {
      this.node.textContent = '';
      this.node.appendChild(body);
    }
  }

  private _generation = 0;
}
