/**
 * Yjs warns when a model built outside a document is read before it joins
 * one, as the tests' standalone notebook models are: those warnings are
 * silenced, every other warning still shows. Restore the spy after the test.
 */
const YJS_WARNINGS = ['Invalid access: Add Yjs type', '[yjs#509]'];

export function quietYjs(): jest.SpyInstance {
  const log = console.warn;
  return jest
    .spyOn(console, 'warn')
    .mockImplementation((...args: unknown[]) => {
      const message = String(args[0]);
      if (!YJS_WARNINGS.some(prefix => message.startsWith(prefix))) {
        log(...args);
      }
    });
}
