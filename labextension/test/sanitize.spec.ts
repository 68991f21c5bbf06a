/**
 * The hardening pass on untrusted HTML, and bidi controls shown as text.
 */
import {
  BIDI_CLASS,
  REMOVED_IMAGE_CLASS,
  bidiEscape,
  escapeBidi,
  hardenTree,
  inertDocument,
  isEmbeddedImage,
  safeHref,
  visibleText
} from '../src/sanitize';

const BASE = 'http://localhost:8888/lab/tree/work/demo.ipynb';
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** Parse `html` into an inert document, harden it, return its root. */
function harden(html: string): HTMLElement {
  const doc = inertDocument(BASE);
  const root = doc.createElement('div');
  root.innerHTML = html;
  hardenTree(root, { baseUrl: BASE });
  return root;
}

describe('hardenTree', () => {
  it('removes scripts, styles, frames, plugins and SVG with their content', () => {
    const root = harden(
      '<p>keep</p><script>alert(1)</script><style>body{display:none}</style>' +
        '<iframe src="https://example.com"></iframe><object data="x"></object>' +
        '<embed src="x"><svg onload="alert(1)"><script>alert(2)</script></svg>' +
        '<math><mi>x</mi></math><template><b>t</b></template><noscript>n</noscript>' +
        '<link rel="stylesheet" href="x.css"><meta http-equiv="refresh" content="0">' +
        '<base href="https://evil.example/">'
    );
    expect(root.innerHTML).toBe('<p>keep</p>');
  });

  it('removes forms and controls, keeping the text around them', () => {
    const root = harden(
      '<form action="https://evil.example/"><label>Name <input name="q"></label>' +
        '<select><option>a</option></select><textarea>t</textarea>' +
        '<button formaction="x">Approve</button></form>'
    );
    expect(root.innerHTML).toBe('Name ');
  });

  it('keeps task-list checkboxes as marks', () => {
    const root = harden(
      '<ul><li><input type="checkbox" checked disabled> done</li>' +
        '<li><input type="checkbox" disabled> todo</li></ul>'
    );
    expect(root.textContent).toBe('☑ done☐ todo');
    expect(root.querySelector('input')).toBeNull();
  });

  it('removes event handlers, styles, ids, data attributes and foreign classes', () => {
    const root = harden(
      '<p onclick="alert(1)" style="position:fixed;inset:0" id="x" name="y" ' +
        'data-commandlinker-command="notebook:run-all-cells" class="jp-Dialog" ' +
        'tabindex="0" contenteditable title="tip" dir="rtl" lang="ar">text</p>'
    );
    expect(root.innerHTML).toBe('<p title="tip">text</p>');
  });

  it('keeps the classes of highlighted code and nothing else', () => {
    const root = harden(
      '<pre><code class="language-python jp-Dialog"><span class="ͼ1a cm-tooltip">' +
        'x</span></code></pre><span class="ͼ2">y</span><div class="ͼ3">z</div>'
    );
    expect(root.innerHTML).toBe(
      '<pre><code class="language-python"><span class="ͼ1a">x</span></code></pre>' +
        '<span class="ͼ2">y</span><div>z</div>'
    );
  });

  it('unwraps unknown elements and keeps their content', () => {
    const root = harden(
      '<section><font color="red">a</font><center>b</center><bdo dir="rtl">c</bdo></section>'
    );
    expect(root.innerHTML).toBe('abc');
  });

  it('keeps embedded PNG, JPEG and GIF images only', () => {
    const root = harden(
      `<img src="${PNG}" alt="plot" width="100" height="50%" onload="alert(1)">` +
        '<img src="http://127.0.0.1:9/x.png" alt="remote">' +
        '<img src="data:image/svg+xml,<svg onload=alert(1)>" alt="svg">' +
        '<img src="x" onerror="alert(1)">' +
        `<img src="${PNG}" srcset="http://127.0.0.1:9/big.png 2x" width="9e9">` +
        '<picture><source srcset="http://127.0.0.1:9/p.png"><img src="x" alt="p"></picture>' +
        '<video poster="http://127.0.0.1:9/v.png"></video>'
    );
    const images = root.querySelectorAll('img');
    expect(images).toHaveLength(2);
    expect(images[0].outerHTML).toBe(
      `<img src="${PNG}" alt="plot" width="100" height="50%">`
    );
    expect(images[1].outerHTML).toBe(`<img src="${PNG}">`);
    const removed = Array.from(
      root.querySelectorAll(`.${REMOVED_IMAGE_CLASS}`)
    ).map(node => node.textContent);
    expect(removed).toEqual(['remote', 'svg', 'image']);
    expect(root.innerHTML).not.toContain('127.0.0.1');
  });

  it('lets links open elsewhere, without an opener or referrer', () => {
    const root = harden(
      '<a href="https://example.com/a" target="_top" rel="opener" ping="https://x">a</a>' +
        '<a href="mailto:me@example.com">m</a><a href="data.csv">r</a><a href="#part">f</a>'
    );
    const links = Array.from(root.querySelectorAll('a')).map(a => [
      a.getAttribute('href'),
      a.getAttribute('target'),
      a.getAttribute('rel')
    ]);
    expect(links).toEqual([
      ['https://example.com/a', '_blank', 'noopener noreferrer'],
      ['mailto:me@example.com', '_blank', 'noopener noreferrer'],
      [
        'http://localhost:8888/lab/tree/work/data.csv',
        '_blank',
        'noopener noreferrer'
      ],
      ['#part', '_self', null]
    ]);
    expect(root.querySelector('[ping]')).toBeNull();
  });

  it('turns script, data and other links into text', () => {
    const root = harden(
      '<a href="javascript:alert(1)">j</a><a href=" JaVa&#x09;ScRiPt:alert(1)">t</a>' +
        '<a href="data:text/html,<script>alert(1)</script>">d</a>' +
        '<a href="vbscript:x">v</a><a href="file:///etc/passwd">f</a><a href="">e</a>'
    );
    for (const anchor of Array.from(root.querySelectorAll('a'))) {
      expect(anchor.attributes).toHaveLength(0);
    }
    expect(root.textContent).toBe('jtdvfe');
  });

  it('shows bidi controls in text and attributes', () => {
    const root = harden('<code>a\u202eb</code><img src="x" alt="c\u2066d">');
    const marker = root.querySelector(`code .${BIDI_CLASS}`);
    expect(marker?.textContent).toBe('\\u202e');
    expect(marker?.getAttribute('title')).toBe(
      'bidirectional control character U+202E'
    );
    expect(root.textContent).toBe('a\\u202ebc\\u2066d');
    expect(root.textContent).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
  });

  it('removes comments', () => {
    expect(harden('a<!-- <script>alert(1)</script> -->b').innerHTML).toBe('ab');
  });
});

describe('safeHref', () => {
  it.each([
    ['https://example.com/x?y#z', 'https://example.com/x?y#z'],
    ['  http://example.com  ', 'http://example.com/'],
    ['mailto:a@b.c', 'mailto:a@b.c'],
    ['../data.csv', 'http://localhost:8888/lab/tree/data.csv'],
    ['#top', '#top'],
    ['javascript:alert(1)', null],
    ['java\tscript:alert(1)', null],
    ['\u0001javascript:alert(1)', null],
    ['JAVASCRIPT:alert(1)', null],
    ['data:text/html,x', null],
    ['blob:http://localhost/x', null],
    ['http://[bad', null],
    ['', null]
  ])('%j gives %j', (href, expected) => {
    expect(safeHref(href, BASE)).toBe(expected);
  });

  it('has nothing for a missing href', () => {
    expect(safeHref(null, BASE)).toBeNull();
  });
});

describe('isEmbeddedImage', () => {
  it('accepts PNG, JPEG and GIF data only', () => {
    expect(isEmbeddedImage(PNG)).toBe(true);
    expect(isEmbeddedImage('data:image/jpeg;base64,AAAA')).toBe(true);
    expect(isEmbeddedImage(' DATA:IMAGE/GIF;base64,AAAA')).toBe(true);
    expect(isEmbeddedImage('data:image/svg+xml;base64,AAAA')).toBe(false);
    expect(isEmbeddedImage('data:text/html;base64,AAAA')).toBe(false);
    expect(isEmbeddedImage('https://example.com/x.png')).toBe(false);
    expect(isEmbeddedImage('x.png')).toBe(false);
    expect(isEmbeddedImage(null)).toBe(false);
  });
});

describe('bidi controls', () => {
  it('escapes each of the nine controls', () => {
    const controls = '\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069';
    expect(escapeBidi(`x${controls}y`)).toBe(
      'x\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069y'
    );
    expect(bidiEscape('\u202e')).toBe('\\u202e');
    expect(escapeBidi('plain \u200f text')).toBe('plain \u200f text');
  });

  it('builds text with a marker per control', () => {
    const fragment = visibleText(document, 'a\u202e\u202eb');
    const holder = document.createElement('div');
    holder.appendChild(fragment);
    expect(holder.innerHTML).toBe(
      'a<span class="qloop-bidi" title="bidirectional control character U+202E">\\u202e</span>' +
        '<span class="qloop-bidi" title="bidirectional control character U+202E">\\u202e</span>b'
    );
  });

  it('keeps markup in text as text', () => {
    const holder = document.createElement('div');
    holder.appendChild(visibleText(document, '<img src=x onerror=alert(1)>'));
    expect(holder.children).toHaveLength(0);
    expect(holder.textContent).toBe('<img src=x onerror=alert(1)>');
  });
});
