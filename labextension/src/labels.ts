/**
 * The words the extension shows for record values, through the translator.
 *
 * Each label is a literal `trans.__` call so that string extraction finds it.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { DecisionKind, EgressKind, TurnStatus } from './record';

/** The translation domain of every string the extension shows. */
export const TRANSLATION_DOMAIN = 'qloop-kernel';

/** A short label for a turn status, as the transcript header shows it. */
export function statusLabel(
  status: TurnStatus,
  trans: TranslationBundle
): string {
  const labels: Record<TurnStatus, string> = {
    completed: trans.__('completed'),
    running: trans.__('running'),
    max_turns: trans.__('stopped: turn limit'),
    budget_exceeded: trans.__('stopped: budget'),
    timeout: trans.__('timed out'),
    interrupted: trans.__('interrupted'),
    refused: trans.__('refused'),
    error: trans.__('error'),
    unknown: trans.__('unknown status')
  };
  return labels[status];
}

/** How a tool call was allowed to run, as its card shows it. */
export function decisionLabel(
  decision: DecisionKind,
  trans: TranslationBundle
): string {
  const labels: Record<DecisionKind, string> = {
    approved: trans.__('approved'),
    edited: trans.__('approved after edit'),
    denied: trans.__('denied'),
    auto: trans.__('auto-approved'),
    always: trans.__('approved (always)'),
    readonly: trans.__('read-only, no approval needed'),
    unknown: trans.__('no decision recorded')
  };
  return labels[decision];
}

/** The badge of an agent cell, by the state of its saved record. */
export function badgeText(
  status: TurnStatus | 'unreadable',
  trans: TranslationBundle
): string {
  const badges: Record<TurnStatus | 'unreadable', string> = {
    completed: trans.__('agent · replayable'),
    running: trans.__('agent · running'),
    max_turns: trans.__('agent · turn limit'),
    budget_exceeded: trans.__('agent · over budget'),
    timeout: trans.__('agent · timed out'),
    interrupted: trans.__('agent · interrupted'),
    refused: trans.__('agent · refused'),
    error: trans.__('agent · error'),
    unknown: trans.__('agent · saved'),
    unreadable: trans.__('agent · unreadable record')
  };
  return badges[status];
}

/** What kind of thing was sent to the model, in the "sent to the model" list. */
export function egressKindLabel(
  kind: EgressKind,
  trans: TranslationBundle
): string {
  const labels: Record<EgressKind, string> = {
    variable: trans.__('variable'),
    variables: trans.__('variable list'),
    output: trans.__('output'),
    prompt: trans.__('prompt'),
    history: trans.__('history'),
    tool: trans.__('tool result'),
    rules: trans.__('rules file'),
    file: trans.__('file'),
    cell: trans.__('cell'),
    unknown: trans.__('other')
  };
  return labels[kind];
}
