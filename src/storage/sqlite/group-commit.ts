import { AsyncResource } from 'node:async_hooks';
import type Database from 'better-sqlite3';
import { forgetCached } from './table-cache.js';

interface Write {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The connections running a batch: their atomic writes run as part of it (`atomic`). */
const batching = new WeakSet<Database.Database>();

/**
 * `fn` as one write that happens whole or not at all: in an IMMEDIATE transaction of its own (the
 * write lock taken before it reads), or, inside a group commit's batch, as part of the batch's.
 */
export function atomic<A extends unknown[], R>(db: Database.Database, fn: (...args: A) => R): (...args: A) => R {
  const alone = db.transaction(fn);
  return (...args) => (batching.has(db) ? fn(...args) : alone.immediate(...args));
}

/**
 * Group commit: the writes that reach the storage in one turn of the event loop commit in one
 * transaction at the end of the turn. A commit writes every page it dirtied to the WAL, and a create
 * with a subscriber dirties one page more than a create without (its event's): committed one by one,
 * that page made the outbox a quarter of a create's cost. Together, a turn's writes share their pages.
 *
 * Each write is answered once the batch committed: none is acknowledged before it is durable. When
 * one write fails (a rule refuses it, a constraint), the batch is rolled back and each write is run
 * again alone, in order, in its own transaction: the failing one fails alone, as it would have without
 * the batch. A savepoint around each write would do the same at twice the cost of the write's event.
 * Writes decide on what they read, so running one again is deciding again on the same state.
 */
export class GroupCommit {
  #pending: Write[] = [];
  readonly #begin;
  readonly #commit;
  readonly #rollback;

  constructor(
    private readonly db: Database.Database,
    /** What a caller is answered when its write fails: the error as the storage interface says it. */
    private readonly failure: (error: unknown) => unknown,
    /**
     * Whether each write runs in its caller's async context (its request's trace, which its event
     * stores), not in the first writer's, where the batch runs. Off, it costs nothing.
     */
    private readonly keepContext = false,
  ) {
    this.#begin = db.prepare('BEGIN IMMEDIATE');
    this.#commit = db.prepare('COMMIT');
    this.#rollback = db.prepare('ROLLBACK');
  }

  /** Runs `write` with the other writes of this turn; settles once it committed or failed. */
  run<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const run = this.keepContext ? AsyncResource.bind(write) : write;
      if (this.#pending.push({ run, resolve: resolve as (value: unknown) => void, reject }) === 1) {
        setImmediate(this.#flush);
      }
    });
  }

  readonly #flush = (): void => {
    const writes = this.#pending;
    this.#pending = [];
    if (writes.length === 1) {
      this.#runAlone(writes[0] as Write);
      return;
    }
    try {
      this.#begin.run();
    } catch (error) {
      // The write lock is held elsewhere: each write would find it so.
      const failed = this.failure(error);
      for (const write of writes) write.reject(failed);
      return;
    }
    let values: unknown[] | undefined;
    batching.add(this.db);
    try {
      const made = writes.map((write) => write.run());
      this.#commit.run();
      values = made;
    } catch {
      if (this.db.inTransaction) this.#rollback.run();
    } finally {
      batching.delete(this.db);
    }
    if (values === undefined) {
      // A cache may hold what a write read after another's change, now undone.
      forgetCached(this.db);
      for (const write of writes) this.#runAlone(write);
      return;
    }
    writes.forEach((write, index) => write.resolve(values[index]));
  };

  #runAlone(write: Write): void {
    try {
      write.resolve(write.run());
    } catch (error) {
      write.reject(this.failure(error));
    }
  }
}
