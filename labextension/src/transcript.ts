/**
 * The static view of a saved agent turn, for the transcript MIME type.
 *
 * Everything in a record is untrusted text: it is written with `textContent`,
 * and the Markdown answer goes through the application's sanitizer.
 */
import { renderMarkdown } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { isLiveClient } from './live';
import {
  IImagePlaceholder,
  IToolCall,
  ITurnRecord,
  TRANSCRIPT_MIME,
  readRecord
} from './record';

/** Class of the renderer's root node. */
export const TRANSCRIPT_CLASS = 'qloop-transcript';
const UNREADABLE_CLASS = 'qloop-transcript-unreadable';
/** Added when the view is folded next to the live output of its turn. */
export const LIVE_CLASS = 'qloop-transcript-live';

function element<K extends keyof HTMLElementTagNameMap>(
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

function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** A byte size in the units a person reads: `812 B`, `23 kB`, `1.4 MB`. */
export function formatBytes(bytes: number | null): string {
  if (bytes === null || bytes < 0) {
    return 'size unknown';
  }
  if (bytes < 1000) {
    return `${Math.round(bytes)} B`;
  }
  if (bytes < 1_000_000) {
    return `${Math.round(bytes / 1000)} kB`;
  }
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** The text shown in place of an image left out of the record. */
export function imagePlaceholderText(image: IImagePlaceholder): string {
  const hash = image.sha256 ? `, sha256 ${image.sha256.slice(0, 8)}…` : '';
  return `image, ${formatBytes(image.bytes)}${hash}`;
}

function tokenSummary(record: ITurnRecord): string {
  const { input, output, cacheRead, cacheWrite } = record.usage;
  const parts: [number | null, string][] = [
    [input, 'in'],
    [output, 'out'],
    [cacheRead, 'cache read'],
    [cacheWrite, 'cache write']
  ];
  const known: string[] = [];
  for (const [value, label] of parts) {
    if (value !== null) {
      known.push(`${count(value)} ${label}`);
    }
  }
  return known.length === 0 ? 'tokens unknown' : `tokens: ${known.join(' · ')}`;
}

function costText(cost: number | null): string {
  return cost === null ? 'cost unknown' : `$${cost.toFixed(4)}`;
}

function header(record: ITurnRecord): HTMLElement {
  const node = element('div', 'qloop-transcript-header');
  const badge = element(
    'span',
    `qloop-status qloop-status-${record.status}`,
    record.statusLabel
  );
  badge.dataset.qloopStatus = record.status;
  node.appendChild(badge);
  const facts = [
    record.model ?? 'model unknown',
    record.modelCalls === null
      ? null
      : `${count(record.modelCalls)} model calls`,
    `${count(record.toolCalls.length)} tool calls`,
    tokenSummary(record),
    costText(record.costUsd),
    record.elapsedS === null ? null : `${record.elapsedS.toFixed(1)} s`,
    record.approvalWaitS
      ? `${record.approvalWaitS.toFixed(1)} s waiting for approval`
      : null,
    record.approveMode === null ? null : `approval: ${record.approveMode}`
  ];
  for (const fact of facts) {
    if (fact !== null) {
      node.appendChild(element('span', 'qloop-fact', fact));
    }
  }
  return node;
}

function section(title: string, className: string): HTMLElement {
  const node = element('div', `qloop-section ${className}`);
  node.appendChild(element('div', 'qloop-section-title', title));
  return node;
}

function decision(call: IToolCall): HTMLElement {
  const node = element(
    'span',
    `qloop-decision qloop-decision-${call.decision}`
  );
  node.dataset.qloopDecision = call.decision;
  node.textContent = call.reason
    ? `${call.decisionLabel}: ${call.reason}`
    : call.decisionLabel;
  return node;
}

function toolCallCard(call: IToolCall): HTMLElement {
  const card = element('div', 'qloop-tool-call');
  card.classList.toggle('qloop-tool-call-error', call.isError);
  const title = element('div', 'qloop-tool-call-header');
  title.appendChild(element('span', 'qloop-tool-name', call.name));
  title.appendChild(decision(call));
  if (call.durationS !== null) {
    title.appendChild(
      element('span', 'qloop-fact', `${call.durationS.toFixed(2)} s`)
    );
  }
  card.appendChild(title);
  card.appendChild(
    element('pre', 'qloop-tool-input', call.code ?? call.inputJson)
  );
  if (call.outputSummary) {
    const label = call.isError ? 'Error' : 'Output';
    card.appendChild(element('div', 'qloop-section-title', label));
    card.appendChild(element('pre', 'qloop-tool-output', call.outputSummary));
  }
  for (const image of call.images) {
    card.appendChild(
      element('div', 'qloop-image-placeholder', imagePlaceholderText(image))
    );
  }
  return card;
}

function staticParts(record: ITurnRecord): HTMLElement[] {
  const parts = [header(record)];
  if (record.error) {
    parts.push(element('div', 'qloop-error', record.error));
  }
  const prompt = section('Prompt', 'qloop-prompt');
  prompt.appendChild(element('pre', 'qloop-prompt-text', record.prompt));
  parts.push(prompt);
  if (record.toolCalls.length > 0) {
    const calls = section('Tool calls', 'qloop-tool-calls');
    record.toolCalls.forEach(call => calls.appendChild(toolCallCard(call)));
    parts.push(calls);
  }
  return parts;
}

/** Renders `application/vnd.qloop.transcript+json` outputs. */
export class TranscriptRenderer
  extends Widget
  implements IRenderMime.IRenderer
{
  constructor(private readonly _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass(TRANSCRIPT_CLASS);
  }

  /** Render a record; a malformed one shows why it cannot be read. */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.textContent = '';
    this.removeClass(UNREADABLE_CLASS);
    try {
      const result = readRecord(model.data[TRANSCRIPT_MIME]);
      if (!result.ok) {
        this._showUnreadable(result.reason);
        return;
      }
      this.node.dataset.qloopStatus = result.record.status;
      const host = this._host(model);
      staticParts(result.record).forEach(part => host.appendChild(part));
      await this._renderAnswer(result.record.answer, host);
    } catch (error) {
      this.node.textContent = '';
      this._showUnreadable(
        error instanceof Error ? error.message : String(error)
      );
    }
  }

  /**
   * Where the view goes: the node itself, or a folded section when the live
   * output of the same turn is on the page already.
   */
  private _host(model: IRenderMime.IMimeModel): HTMLElement {
    const meta = model.metadata[TRANSCRIPT_MIME];
    const client =
      meta && typeof meta === 'object' && !Array.isArray(meta)
        ? (meta as { [key: string]: unknown })['live_client']
        : undefined;
    this.removeClass(LIVE_CLASS);
    if (!isLiveClient(client)) {
      return this.node;
    }
    this.addClass(LIVE_CLASS);
    const details = element('details', 'qloop-live-details');
    details.appendChild(
      element('summary', 'qloop-live-summary', 'saved transcript of this turn')
    );
    this.node.appendChild(details);
    return details;
  }

  private _showUnreadable(reason: string): void {
    delete this.node.dataset.qloopStatus;
    this.addClass(UNREADABLE_CLASS);
    this.node.textContent = `unreadable qloop record: ${reason}`;
  }

  private async _renderAnswer(
    answer: string,
    parent: HTMLElement
  ): Promise<void> {
    if (!answer) {
      return;
    }
    const answerSection = section('Answer', 'qloop-answer');
    // JupyterLab's content styles (tables, code, lists) apply to this class.
    const host = element('div', 'qloop-answer-body jp-RenderedHTMLCommon');
    answerSection.appendChild(host);
    parent.appendChild(answerSection);
    const options = this._options;
    if (!options.markdownParser) {
      host.appendChild(element('pre', 'qloop-answer-text', answer));
      return;
    }
    try {
      await this._renderMarkdown(host, answer, options.markdownParser);
    } catch (error) {
      console.warn(
        'qloop: the answer could not be rendered as Markdown',
        error
      );
      host.textContent = '';
      host.appendChild(element('pre', 'qloop-answer-text', answer));
    }
  }

  private _renderMarkdown(
    host: HTMLElement,
    source: string,
    markdownParser: IRenderMime.IMarkdownParser
  ): Promise<void> {
    const options = this._options;
    return renderMarkdown({
      host,
      source,
      // Model text is never trusted, whatever the notebook's trust state.
      trusted: false,
      sanitizer: options.sanitizer,
      resolver: options.resolver,
      linkHandler: options.linkHandler,
      latexTypesetter: options.latexTypesetter,
      markdownParser,
      shouldTypeset: true,
      translator: options.translator
    });
  }
}
