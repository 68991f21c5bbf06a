/**
 * The "Context" section of a saved turn: what its first request held besides
 * the prompt (the system prompt with rules files, attachments, tools, earlier
 * messages) and its estimated size and cost, as `%agent context` shows it for
 * the next turn.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { ITurnContext } from './record';

function count(value: number | null): string {
  return value === null ? '?' : value.toLocaleString('en-US');
}

/** One line per item, in the order `%agent context` prints them. */
export function contextLines(
  context: ITurnContext,
  trans: TranslationBundle
): string[] {
  const lines = [
    trans.__('system prompt with rules: %1 chars', count(context.systemChars))
  ];
  for (const rules of context.rules) {
    const origin =
      rules.origin === 'user'
        ? trans.__('your rules')
        : rules.origin === 'project'
          ? trans.__('project rules')
          : trans.__('rules');
    lines.push(
      trans.__(
        '%1 %2 · %3 · %4 chars',
        origin,
        rules.path,
        rules.status || trans.__('status unknown'),
        count(rules.chars)
      )
    );
  }
  for (const item of context.attachments) {
    const size =
      item.imageBytes !== null && item.imageBytes > 0
        ? trans.__('image, %1 bytes', count(item.imageBytes))
        : trans.__('%1 chars', count(item.chars));
    const note = item.note ? ` · ${item.note}` : '';
    lines.push(
      trans.__('attached %1 %2 · %3', item.kind, item.name, size) + note
    );
  }
  const toolChars = context.tools.reduce(
    (sum, tool) => sum + (tool.chars ?? 0),
    0
  );
  lines.push(
    trans._n(
      '%2 tool definition · %3 chars',
      '%2 tool definitions · %3 chars',
      context.tools.length,
      count(context.tools.length),
      count(toolChars)
    )
  );
  if (context.historyMessages !== null) {
    lines.push(
      context.historyMessages === 0
        ? trans.__('no earlier message of the conversation')
        : trans._n(
            '%2 earlier message of the conversation',
            '%2 earlier messages of the conversation',
            context.historyMessages,
            count(context.historyMessages)
          )
    );
  }
  if (context.estimatedTokens !== null) {
    const cost =
      context.estimatedCostUsd === null
        ? trans.__('no known price')
        : `$${context.estimatedCostUsd.toFixed(4)}`;
    const method = context.estimateMethod ? ` (${context.estimateMethod})` : '';
    lines.push(
      trans.__(
        'first request: about %1 tokens, %2 uncached',
        count(context.estimatedTokens),
        cost
      ) + method
    );
  }
  return lines;
}
