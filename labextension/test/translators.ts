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

/** Translates into capitals (placeholders `%1`… filled in as given). */
export const shouting: ITranslator = {
  languageCode: 'en-SHOUT',
  load: () => ({ __: shout }) as unknown as TranslationBundle
};
