/**
 * The fields of the extension's own package.json that the code reads. The file
 * sits outside `src/`, so it is declared here instead of compiled
 * (`resolveJsonModule` is off); webpack and jest load the real file.
 */
declare module '*/package.json' {
  const packageJson: { name: string; version: string };
  export default packageJson;
}
