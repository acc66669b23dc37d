/**
 * A repository as SQLite implements it: better-sqlite3 answers at once, so each method returns its
 * value or throws. index.ts makes it the storage interface, with one promise a call.
 */
export type Synchronous<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : T[K];
};
