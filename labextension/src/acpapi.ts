/**
 * The Jupyter server's routes for the agent chat panel (`qloop/acp/*`,
 * qloop_kernel/server/acp_handlers.py), through Jupyter's authentication:
 * the agents offered, a chat's start, prompts, Stop, the pickers, and the
 * chat's events read from a server-sent event stream.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { JSONObject } from '@lumino/coreutils';

import { isJSONObject } from './record';

const ROUTE = 'qloop/acp';

/** An agent the server offers. */
export interface IAgent {
  name: string;
  command: string;
}

/** A select option the agent offers (a model, say). */
export interface IAgentOption {
  id: string;
  name: string;
  current: string;
  category: string;
  values: { value: string; name: string }[];
}

/** A chat as the server describes it. */
export interface IChatState {
  id: string;
  agent: string;
  /** The key under which the chat's cards are listed (qloop/outside/pending?path=). */
  cards: string;
  running: boolean;
  busy: boolean;
  modes: { id: string; name: string }[];
  mode: string | null;
  options: IAgentOption[];
}

/** One event of a chat: `kind` says which (user, update, decision, error, turn_end...). */
export type ChatEvent = JSONObject & { n: number; kind: string };

/** An answer of the server, or why there is none. */
export type Answer<T> = { ok: true; value: T } | { ok: false; message: string };

async function message(response: Response): Promise<string> {
  const body: unknown = await response.json().catch(() => null);
  const said = isJSONObject(body) ? body['message'] : undefined;
  return typeof said === 'string' ? said : `HTTP ${response.status}`;
}

/** The chat routes of one Jupyter server. */
export class ChatRequests {
  constructor(readonly settings: ServerConnection.ISettings) {}

  /** The agents offered, and the chats open on the server (a reloaded page finds them). */
  agents(): Promise<Answer<{ agents: IAgent[]; chats: IChatState[] }>> {
    return this._call('GET', 'agents');
  }

  open(agent: string): Promise<Answer<IChatState>> {
    return this._call('POST', 'chats', { agent });
  }

  prompt(chat: string, text: string): Promise<Answer<JSONObject>> {
    return this._call('POST', `chats/${chat}/prompt`, { text });
  }

  cancel(chat: string): Promise<Answer<JSONObject>> {
    return this._call('POST', `chats/${chat}/cancel`, {});
  }

  mode(chat: string, mode: string): Promise<Answer<JSONObject>> {
    return this._call('POST', `chats/${chat}/mode`, { mode });
  }

  option(chat: string, id: string, value: string): Promise<Answer<JSONObject>> {
    return this._call('POST', `chats/${chat}/option`, { id, value });
  }

  /**
   * Read the chat's events after the `after`-th until `signal` aborts or the
   * stream ends; each goes to `onEvent`. Resolves with the last number seen.
   */
  async events(
    chat: string,
    after: number,
    onEvent: (event: ChatEvent) => void,
    signal: AbortSignal
  ): Promise<number> {
    const url =
      URLExt.join(this.settings.baseUrl, ROUTE, `chats/${chat}/events`) +
      URLExt.objectToQueryString({ after: String(after) });
    const response = await ServerConnection.makeRequest(
      url,
      { method: 'GET', signal },
      this.settings
    );
    if (response.status !== 200 || !response.body) {
      throw new Error(await message(response));
    }
    const reader = response.body
      .pipeThrough(new TextDecoderStream())
      .getReader();
    let buffered = '';
    let last = after;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return last;
      }
      buffered += value;
      const blocks = buffered.split('\n\n');
      buffered = blocks.pop() ?? '';
      for (const block of blocks) {
        if (signal.aborted) {
          return last;
        }
        const event = parseEvent(block);
        if (event) {
          last = event.n;
          onEvent(event);
        }
      }
    }
  }

  private async _call<T>(
    method: string,
    path: string,
    body?: JSONObject
  ): Promise<Answer<T>> {
    const url = URLExt.join(this.settings.baseUrl, ROUTE, path);
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    try {
      const response = await ServerConnection.makeRequest(
        url,
        init,
        this.settings
      );
      if (response.status !== 200) {
        return { ok: false, message: await message(response) };
      }
      return { ok: true, value: (await response.json()) as T };
    } catch (error) {
      return { ok: false, message: String(error) };
    }
  }
}

/** One server-sent event block as a chat event, or null (a comment line). */
export function parseEvent(block: string): ChatEvent | null {
  const data = block
    .split('\n')
    .filter(line => line.startsWith('data: '))
    .map(line => line.slice('data: '.length))
    .join('\n');
  if (!data) {
    return null;
  }
  try {
    const found: unknown = JSON.parse(data);
    return isJSONObject(found) &&
      typeof found['n'] === 'number' &&
      typeof found['kind'] === 'string'
      ? (found as ChatEvent)
      : null;
  } catch {
    return null;
  }
}
