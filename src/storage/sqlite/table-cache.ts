import type Database from 'better-sqlite3';

/**
 * What was read from one table, kept until the table changes: a change by this connection is seen
 * through temporary triggers (whichever code makes it, in a transaction or not), one by another
 * connection (another process: the CLI, an operator's sqlite3) through `PRAGMA data_version`, which
 * moves when another connection commits and is read before every use. A read is never answered from
 * what a committed change has made stale. At most `size` entries, the oldest dropped first.
 */
export class TableCache<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #dataVersion: Database.Statement<[], number>;
  #seenVersion = -1;

  constructor(
    db: Database.Database,
    table: string,
    /** The changes that make entries stale, as a trigger names them: `UPDATE OF enabled, events`. */
    changes: readonly string[],
    private readonly size = 10_000,
  ) {
    this.#dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    const cleared = `petstore_${table}_changed`;
    db.function(cleared, { deterministic: false }, () => {
      this.#entries.clear();
      return null;
    });
    for (const change of changes) {
      db.exec(`CREATE TEMP TRIGGER ${table}_${change.split(' ')[0]?.toLowerCase()}_cached
        AFTER ${change} ON ${table} BEGIN SELECT ${cleared}(); END`);
    }
  }

  /** The entry under `key`, read with `read` when there is none; an undefined read is not kept. */
  get(key: K, read: () => V | undefined): V | undefined {
    const version = this.#dataVersion.get() as number;
    if (version !== this.#seenVersion) {
      this.#entries.clear();
      this.#seenVersion = version;
    }
    const cached = this.#entries.get(key);
    if (cached !== undefined) return cached;
    const value = read();
    if (value === undefined) return undefined;
    if (this.#entries.size >= this.size) this.#entries.delete(this.#entries.keys().next().value as K);
    this.#entries.set(key, value);
    return value;
  }
}
