/**
 * Untrusted HTML cut down to what an answer needs: text, lists, tables, code,
 * links that open elsewhere, and images embedded in the output.
 *
 * JupyterLab's sanitizer runs first; it still lets through forms, buttons,
 * `style` attributes, classes, command-linker attributes and remote images,
 * so `hardenTree` removes those too. The tree must belong to an inert
 * document (`inertDocument`): nothing in it loads or runs until it is moved
 * into the page, after hardening.
 *
 * Bidi controls (U+202A–U+202E, U+2066–U+2069) in record text are shown as
 * visible markers and never reorder the text around them.
 */
import { TranslationBundle, nullTranslator } from '@jupyterlab/translation';

/** The bidi embedding, override and isolate controls, each as one match. */
const BIDI_SPLIT = /([\u202A-\u202E\u2066-\u2069])/;
const BIDI_GLOBAL = /[\u202A-\u202E\u2066-\u2069]/g;

/** Class of the visible marker that stands for a bidi control. */
export const BIDI_CLASS = 'qloop-bidi';
/** Class of the text that stands for an image that is not shown. */
export const REMOVED_IMAGE_CLASS = 'qloop-image-removed';

const HTML_NAMESPACE = 'http://www.w3.org/1999/xhtml';

/** Elements kept, with their allowed attributes. */
const KEPT: ReadonlySet<string> = new Set([
  'a',
  'abbr',
  'b',
  'blockquote',
  'br',
  'caption',
  'cite',
  'code',
  'col',
  'colgroup',
  'dd',
  'del',
  'details',
  'dfn',
  'div',
  'dl',
  'dt',
  'em',
  'figcaption',
  'figure',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'hr',
  'i',
  'img',
  'ins',
  'kbd',
  'li',
  'mark',
  'ol',
  'p',
  'pre',
  'q',
  'rp',
  'rt',
  'ruby',
  's',
  'samp',
  'small',
  'span',
  'strong',
  'sub',
  'summary',
  'sup',
  'table',
  'tbody',
  'td',
  'tfoot',
  'th',
  'thead',
  'time',
  'tr',
  'u',
  'ul',
  'var',
  'wbr'
]);

/** Elements removed with everything inside them; any other element is unwrapped. */
const DROPPED: ReadonlySet<string> = new Set([
  'applet',
  'area',
  'audio',
  'base',
  'button',
  'canvas',
  'datalist',
  'dialog',
  'embed',
  'frame',
  'frameset',
  'head',
  'iframe',
  'input',
  'link',
  'map',
  'math',
  'meta',
  'noscript',
  'object',
  'optgroup',
  'option',
  'output',
  'param',
  'picture',
  'portal',
  'script',
  'select',
  'slot',
  'source',
  'style',
  'svg',
  'template',
  'textarea',
  'title',
  'track',
  'video'
]);

const HEADING_ATTRIBUTES = ['data-jupyter-id'];

/** Attributes allowed per element (`*`: on every kept element). */
const ATTRIBUTES: Readonly<Record<string, readonly string[]>> = {
  '*': ['title'],
  a: ['href', 'class'],
  img: ['src', 'alt', 'width', 'height'],
  td: ['colspan', 'rowspan', 'align'],
  th: ['colspan', 'rowspan', 'align', 'scope'],
  ol: ['start', 'reversed', 'type'],
  li: ['value'],
  col: ['span'],
  colgroup: ['span'],
  details: ['open'],
  time: ['datetime'],
  code: ['class'],
  span: ['class'],
  h1: HEADING_ATTRIBUTES,
  h2: HEADING_ATTRIBUTES,
  h3: HEADING_ATTRIBUTES,
  h4: HEADING_ATTRIBUTES,
  h5: HEADING_ATTRIBUTES,
  h6: HEADING_ATTRIBUTES
};

/**
 * Class names kept, per element: the language of a code block, the
 * highlighting classes of its tokens, JupyterLab's heading anchors. Any other
 * class could borrow the page's own styles (a dialog, an overlay).
 */
const CLASSES: Readonly<Record<string, RegExp>> = {
  code: /^language-[\w+#.-]+$/,
  span: /^ͼ[0-9a-z]+$/,
  a: /^jp-InternalAnchorLink$/
};

const SIZE = /^\d{1,4}%?$/;
const LINK_PROTOCOLS: readonly string[] = ['http:', 'https:', 'mailto:'];
const EMBEDDED_IMAGE = /^data:image\/(png|jpeg|gif)[;,]/i;

/** Settings of one hardening pass. */
export interface IHardenOptions {
  /** The URL relative links are resolved against (the page's base URL). */
  baseUrl: string;
  /** Strings shown in place of removed content. */
  trans?: TranslationBundle;
}

function defaultTrans(): TranslationBundle {
  return nullTranslator.load('qloop-kernel');
}

/** The `\u202e`-style escape of one character. */
export function bidiEscape(char: string): string {
  return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** Whether a text holds a bidi control. */
export function hasBidi(text: string): boolean {
  return BIDI_SPLIT.test(text);
}

/** A text with every bidi control replaced by its escape. */
export function escapeBidi(text: string): string {
  return text.replace(BIDI_GLOBAL, bidiEscape);
}

/**
 * A text as nodes of `doc`: plain text, with each bidi control shown as a
 * highlighted escape (`\u202e`) instead of being applied.
 */
export function visibleText(
  doc: Document,
  text: string,
  trans: TranslationBundle = defaultTrans()
): DocumentFragment {
  const fragment = doc.createDocumentFragment();
  text.split(BIDI_SPLIT).forEach((part, index) => {
    if (index % 2 === 0) {
      if (part) {
        fragment.appendChild(doc.createTextNode(part));
      }
      return;
    }
    const marker = doc.createElement('span');
    marker.className = BIDI_CLASS;
    marker.textContent = bidiEscape(part);
    const code = part.charCodeAt(0).toString(16).toUpperCase();
    marker.title = trans.__('bidirectional control character U+%1', code);
    fragment.appendChild(marker);
  });
  return fragment;
}

/**
 * The link a safe anchor may point to, or null: http, https and mailto
 * URLs, relative ones (resolved against `baseUrl`) and in-page fragments.
 * The URL parser sees the scheme as the browser would (`java\tscript:` too).
 */
export function safeHref(href: string | null, baseUrl: string): string | null {
  const text = (href ?? '').trim();
  if (!text) {
    return null;
  }
  if (text.startsWith('#')) {
    return text;
  }
  let url: URL;
  try {
    url = new URL(text, baseUrl);
  } catch {
    return null;
  }
  return LINK_PROTOCOLS.includes(url.protocol) ? url.href : null;
}

/** Whether an image source is one the page may show: PNG, JPEG or GIF data. */
export function isEmbeddedImage(src: string | null): boolean {
  return EMBEDDED_IMAGE.test((src ?? '').trim());
}

/** An inert document: what is parsed into it neither loads nor runs. */
export function inertDocument(baseUrl: string): Document {
  const doc = document.implementation.createHTMLDocument('');
  const base = doc.createElement('base');
  base.href = baseUrl;
  doc.head.appendChild(base);
  return doc;
}

/** Make an anchor safe: a checked link that opens elsewhere, or plain text. */
export function hardenLink(anchor: Element, baseUrl: string): void {
  const href = safeHref(anchor.getAttribute('href'), baseUrl);
  anchor.removeAttribute('target');
  anchor.removeAttribute('rel');
  if (href === null) {
    anchor.removeAttribute('href');
    return;
  }
  anchor.setAttribute('href', href);
  if (href.startsWith('#')) {
    anchor.setAttribute('target', '_self');
    return;
  }
  anchor.setAttribute('target', '_blank');
  anchor.setAttribute('rel', 'noopener noreferrer');
}

function allowedAttribute(tag: string, name: string): boolean {
  return (
    ATTRIBUTES['*'].includes(name) || (ATTRIBUTES[tag] ?? []).includes(name)
  );
}

function keepClasses(element: Element, tag: string): void {
  const pattern = CLASSES[tag];
  const kept = pattern
    ? Array.from(element.classList).filter(name => pattern.test(name))
    : [];
  if (kept.length === 0) {
    element.removeAttribute('class');
  } else {
    element.setAttribute('class', kept.join(' '));
  }
}

function cleanAttributes(element: Element, tag: string): void {
  for (const { name, value } of Array.from(element.attributes)) {
    if (!allowedAttribute(tag, name)) {
      element.removeAttribute(name);
    } else if ((name === 'width' || name === 'height') && !SIZE.test(value)) {
      element.removeAttribute(name);
    } else if (hasBidi(value)) {
      element.setAttribute(name, escapeBidi(value));
    }
  }
  if (element.hasAttribute('class')) {
    keepClasses(element, tag);
  }
}

function removedImage(image: Element, trans: TranslationBundle): Element {
  const doc = image.ownerDocument;
  const placeholder = doc.createElement('span');
  placeholder.className = REMOVED_IMAGE_CLASS;
  const alt = (image.getAttribute('alt') ?? '').trim();
  placeholder.textContent = escapeBidi(alt || trans.__('image'));
  placeholder.title = trans.__(
    'image not loaded: only images embedded in the output are shown'
  );
  return placeholder;
}

/** Remove an element; a task-list checkbox stays as a text mark. */
function dropElement(element: Element): void {
  const isCheckbox =
    element.localName === 'input' &&
    (element.getAttribute('type') ?? '').toLowerCase() === 'checkbox';
  if (isCheckbox) {
    const mark = element.hasAttribute('checked') ? '☑' : '☐';
    element.replaceWith(element.ownerDocument.createTextNode(mark));
  } else {
    element.remove();
  }
}

function hardenElement(element: Element, options: IHardenOptions): void {
  const tag = element.localName;
  if (element.namespaceURI !== HTML_NAMESPACE || DROPPED.has(tag)) {
    dropElement(element);
    return;
  }
  if (tag === 'img' && !isEmbeddedImage(element.getAttribute('src'))) {
    element.replaceWith(removedImage(element, options.trans ?? defaultTrans()));
    return;
  }
  for (const child of Array.from(element.children)) {
    hardenElement(child, options);
  }
  if (!KEPT.has(tag)) {
    element.replaceWith(...Array.from(element.childNodes));
    return;
  }
  cleanAttributes(element, tag);
  if (tag === 'a') {
    hardenLink(element, options.baseUrl);
  }
}

/** Show the bidi controls in the text under `root` as visible markers. */
export function markBidi(root: Element, trans?: TranslationBundle): void {
  const doc = root.ownerDocument;
  const walker = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found: Text[] = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (hasBidi(node.nodeValue ?? '')) {
      found.push(node as Text);
    }
  }
  for (const text of found) {
    const parent = text.parentElement;
    if (parent?.classList.contains(BIDI_CLASS)) {
      continue;
    }
    text.replaceWith(visibleText(doc, text.data, trans));
  }
}

/**
 * Cut the tree under `root` (which stays) down to the safe subset: no
 * scripts, styles, frames, plugins, forms or controls, no event handlers,
 * `style`, `id` or `data-*` attributes, no foreign classes, no SVG or MathML,
 * no image that is not embedded PNG, JPEG or GIF data (its alt text is shown
 * instead), no link that is not http(s), mailto, relative or a fragment;
 * every other link opens in a new tab without an opener or referrer.
 */
export function hardenTree(root: Element, options: IHardenOptions): void {
  for (const comment of commentsUnder(root)) {
    comment.remove();
  }
  for (const child of Array.from(root.children)) {
    hardenElement(child, options);
  }
  markBidi(root, options.trans);
}

function commentsUnder(root: Element): Comment[] {
  const walker = root.ownerDocument.createTreeWalker(
    root,
    NodeFilter.SHOW_COMMENT
  );
  const found: Comment[] = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    found.push(node as Comment);
  }
  return found;
}
