/**
 * Markdown from a model or a record, rendered as untrusted whatever the
 * output's trust state.
 *
 * JupyterLab trusts outputs made by the running kernel, so its renderers would
 * show such HTML as is. Here the Markdown always goes through JupyterLab's
 * parser and sanitizer (`trusted: false`) into an inert document, is cut down
 * by `hardenTree`, and only then enters the page.
 */
import { renderMarkdown } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { TranslationBundle } from '@jupyterlab/translation';

import { hardenLink, hardenTree, inertDocument, visibleText } from './sanitize';

/** Class of the `<pre>` that shows an answer as text. */
export const ANSWER_TEXT_CLASS = 'qloop-answer-text';

/**
 * Render `source` into a detached element of an inert document, sanitized and
 * hardened; `commitMarkdown` moves it into the page.
 */
export async function renderSafeMarkdown(
  source: string,
  options: IRenderMime.IRendererOptions,
  trans: TranslationBundle,
  baseUrl: string
): Promise<HTMLElement> {
  const doc = inertDocument(baseUrl);
  const staging = doc.createElement('div');
  doc.body.appendChild(staging);
  if (!options.markdownParser) {
    staging.appendChild(answerText(doc, source, trans));
    return staging;
  }
  await renderMarkdown({
    host: staging,
    source,
    trusted: false,
    sanitizer: options.sanitizer,
    resolver: options.resolver,
    linkHandler: options.linkHandler,
    // Typesetting needs the page: it runs in `commitMarkdown`.
    latexTypesetter: null,
    shouldTypeset: false,
    markdownParser: options.markdownParser,
    translator: options.translator
  });
  hardenTree(staging, { baseUrl, trans });
  return staging;
}

/** The answer as plain text (bidi controls shown), for when Markdown fails. */
export function answerText(
  doc: Document,
  source: string,
  trans: TranslationBundle
): HTMLElement {
  const pre = doc.createElement('pre');
  pre.className = ANSWER_TEXT_CLASS;
  pre.appendChild(visibleText(doc, source, trans));
  return pre;
}

/**
 * Move a rendered answer into `host` (emptied first) and typeset its math.
 * Links the typesetter makes (`\href`) get the same checks as the others.
 */
export async function commitMarkdown(
  host: HTMLElement,
  rendered: HTMLElement,
  typesetter: IRenderMime.ILatexTypesetter | null
): Promise<void> {
  host.textContent = '';
  while (rendered.firstChild) {
    host.appendChild(rendered.firstChild);
  }
  if (!typesetter) {
    return;
  }
  try {
    await typesetter.typeset(host);
  } catch (error) {
    console.warn('qloop: the answer could not be typeset', error);
  }
  const baseUrl = host.ownerDocument.baseURI;
  host.querySelectorAll('a').forEach(anchor => hardenLink(anchor, baseUrl));
}

/**
 * Render an untrusted answer into `host`: as hardened Markdown, or as text
 * when the Markdown cannot be rendered. `isCurrent` is asked before the page
 * changes, so that a slower, older render never replaces a newer one.
 */
export async function renderAnswer(
  host: HTMLElement,
  source: string,
  options: IRenderMime.IRendererOptions,
  trans: TranslationBundle,
  isCurrent: () => boolean = () => true
): Promise<void> {
  const baseUrl = host.ownerDocument.baseURI;
  let rendered: HTMLElement;
  try {
    rendered = await renderSafeMarkdown(source, options, trans, baseUrl);
  } catch (error) {
    console.warn('qloop: the answer could not be rendered as Markdown', error);
    rendered = host.ownerDocument.createElement('div');
    rendered.appendChild(answerText(host.ownerDocument, source, trans));
  }
  if (isCurrent()) {
    await commitMarkdown(host, rendered, options.latexTypesetter);
  }
}
