/**
 * A translator for the tests: it upper-cases every message, so a test sees
 * which strings went through `trans.__`.
 */
import { ITranslator, TranslationBundle } from '@jupyterlab/translation';

function shout(msgid: string, ...args: unknown[]): string {
  return msgid
    .toUpperCase()
    .replace(/%(\d)/g, (_, n: string) => String(args[Number(n) - 1]));
}

/** The plural form of `shout`: `%1` is the count, as in gettext's `_n`. */
function shoutPlural(
  singular: string,
  plural: string,
  n: number,
  ...args: unknown[]
): string {
  return shout(n === 1 ? singular : plural, n, ...args);
}

/** Translates into capitals (placeholders `%1`… filled in as given). */
export const shouting: ITranslator = {
  languageCode: 'en-SHOUT',
  load: () => ({ __: shout, _n: shoutPlural }) as unknown as TranslationBundle
};
