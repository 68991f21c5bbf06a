/**
 * A DOM element with a class and, optionally, its text (set as text, never
 * as HTML): what the extension's hand-built views are made of.
 */
export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}
