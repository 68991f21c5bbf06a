/**
 * The agent chat panel: a coding agent the Jupyter server hosts over ACP
 * (qloop_kernel/server/acp_*.py), in the right side panel of JupyterLab and
 * Notebook 7, opened by the command "Open agent chat". It shows the agent
 * picker, the conversation as it streams (the agent's Markdown rendered
 * through the sanitizer, `markdown.ts`), its plan and tool calls as they
 * happen, the mode and option pickers the agent offers, Stop, and the
 * approval cards of what the agent asks to do on this machine (the outside
 * agents' cards, `outsidecard.ts`, listed under the chat's key). Every text
 * from the server or the agent is set as text or sanitized Markdown.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { JSONObject } from '@lumino/coreutils';
import { Panel, Widget } from '@lumino/widgets';

import type { OutsideApproval } from './generated/protocol';

/* eslint-disable jupyter/prefer-lazy-imports -- the panel's own parts. */
import { ChatEvent, ChatRequests, IChatState } from './acpapi';
import { TRANSLATION_DOMAIN } from './labels';
import { renderAnswer } from './markdown';
import { OutsidePoll, OutsideRequests } from './outside';
import { OutsideBoard } from './outsidecard';
import { isJSONObject } from './record';
import { element } from './dom';
/* eslint-enable jupyter/prefer-lazy-imports */

/** The command that opens the panel. */
export const OPEN_CHAT = 'qloop:open-agent-chat';
/** Class of the panel. */
export const CHAT_CLASS = 'qloop-acp';
/** Attribute of the panel: `none`, `starting`, `idle`, `busy` or `failed`. */
export const CHAT_STATE_ATTRIBUTE = 'data-qloop-acp-state';
const RETRY_MS = 2000;

function button(className: string, text: string): HTMLButtonElement {
  const node = element('button', `qloop-outside-button ${className}`, text);
  node.type = 'button';
  return node;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The chat panel: one chat at a time, with the agent picked. */
export class ChatPanel extends Panel {
  constructor(
    private readonly _requests: ChatRequests,
    outside: OutsideRequests,
    private readonly _render: IRenderMime.IRendererOptions,
    private readonly _trans: TranslationBundle
  ) {
    super();
    const trans = _trans;
    this.addClass(CHAT_CLASS);
    this.node.setAttribute(CHAT_STATE_ATTRIBUTE, 'none');
    this._agent.setAttribute('aria-label', trans.__('Agent'));
    this._mode.setAttribute('aria-label', trans.__('Mode'));
    this._mode.hidden = true;
    this._status.setAttribute('role', 'status');
    this._prompt.placeholder = trans.__('Ask the agent…');
    this._prompt.setAttribute('aria-label', trans.__('Message'));
    this._prompt.rows = 3;
    this._stop.disabled = true;
    this._start.textContent = trans.__('Start chat');
    this._send.textContent = trans.__('Send');
    this._stop.textContent = trans.__('Stop');
    const head = element('div', 'qloop-acp-head');
    head.append(this._agent, this._start, this._mode, this._options);
    const input = element('div', 'qloop-acp-input');
    input.append(this._prompt, this._send, this._stop);
    this._board = new OutsideBoard({
      trans,
      actions: {
        decide: (item: OutsideApproval, decision) =>
          outside.decide(item.id, decision),
        stop: id => outside.stop(id)
      }
    });
    this._poll = new OutsidePoll(outside, pending =>
      this._board.setRequests(
        pending.items.filter(
          (item): item is OutsideApproval => item.kind === 'approval'
        )
      )
    );
    this.addWidget(new Widget({ node: head }));
    this.addWidget(new Widget({ node: this._status }));
    this.addWidget(new Widget({ node: this._log }));
    this.addWidget(this._board);
    this.addWidget(new Widget({ node: input }));
    this._wire();
    void this.loadAgents();
  }

  /** The chat shown, if any. */
  get chat(): IChatState | null {
    return this._chat;
  }

  /** List the agents the server offers. */
  async loadAgents(): Promise<void> {
    const found = await this._requests.agents();
    if (!found.ok) {
      this._say(this._trans.__('No agents: %1', found.message));
      return;
    }
    this._agent.replaceChildren(
      ...found.value.agents.map(agent => {
        const option = element('option', '', agent.name);
        option.value = agent.name;
        option.title = agent.command;
        return option;
      })
    );
    const open = found.value.chats;
    if (this._chat === null && open.length > 0) {
      // A reloaded page: the last chat goes on, its conversation read again.
      this._agent.value = open[open.length - 1].agent;
      this._attach(open[open.length - 1]);
    }
    if (found.value.agents.length === 0) {
      this._say(
        this._trans.__(
          'No ACP agent was found on PATH; declare one in c.QloopACP.agents (docs/acp.md).'
        )
      );
    }
  }

  /** Start a chat with the picked agent (ending the one shown). */
  async start(): Promise<void> {
    // The chat shown stops feeding the panel now: its events still being read
    // (a reloaded page replays them) must not mark the new one idle or fill it.
    this._events?.abort();
    this._events = null;
    this._setState('starting');
    this._say(this._trans.__('Starting %1…', this._agent.value));
    const opened = await this._requests.open(this._agent.value);
    if (!opened.ok) {
      this._setState('failed');
      this._say(opened.message);
      return;
    }
    this._attach(opened.value);
  }

  /** Show the chat `state` describes: its events from the first, its cards. */
  private _attach(state: IChatState): void {
    this._events?.abort();
    this._log.replaceChildren();
    this._message = null;
    this._tools.clear();
    this._showState(state);
    this._say('');
    this._setState(state.busy ? 'busy' : 'idle');
    this._poll.restart(state.cards);
    void this._follow(state.id);
  }

  /** Send the prompt typed. */
  async send(): Promise<void> {
    const said = this._prompt.value;
    if (!this._chat || !said.trim()) {
      return;
    }
    this._setState('busy');
    const sent = await this._requests.prompt(this._chat.id, said);
    if (!sent.ok) {
      this._setState('idle');
      this._say(sent.message);
      return;
    }
    this._prompt.value = '';
  }

  dispose(): void {
    this._events?.abort();
    this._poll.dispose();
    super.dispose();
  }

  private _wire(): void {
    this._start.addEventListener('click', () => void this.start());
    this._send.addEventListener('click', () => void this.send());
    this._stop.addEventListener('click', () => {
      if (this._chat) {
        void this._requests.cancel(this._chat.id).then(answer => {
          if (!answer.ok) {
            this._say(answer.message);
          }
        });
      }
    });
    this._prompt.addEventListener('keydown', event => {
      if (event.key === 'Enter' && !event.shiftKey) {
        event.preventDefault();
        void this.send();
      }
    });
    this._mode.addEventListener('change', () => {
      if (this._chat) {
        void this._requests.mode(this._chat.id, this._mode.value);
      }
    });
  }

  /** Read the chat's events for as long as it is shown, reconnecting. */
  private async _follow(chat: string): Promise<void> {
    const controller = new AbortController();
    this._events = controller;
    let after = 0;
    while (!controller.signal.aborted) {
      try {
        after = await this._requests.events(
          chat,
          after,
          event => {
            if (controller.signal.aborted) {
              // Read after another chat was shown: not this panel's any more.
              return;
            }
            after = event.n;
            this._onEvent(event);
          },
          controller.signal
        );
      } catch (error) {
        if (controller.signal.aborted) {
          return;
        }
        console.debug('qloop: the chat stream broke', error);
      }
      await new Promise(resolve => setTimeout(resolve, RETRY_MS));
    }
  }

  private _onEvent(event: ChatEvent): void {
    switch (event.kind) {
      case 'user':
        this._message = null;
        this._line('qloop-acp-user', text(event['text']));
        break;
      case 'update':
        if (isJSONObject(event['update'])) {
          this._onUpdate(event['update']);
        }
        break;
      case 'decision':
        this._line(
          'qloop-acp-decision',
          `${text(event['tool'])}: ${text(event['decision'])}`
        );
        break;
      case 'error':
        this._line('qloop-acp-error', text(event['text'])).setAttribute(
          'role',
          'alert'
        );
        break;
      case 'ready':
      case 'state':
        this._showState(event as unknown as IChatState);
        break;
      case 'turn_end':
        this._message = null;
        this._setState('idle');
        if (event['stop_reason'] !== 'end_turn') {
          this._line(
            'qloop-acp-stop',
            this._trans.__('Turn ended: %1', text(event['stop_reason']))
          );
        }
        break;
    }
  }

  private _onUpdate(update: JSONObject): void {
    const kind = update['sessionUpdate'];
    const content = update['content'];
    if (kind === 'agent_message_chunk' && isJSONObject(content)) {
      this._appendAnswer(text(content['text']));
    } else if (kind === 'plan' && Array.isArray(update['entries'])) {
      this._showPlan(update['entries']);
    } else if (kind === 'tool_call' || kind === 'tool_call_update') {
      this._showTool(update);
    } else if (kind === 'current_mode_update') {
      this._mode.value = text(update['currentModeId']);
    }
  }

  private _appendAnswer(chunk: string): void {
    if (this._message === null) {
      const host = element('div', 'qloop-acp-agent');
      this._log.append(host);
      this._message = { host, source: '', version: 0 };
    }
    const message = this._message;
    message.source += chunk;
    const version = ++message.version;
    void renderAnswer(
      message.host,
      message.source,
      this._render,
      this._trans,
      () => version === message.version
    ).then(() => this._scroll());
  }

  private _showPlan(entries: unknown[]): void {
    const list = element('ol', 'qloop-acp-plan');
    for (const entry of entries) {
      if (isJSONObject(entry)) {
        const item = element(
          'li',
          'qloop-acp-plan-entry',
          text(entry['content'])
        );
        item.setAttribute('data-status', text(entry['status']));
        list.append(item);
      }
    }
    const shown = this._log.querySelector('.qloop-acp-plan:last-of-type');
    if (shown && this._log.lastElementChild === shown) {
      shown.replaceWith(list);
    } else {
      this._log.append(list);
    }
    this._message = null;
    this._scroll();
  }

  private _showTool(update: JSONObject): void {
    const id = text(update['toolCallId']);
    let node = this._tools.get(id);
    if (!node) {
      node = element('div', 'qloop-acp-tool');
      node.append(element('span', 'qloop-acp-tool-title'));
      node.append(element('span', 'qloop-acp-tool-status'));
      this._tools.set(id, node);
      this._log.append(node);
      this._message = null;
    }
    const title = text(update['title']);
    if (title) {
      node.firstElementChild!.textContent = title;
    }
    const status = text(update['status']) || 'pending';
    node.setAttribute('data-status', status);
    node.lastElementChild!.textContent = status;
    this._scroll();
  }

  private _showState(state: IChatState): void {
    this._chat = state;
    this._mode.replaceChildren(
      ...state.modes.map(mode => {
        const option = element('option', '', mode.name);
        option.value = mode.id;
        return option;
      })
    );
    this._mode.hidden = state.modes.length === 0;
    this._mode.value = state.mode ?? '';
    this._options.replaceChildren(
      ...state.options.map(option => this._optionPicker(state.id, option))
    );
    this._stop.disabled = !state.busy;
  }

  private _optionPicker(
    chat: string,
    option: IChatState['options'][number]
  ): HTMLSelectElement {
    const select = element('select', 'qloop-acp-option');
    select.setAttribute('aria-label', option.name);
    for (const value of option.values) {
      const item = element('option', '', value.name || value.value);
      item.value = value.value;
      select.append(item);
    }
    select.value = option.current;
    select.addEventListener('change', () => {
      void this._requests.option(chat, option.id, select.value);
    });
    return select;
  }

  private _line(className: string, said: string): HTMLElement {
    const node = element('div', className, said);
    this._log.append(node);
    this._scroll();
    return node;
  }

  private _say(said: string): void {
    this._status.textContent = said;
  }

  private _setState(state: string): void {
    this.node.setAttribute(CHAT_STATE_ATTRIBUTE, state);
    this._stop.disabled = state !== 'busy';
    this._send.disabled = state === 'busy' || state === 'starting';
  }

  private _scroll(): void {
    this._log.scrollTop = this._log.scrollHeight;
  }

  private _chat: IChatState | null = null;
  private _events: AbortController | null = null;
  private _message: {
    host: HTMLElement;
    source: string;
    version: number;
  } | null = null;
  private readonly _tools = new Map<string, HTMLElement>();
  private readonly _board: OutsideBoard;
  private readonly _poll: OutsidePoll;
  private readonly _agent = element('select', 'qloop-acp-agents');
  private readonly _start = button('qloop-acp-start', '');
  private readonly _mode = element('select', 'qloop-acp-mode');
  private readonly _options = element('span', 'qloop-acp-options');
  private readonly _status = element('div', 'qloop-acp-status');
  private readonly _log = element('div', 'qloop-acp-log');
  private readonly _prompt = element('textarea', 'qloop-acp-prompt');
  private readonly _send = button('qloop-acp-send', '');
  private readonly _stop = button('qloop-acp-stop-button', '');
}

/** The panel and its command, in JupyterLab and Notebook 7. */
export const chatPlugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:agent-chat',
  description:
    'A side panel to chat with a coding agent the Jupyter server hosts over ACP, its requests decided on approval cards.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [ITranslator, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    translator: ITranslator | null,
    palette: ICommandPalette | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const settings = app.serviceManager.serverSettings;
    const render: IRenderMime.IRendererOptions = {
      mimeType: 'text/markdown',
      sanitizer: rendermime.sanitizer,
      resolver: rendermime.resolver,
      linkHandler: rendermime.linkHandler,
      latexTypesetter: rendermime.latexTypesetter,
      markdownParser: rendermime.markdownParser,
      translator: translator ?? undefined
    };
    let panel: ChatPanel | null = null;
    app.commands.addCommand(OPEN_CHAT, {
      label: trans.__('Open agent chat'),
      caption: trans.__(
        'Chat with a coding agent (Claude Code, Codex, Gemini CLI, Goose, OpenCode...) whose actions qloop decides'
      ),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => {
        if (panel === null || panel.isDisposed) {
          panel = new ChatPanel(
            new ChatRequests(settings),
            new OutsideRequests(settings),
            render,
            trans
          );
          panel.id = 'qloop-agent-chat';
          panel.title.label = trans.__('Agent chat');
          panel.title.caption = trans.__('Agent chat');
          panel.title.closable = true;
          app.shell.add(panel, 'right', { rank: 1000 });
        }
        app.shell.activateById(panel.id);
      }
    });
    palette?.addItem({ command: OPEN_CHAT, category: trans.__('qloop') });
  }
};
