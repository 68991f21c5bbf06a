/**
 * The extension's version, read from its package.json (the one place it is
 * written) when the extension is built.
 */
import { version } from '../package.json';

/** The npm package version, reported to the kernel's `hello` request. */
export const EXTENSION_VERSION: string = version;
