import type Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';

/**
 * How often, at most, another connection's commits are looked for: reading `PRAGMA data_version`
 * cost as much as half the query it saves. A change committed by another process is seen by the
 * requests from this long after it on.
 */
const OTHER_CONNECTIONS_EVERY_MS = 1;

/** Each connection's caches, to be forgotten together (forgetCached). */
const cachesOf = new WeakMap<Database.Database, Set<{ clear(): void }>>();

/**
 * Forgets what every cache of `db` holds. After a transaction rolled back whole, an entry read after
 * one of its changes would still hold the change: the triggers clear a cache when a change is made,
 * not when it is undone (group-commit.ts).
 */
export function forgetCached(db: Database.Database): void {
  for (const cache of cachesOf.get(db) ?? []) cache.clear();
}

/**
 * What was read from one table, kept until the table changes: a change by this connection is seen
 * at once through temporary triggers (whichever code makes it, in a transaction or not), one by
 * another connection (another process: the CLI, an operator's sqlite3) through `PRAGMA
 * data_version`, which moves when another connection commits. At most `size` entries, the least
 * recently used dropped first.
 */
export class TableCache<K extends string | number, V extends string | number | object> {
  readonly #entries: LRUCache<K, V>;
  readonly #dataVersion: Database.Statement<[], number>;
  #seenVersion = -1;
  #versionReadAt = -Infinity;

  constructor(
    db: Database.Database,
    table: string,
    /** The changes that make entries stale, as a trigger names them: `UPDATE OF enabled, events`. */
    changes: readonly string[],
    size = 10_000,
  ) {
    this.#entries = new LRUCache({ max: size });
    this.#dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    const cleared = `petstore_${table}_changed`;
    db.function(cleared, { deterministic: false }, () => {
      this.#entries.clear();
      return null;
    });
    const caches = cachesOf.get(db) ?? new Set();
    cachesOf.set(db, caches.add(this));
    for (const change of changes) {
      db.exec(`CREATE TEMP TRIGGER ${table}_${change.split(' ')[0]?.toLowerCase()}_cached
        AFTER ${change} ON ${table} BEGIN SELECT ${cleared}(); END`);
    }
  }

  clear(): void {
    this.#entries.clear();
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
    this.#entries.set(key, value);
    return value;
  }
}
