import type Database from 'better-sqlite3';

/**
 * How often, at most, another connection's commits are looked for: reading `PRAGMA data_version`
 * cost as much as half the query it saves. A change committed by another process is seen by the
 * requests from this long after it on.
 */
const OTHER_CONNECTIONS_EVERY_MS = 1;

/**
 * What was read from one table, kept until the table changes: a change by this connection is seen
 * at once through temporary triggers (whichever code makes it, in a transaction or not), one by
 * another connection (another process: the CLI, an operator's sqlite3) through `PRAGMA
 * data_version`, which moves when another connection commits. At most `size` entries, the oldest
 * dropped first.
 */
export class TableCache<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #dataVersion: Database.Statement<[], number>;
  #seenVersion = -1;
  #versionReadAt = -Infinity;

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
    const now = performance.now();
    if (now - this.#versionReadAt >= OTHER_CONNECTIONS_EVERY_MS) {
      this.#versionReadAt = now;
      const version = this.#dataVersion.get() as number;
      if (version !== this.#seenVersion) {
        this.#entries.clear();
        this.#seenVersion = version;
      }
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
