import type { SynchronousMode } from './sqlite/index.js';
import type { Storage } from './types.js';

/** Which database `DATABASE_URL` names, and its settings. */
export type DatabaseConfig =
  | { engine: 'sqlite'; file: string; synchronous: SynchronousMode }
  | { engine: 'postgres'; url: string; poolSize: number; timeoutMs: number };

export interface OpenOptions {
  /** The clock idempotency keys expire by (Unix milliseconds). */
  now?: () => number;
  /** Told of a pooled PostgreSQL connection that failed while idle. */
  onIdleError?: (error: Error) => void;
  /** Told when a PostgreSQL LISTEN connection fails (once until it listens again), with its channel. */
  onListenError?: (error: Error, channel: string) => void;
  /** The trace context (a W3C traceparent) to store with an event, read as it is written; none when untraced. */
  traceParent?: () => string | undefined;
}

/**
 * Opens the configured backend, with its migrations applied. Only that backend's driver is loaded:
 * a process on SQLite never loads node-postgres, nor one on PostgreSQL better-sqlite3.
 */
export async function openStorage(database: DatabaseConfig, options: OpenOptions = {}): Promise<Storage> {
  const now = options.now === undefined ? {} : { now: options.now };
  const traceParent = options.traceParent === undefined ? {} : { traceParent: options.traceParent };
  if (database.engine === 'sqlite') {
    const { openSqlite } = await import('./sqlite/index.js');
    return openSqlite({ filename: database.file, synchronous: database.synchronous, ...now, ...traceParent });
  }
  const { openPostgres } = await import('./postgres/index.js');
  return openPostgres({
    connectionString: database.url,
    poolSize: database.poolSize,
    timeoutMs: database.timeoutMs,
    ...now,
    ...traceParent,
    ...(options.onIdleError === undefined ? {} : { onIdleError: options.onIdleError }),
    ...(options.onListenError === undefined ? {} : { onListenError: options.onListenError }),
  });
}

/** The database as it may be shown in a banner or a log: a PostgreSQL URL without its password. */
export function describeDatabase(database: DatabaseConfig): string {
  if (database.engine === 'sqlite') return database.file;
  const url = new URL(database.url);
  url.password = '';
  url.searchParams.delete('password');
  return url.toString();
}
