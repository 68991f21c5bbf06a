/**
 * The version the extension reports is the one in its package.json.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import { EXTENSION_VERSION } from '../src/version';

it('reports the version written in package.json', () => {
  const file = join(__dirname, '..', 'package.json');
  const { version } = JSON.parse(readFileSync(file, 'utf-8'));
  expect(EXTENSION_VERSION).toBe(version);
  expect(EXTENSION_VERSION).toMatch(/^\d+\.\d+\.\d+/);
});
