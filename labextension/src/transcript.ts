/**
 * The static view of a saved agent turn, for the transcript MIME type.
 *
 * Everything in a record is untrusted: text is written as text with its bidi
 * controls shown, and the Markdown answer is rendered as untrusted whatever
 * the output's trust state (see `markdown.ts`).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { TranslationBundle, nullTranslator } from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { ANSWER_BODY_CLASS } from './answer';
import { contextLines } from './context';
import { COPYABLE_DECISIONS, copyButton } from './copybutton';
import {
  TRANSLATION_DOMAIN,
  decisionLabel,
  egressKindLabel,
  statusLabel
} from './labels';
import { isLiveClient } from './live';
import { renderAnswer } from './markdown';
import {
  IEgress,
  IImagePlaceholder,
  IRefusal,
  IToolCall,
  ITurnContext,
  ITurnRecord,
  IVariableChange,
  TRANSCRIPT_MIME,
  isJSONObject,
  readRecord,
  statusOf
} from './record';
import { visibleText } from './sanitize';
import { liveOutputToggle } from './supersede';
import { shownNodes } from './visible';

/** Class of the renderer's root node. */
export const TRANSCRIPT_CLASS = 'qloop-transcript';
const UNREADABLE_CLASS = 'qloop-transcript-unreadable';
/** Added when the view is folded next to the live output of its turn. */
export const LIVE_CLASS = 'qloop-transcript-live';
/** How many items of the "sent to the model" list are shown. */
export const EGRESS_SHOWN = 20;
/** Class of the line saying the view shows the cell's saved record. */
export const SOURCE_NOTICE_CLASS = 'qloop-transcript-source';

function defaultTrans(): TranslationBundle {
  return nullTranslator.load(TRANSLATION_DOMAIN);
}

/** An element holding `text` as text, bidi controls shown. */
function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string,
  trans?: TranslationBundle
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.appendChild(visibleText(document, text, trans));
  }
  return node;
}

function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** A byte size in the units a person reads: `812 B`, `23 kB`, `1.4 MB`. */
export function formatBytes(
  bytes: number | null,
  trans: TranslationBundle = defaultTrans()
): string {
  if (bytes === null || bytes < 0) {
    return trans.__('size unknown');
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
export function imagePlaceholderText(
  image: IImagePlaceholder,
  trans: TranslationBundle = defaultTrans()
): string {
  const size = formatBytes(image.bytes, trans);
  return image.sha256
    ? trans.__('image, %1, sha256 %2…', size, image.sha256.slice(0, 8))
    : trans.__('image, %1', size);
}

/** One line of the "sent to the model" list: `variable df · 1,234 chars`. */
export function egressText(
  item: IEgress,
  trans: TranslationBundle = defaultTrans()
): string {
  const kind = egressKindLabel(item.kind, trans);
  const name = item.name ? `${kind} ${item.name}` : kind;
  return item.chars === null
    ? name
    : trans.__('%1 · %2 chars', name, count(item.chars));
}

/** `1 model call`, `12 model calls`, or the `none` text for zero. */
function calls(
  n: number,
  kind: 'model' | 'tool',
  trans: TranslationBundle
): string {
  if (kind === 'model') {
    return n === 0
      ? trans.__('no model call')
      : trans._n('%2 model call', '%2 model calls', n, count(n));
  }
  return n === 0
    ? trans.__('no tool call')
    : trans._n('%2 tool call', '%2 tool calls', n, count(n));
}

/** `tokens: 5,123 in · 842 out · 20,480 cache read`: cache parts only when used. */
function tokenSummary(record: ITurnRecord, trans: TranslationBundle): string {
  const { input, output, cacheRead, cacheWrite } = record.usage;
  const figures = [input, output, cacheRead, cacheWrite];
  if (figures.every(figure => figure === null)) {
    return trans.__('tokens unknown');
  }
  if (figures.every(figure => !figure)) {
    return trans.__('no tokens');
  }
  const known: string[] = [];
  if (input !== null) {
    known.push(trans.__('%1 in', count(input)));
  }
  if (output !== null) {
    known.push(trans.__('%1 out', count(output)));
  }
  if (cacheRead) {
    known.push(trans.__('%1 cache read', count(cacheRead)));
  }
  if (cacheWrite) {
    known.push(trans.__('%1 cache write', count(cacheWrite)));
  }
  return trans.__('tokens: %1', known.join(' · '));
}

/** Tokens and cost, left out for a turn that made no model call and spent nothing. */
function spending(record: ITurnRecord, trans: TranslationBundle): string[] {
  const { input, output, cacheRead, cacheWrite } = record.usage;
  const used = [input, output, cacheRead, cacheWrite].some(figure => !!figure);
  if (record.modelCalls === 0 && !used && !record.costUsd) {
    return [];
  }
  const cost =
    record.costUsd === null
      ? trans.__('cost unknown')
      : `$${record.costUsd.toFixed(4)}`;
  return [tokenSummary(record, trans), cost];
}

function facts(record: ITurnRecord, trans: TranslationBundle): string[] {
  const all = [
    record.model ?? trans.__('model unknown'),
    record.modelCalls === null
      ? null
      : calls(record.modelCalls, 'model', trans),
    calls(record.toolCalls.length, 'tool', trans),
    ...spending(record, trans),
    record.elapsedS === null
      ? null
      : trans.__('%1 s', record.elapsedS.toFixed(1)),
    record.approvalWaitS
      ? trans.__('%1 s waiting for approval', record.approvalWaitS.toFixed(1))
      : null,
    record.approveMode === null
      ? null
      : trans.__('approval: %1', record.approveMode)
  ];
  return all.filter((fact): fact is string => fact !== null);
}

function header(record: ITurnRecord, trans: TranslationBundle): HTMLElement {
  const node = element('div', 'qloop-transcript-header');
  const badge = element(
    'span',
    `qloop-status qloop-status-${record.status}`,
    statusLabel(record.status, trans)
  );
  badge.dataset.qloopStatus = record.status;
  node.appendChild(badge);
  for (const fact of facts(record, trans)) {
    node.appendChild(element('span', 'qloop-fact', fact, trans));
  }
  return node;
}

function section(title: string, className: string): HTMLElement {
  const node = element('div', `qloop-section ${className}`);
  node.appendChild(element('div', 'qloop-section-title', title));
  return node;
}

function decision(call: IToolCall, trans: TranslationBundle): HTMLElement {
  const label = decisionLabel(call.decision, trans);
  const node = element(
    'span',
    `qloop-decision qloop-decision-${call.decision}`,
    call.reason ? `${label}: ${call.reason}` : label,
    trans
  );
  node.dataset.qloopDecision = call.decision;
  return node;
}

function toolCallCard(call: IToolCall, trans: TranslationBundle): HTMLElement {
  const card = element('div', 'qloop-tool-call');
  card.classList.toggle('qloop-tool-call-error', call.isError);
  const title = element('div', 'qloop-tool-call-header');
  const name = call.name ?? trans.__('unnamed tool');
  title.appendChild(element('span', 'qloop-tool-name', name, trans));
  title.appendChild(decision(call, trans));
  if (call.durationS !== null) {
    const duration = trans.__('%1 s', call.durationS.toFixed(2));
    title.appendChild(element('span', 'qloop-fact', duration));
  }
  card.appendChild(title);
  // The code as the approval card shows it: every character, or its mark.
  const input = element('pre', 'qloop-tool-input');
  input.appendChild(shownNodes(document, call.code ?? call.inputJson, trans));
  card.appendChild(input);
  if (call.code !== null && COPYABLE_DECISIONS.includes(call.decision)) {
    card.appendChild(copyButton(call.code, trans));
  }
  // A denied call's result is the text the model read; the decision line above
  // already says, in the person's words, why it did not run.
  if (call.outputSummary && call.decision !== 'denied') {
    const label = call.isError ? trans.__('Error') : trans.__('Output');
    card.appendChild(element('div', 'qloop-section-title', label));
    card.appendChild(
      element('pre', 'qloop-tool-output', call.outputSummary, trans)
    );
  }
  for (const image of call.images) {
    const text = imagePlaceholderText(image, trans);
    card.appendChild(element('div', 'qloop-image-placeholder', text));
  }
  if (call.changes !== null) {
    card.appendChild(changesList(call.changes, trans));
  }
  return card;
}

/** What a code step did to the namespace, one line per variable ("df: DataFrame 600×5 → 598×5"). */
export function changesList(
  changes: IVariableChange[],
  trans: TranslationBundle = defaultTrans()
): HTMLElement {
  const node = element('div', 'qloop-tool-changes');
  node.appendChild(element('div', 'qloop-section-title', trans.__('Changes')));
  if (changes.length === 0) {
    node.appendChild(
      element('div', 'qloop-change-none', trans.__('no variables changed'))
    );
    return node;
  }
  const list = element('ul', 'qloop-change-list');
  for (const change of changes) {
    const item = element(
      'li',
      `qloop-change qloop-change-${change.kind}`,
      `${change.name}: ${change.summary}`,
      trans
    );
    item.dataset.qloopChange = change.kind;
    list.appendChild(item);
  }
  node.appendChild(list);
  return node;
}

function refusalSection(
  refusal: IRefusal,
  trans: TranslationBundle
): HTMLElement {
  const node = section(trans.__('Refusal'), 'qloop-refusal');
  if (refusal.category) {
    const category = trans.__('category: %1', refusal.category);
    node.appendChild(element('div', 'qloop-refusal-category', category, trans));
  }
  if (refusal.explanation) {
    const text = refusal.explanation;
    node.appendChild(element('div', 'qloop-refusal-explanation', text, trans));
  }
  return node;
}

function egressSection(
  egress: IEgress[],
  trans: TranslationBundle
): HTMLElement {
  const node = section(trans.__('Sent to the model'), 'qloop-egress');
  const list = element('ul', 'qloop-egress-list');
  for (const item of egress.slice(0, EGRESS_SHOWN)) {
    const line = element(
      'li',
      'qloop-egress-item',
      egressText(item, trans),
      trans
    );
    line.dataset.qloopKind = item.kind;
    list.appendChild(line);
  }
  if (egress.length > EGRESS_SHOWN) {
    const more = trans.__('and %1 more', egress.length - EGRESS_SHOWN);
    list.appendChild(element('li', 'qloop-egress-more', more));
  }
  node.appendChild(list);
  return node;
}

function contextSection(
  context: ITurnContext,
  trans: TranslationBundle
): HTMLElement {
  const node = section(trans.__('Context besides the prompt'), 'qloop-context');
  const list = element('ul', 'qloop-context-list');
  for (const line of contextLines(context, trans)) {
    list.appendChild(element('li', 'qloop-context-item', line, trans));
  }
  node.appendChild(list);
  return node;
}

/** Everything but the answer, top to bottom. */
export function staticParts(
  record: ITurnRecord,
  trans: TranslationBundle = defaultTrans()
): HTMLElement[] {
  const parts = [header(record, trans)];
  if (record.received) {
    const notice = trans.__('received from elsewhere: not signed by you');
    parts.push(element('div', 'qloop-received', notice));
  }
  if (record.error) {
    parts.push(element('div', 'qloop-error', record.error, trans));
  }
  if (record.refusal) {
    parts.push(refusalSection(record.refusal, trans));
  }
  const prompt = section(trans.__('Prompt'), 'qloop-prompt');
  prompt.appendChild(element('pre', 'qloop-prompt-text', record.prompt, trans));
  parts.push(prompt);
  if (record.toolCalls.length > 0) {
    const calls = section(trans.__('Tool calls'), 'qloop-tool-calls');
    record.toolCalls.forEach(call =>
      calls.appendChild(toolCallCard(call, trans))
    );
    parts.push(calls);
  }
  if (record.context) {
    parts.push(contextSection(record.context, trans));
  }
  if (record.egress.length > 0) {
    parts.push(egressSection(record.egress, trans));
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
    this._trans = (_options.translator ?? nullTranslator).load(
      TRANSLATION_DOMAIN
    );
  }

  /**
   * Render a record; a malformed one shows why it cannot be read. While the
   * turn grows, a newer update wins over a slower, older one.
   */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this._model = model;
    const generation = ++this._generation;
    const isCurrent = () => generation === this._generation;
    try {
      const shown = this._source ?? model.data[TRANSCRIPT_MIME];
      const result = readRecord(shown, this._trans);
      if (!result.ok) {
        this._showUnreadable(result.reason);
        return;
      }
      const view = document.createElement('div');
      const host = this._host(model, view);
      // The kernel, which alone can check a record's signature, marks a
      // received record in the output's metadata when it shows it.
      const record = receivedByMeta(model)
        ? { ...result.record, received: true }
        : result.record;
      if (this._source !== null) {
        const notice = this._trans.__(
          "shown from the cell's saved record, which a re-run replays: the output saved with the notebook holds other code"
        );
        host.appendChild(element('div', SOURCE_NOTICE_CLASS, notice));
      }
      staticParts(record, this._trans).forEach(part => host.appendChild(part));
      if (host === view) {
        // The only view of its turn: it can show the live output it hides.
        view
          .querySelector('.qloop-transcript-header')
          ?.appendChild(liveOutputToggle(this._trans));
      }
      await this._renderAnswer(record.answer, host, isCurrent);
      if (isCurrent()) {
        this._show(view, result.record.status);
      }
    } catch (error) {
      if (isCurrent()) {
        this._showUnreadable(
          error instanceof Error ? error.message : String(error)
        );
      }
    }
  }

  /**
   * Show the cell's saved record (what a re-run replays) instead of the
   * output's when their code differs, so the view shows the code the card
   * will run; null: the output's own record.
   */
  showSource(record: JSONObject | null): void {
    // A running turn's metadata is ahead of its output until the turn ends.
    const differs =
      record !== null &&
      statusOf(record) !== 'running' &&
      !sameCode(record, this._model);
    const next = differs ? record : null;
    if (next === this._source) {
      return;
    }
    this._source = next;
    if (this._model) {
      void this.renderModel(this._model);
    }
  }

  private _show(view: HTMLElement, status: string): void {
    this.removeClass(UNREADABLE_CLASS);
    this.node.dataset.qloopStatus = status;
    this.node.textContent = '';
    while (view.firstChild) {
      this.node.appendChild(view.firstChild);
    }
  }

  /**
   * Where the view goes: `view` itself, or a folded section of it when the
   * live output of the same turn is on the page already.
   */
  private _host(model: IRenderMime.IMimeModel, view: HTMLElement): HTMLElement {
    const meta = model.metadata[TRANSCRIPT_MIME];
    const client =
      meta && typeof meta === 'object' && !Array.isArray(meta)
        ? (meta as { [key: string]: unknown })['live_client']
        : undefined;
    this.toggleClass(LIVE_CLASS, isLiveClient(client));
    if (!isLiveClient(client)) {
      return view;
    }
    const details = element('details', 'qloop-live-details');
    details.appendChild(
      element(
        'summary',
        'qloop-live-summary',
        this._trans.__('saved transcript of this turn')
      )
    );
    view.appendChild(details);
    return details;
  }

  private _showUnreadable(reason: string): void {
    delete this.node.dataset.qloopStatus;
    this.removeClass(LIVE_CLASS);
    this.addClass(UNREADABLE_CLASS);
    this.node.textContent = '';
    this.node.appendChild(
      visibleText(
        document,
        this._trans.__('unreadable qloop record: %1', reason),
        this._trans
      )
    );
  }

  private async _renderAnswer(
    answer: string,
    parent: HTMLElement,
    isCurrent: () => boolean
  ): Promise<void> {
    if (!answer) {
      return;
    }
    const answerSection = section(this._trans.__('Answer'), 'qloop-answer');
    // JupyterLab's content styles (tables, code, lists) apply to this class.
    const host = element('div', `${ANSWER_BODY_CLASS} jp-RenderedHTMLCommon`);
    answerSection.appendChild(host);
    parent.appendChild(answerSection);
    await renderAnswer(host, answer, this._options, this._trans, isCurrent);
  }

  private readonly _trans: TranslationBundle;
  private _generation = 0;
  private _model: IRenderMime.IMimeModel | null = null;
  private _source: JSONObject | null = null;
}

/** The code of each tool call of a record, in order. */
export function codesOf(record: unknown): string[] {
  const calls = isJSONObject(record) ? record['tool_calls'] : null;
  if (!Array.isArray(calls)) {
    return [];
  }
  return calls.map(call => {
    const input = isJSONObject(call) ? call['input'] : null;
    return JSON.stringify(isJSONObject(input) ? input : null);
  });
}

function sameCode(
  record: JSONObject,
  model: IRenderMime.IMimeModel | null
): boolean {
  const mirror = codesOf(model?.data[TRANSCRIPT_MIME]);
  const saved = codesOf(record);
  return (
    mirror.length === saved.length &&
    mirror.every((code, index) => code === saved[index])
  );
}

/** Whether the kernel marked the shown record as received from elsewhere. */
function receivedByMeta(model: IRenderMime.IMimeModel): boolean {
  const meta = model.metadata[TRANSCRIPT_MIME];
  return (
    !!meta &&
    typeof meta === 'object' &&
    !Array.isArray(meta) &&
    (meta as { [key: string]: unknown })['received'] === true
  );
}
