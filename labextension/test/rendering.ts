/**
 * Renderer options as JupyterLab builds them: its sanitizer and its
 * marked-based Markdown parser (with the CodeMirror language registry).
 */
import { Sanitizer } from '@jupyterlab/apputils';
import { EditorLanguageRegistry } from '@jupyterlab/codemirror';
import { createMarkdownParser } from '@jupyterlab/markedparser-extension';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { ITranslator } from '@jupyterlab/translation';

/** Options for a renderer of `mimeType`; `markdownParser: null` for none. */
export function rendererOptions(
  mimeType: string,
  extra: Partial<IRenderMime.IRendererOptions> = {}
): IRenderMime.IRendererOptions {
  return {
    mimeType,
    sanitizer: new Sanitizer(),
    resolver: null,
    linkHandler: null,
    latexTypesetter: null,
    markdownParser: createMarkdownParser(new EditorLanguageRegistry()),
    ...extra
  };
}

/** The same, with a translator. */
export function translatedOptions(
  mimeType: string,
  translator: ITranslator
): IRenderMime.IRendererOptions {
  return rendererOptions(mimeType, { translator });
}

/** The payloads of the browser test, each setting `window.__qloopPwned` if it ran. */
export const PAYLOADS = [
  '<script>window.__qloopPwned = "script"</script>',
  '<img src=x onerror="window.__qloopPwned = \'img\'">',
  '<svg onload="window.__qloopPwned = \'svg\'"><circle r="5"/></svg>',
  '<svg><script>window.__qloopPwned = "svg-script"</script></svg>',
  '<details open ontoggle="window.__qloopPwned = \'details\'"><summary>more</summary>hidden</details>',
  '<iframe src="javascript:parent.__qloopPwned = \'iframe\'"></iframe>',
  '<iframe srcdoc="<script>parent.__qloopPwned = 1</script>"></iframe>',
  "[click me](javascript:window.__qloopPwned='md-link')",
  '<a href="javascript:window.__qloopPwned = \'a\'">html link</a>',
  '<a href=" JaVa&#x09;ScRiPt:window.__qloopPwned = \'tab\'">tab link</a>',
  '<a href="data:text/html,<script>alert(1)</script>">data link</a>',
  '<form action="javascript:window.__qloopPwned = \'form\'"><input name="q" value="x"><button>Approve</button></form>',
  '<div style="position:fixed;inset:0;z-index:9999;background:red">cover</div>',
  '<style>body { display: none }</style>',
  '<img src="http://127.0.0.1:9/x.png" alt="remote picture">',
  '![markdown picture](http://127.0.0.1:9/md.png)',
  '<object data="http://127.0.0.1:9/o.swf"></object><embed src="http://127.0.0.1:9/e.swf">',
  '<button data-commandlinker-command="notebook:run-all-cells">Run all</button>',
  '<div class="jp-Dialog">borrowed class</div>',
  '<span dir="rtl">rtl</span> and <bdo dir="rtl">bdo</bdo>',
  '`x = 1 # \u202egnp.exe`'
];
