/**
 * The field of the extension's own package.json that the code reads. The file
 * sits outside `src/`, so it is declared here instead of compiled
 * (`resolveJsonModule` is off); the bundler and jest load the real file, and a
 * production build keeps only this field.
 */
declare module '*/package.json' {
  export const version: string;
}
