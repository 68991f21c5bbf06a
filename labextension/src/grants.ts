/**
 * The approval grants a notebook saves (`metadata.qloop_grants`, written and
 * signed by the kernel): what to tell the user when the notebook opens.
 *
 * The frontend cannot check the signature (the key stays with the kernel): the
 * notice says the grants apply only if the user's own kernel saved them.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { isJSONObject } from './record';

/** One saved grant as the notice shows it: "run_code 'write' steps". */
function grantText(entry: unknown): string | null {
  if (!isJSONObject(entry) || typeof entry['tool'] !== 'string') {
    return null;
  }
  const risk = entry['risk'];
  return typeof risk === 'string'
    ? `${entry['tool']} '${risk}' steps`
    : `${entry['tool']} calls`;
}

/** The notice for a notebook's saved grants, or null when it holds none. */
export function grantsNotice(
  saved: unknown,
  trans: TranslationBundle
): string | null {
  if (!isJSONObject(saved) || !Array.isArray(saved['grants'])) {
    return null;
  }
  const listed = saved['grants']
    .map(grantText)
    .filter((text): text is string => text !== null);
  if (listed.length === 0) {
    return null;
  }
  return trans.__(
    'This notebook saves approval grants: %1 run without an approval card. They apply only if your own kernel saved them for this notebook; `%agent grants` lists them and `%agent revoke all` removes them.',
    listed.join('; ')
  );
}
