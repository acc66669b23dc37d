import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { makeDirectory } from './make-directory.js';
import { migrationsDir } from '../../contract/paths.js';
import { DATABASE_RETRY_AFTER_SECONDS, type Storage, StorageUnavailableError } from '../types.js';
import { accountRepository } from './accounts.js';
import { Claims } from './idempotency.js';
import { migrate } from './migrate.js';
import { orderRepository } from './orders.js';
import { petRepository } from './pets.js';
import { deliveryQueue } from './webhooks/delivery-queue.js';
import { webhookRepository } from './webhooks/endpoints.js';
import { Outbox } from './webhooks/outbox.js';
import { GroupCommit } from './group-commit.js';
import type { Synchronous } from './synchronous.js';

export type SynchronousMode = 'NORMAL' | 'FULL' | 'EXTRA';

export interface SqliteOptions {
  /** A file path, or `:memory:`. */
  filename: string;
  /** SQLite's `synchronous` pragma; see "Guarantees" in the README. */
  synchronous?: SynchronousMode;
  /** The clock idempotency keys expire by (Unix milliseconds). */
  now?: () => number;
  /** The trace context to store with each event (OpenOptions). */
  traceParent?: () => string | undefined;
}

/**
 * How long a write waits for another process's write lock (the CLI's are a few milliseconds). The
 * wait blocks the event loop, so it is short, and once one write has found the lock held past it,
 * the writes of the next LOCKED_FOR_MS do not wait at all: they are 503s at once while reads,
 * which SQLite's WAL mode never blocks, and /healthz go on being answered.
 */
const BUSY_TIMEOUT_MS = 250;
const LOCKED_FOR_MS = DATABASE_RETRY_AFTER_SECONDS * 1000;

export function openSqlite(options: SqliteOptions): Storage {
  if (options.filename !== ':memory:') makeDirectory(dirname(options.filename));
  const db = new Database(options.filename);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  // The CLI may write while the server runs: wait a moment for the lock rather than fail.
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  const migrationsApplied = migrate(db, migrationsDir('sqlite'));
  const lock = new LockWait(db);
  const failure = unavailableWhenBusy(lock);
  const writes = new GroupCommit(db, failure, options.traceParent !== undefined);
  const now = options.now ?? Date.now;
  const claims = new Claims(db, now);
  const outbox = new Outbox(db, now, options.traceParent);
  const served = <T extends object>(repository: Synchronous<T>, writing: readonly (keyof T)[]) =>
    asStorage(repository, failure, writes, writing);

  return {
    pets: served(petRepository(db, claims, outbox, now), ['create', 'update', 'remove', 'createMany']),
    orders: served(orderRepository(db, claims, outbox, now), ['place', 'update']),
    accounts: served(accountRepository(db), ['createAccount', 'addKey', 'revokeKey', 'expireKey']),
    webhooks: served(webhookRepository(db, outbox, now), ['create', 'update', 'remove', 'rotateSecret', 'sendTest']),
    deliveries: {
      ...asStorage(deliveryQueue(db, outbox, now), failure),
      onCommit: outbox.onCommit.bind(outbox),
    },
    migrationsApplied,
    // Ready means writable: take the write lock and let go.
    ping: asStorage<Pick<Storage, 'ping'>>({ ping: () => void db.exec('BEGIN IMMEDIATE; ROLLBACK') }, failure).ping,
    close: async () => {
      if (db.open) db.close();
    },
  };
}

/** After a write found the lock held past BUSY_TIMEOUT_MS: the next writes, for LOCKED_FOR_MS, do not wait. */
class LockWait {
  #restore: NodeJS.Timeout | undefined;

  constructor(private readonly db: Database.Database) {}

  held(): void {
    if (this.#restore !== undefined) return;
    this.db.pragma('busy_timeout = 0');
    this.#restore = setTimeout(() => {
      this.#restore = undefined;
      if (this.db.open) this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }, LOCKED_FOR_MS).unref();
  }
}

/**
 * Another process holding the write lock (a long migration, a VACUUM) is the database unable to
 * serve now, a 503, not a fault of the request.
 */
function unavailableWhenBusy(lock: LockWait): (error: unknown) => Error {
  return (error) => {
    if (!(error instanceof Error)) return new Error(String(error));
    if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') return error;
    lock.held();
    return new StorageUnavailableError('SQLite is locked by another process', { cause: error });
  };
}

/**
 * The repositories answer synchronously; each call becomes one promise here, settled with the
 * answer or the failure (an async method under a rejection handler made two promises and a tick).
 * The methods named in `writing` commit with the other writes of their turn (GroupCommit).
 */
function asStorage<T extends object>(
  repository: Synchronous<T>,
  failure: (error: unknown) => Error,
  writes?: GroupCommit,
  writing: readonly (keyof T)[] = [],
): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(repository) as [keyof T & string, (...args: unknown[]) => unknown][]) {
    wrapped[name] =
      writes !== undefined && writing.includes(name)
        ? (...args: unknown[]) => writes.run(() => method(...args))
        : (...args: unknown[]) => {
            try {
              return Promise.resolve(method(...args));
            } catch (error) {
              return Promise.reject(failure(error));
            }
          };
  }
  return wrapped as T;
}
