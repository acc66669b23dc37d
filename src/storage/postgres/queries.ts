import pg, { type Pool, type PoolClient, type QueryConfig, type QueryResultRow } from 'pg';
import { StorageUnavailableError } from '../types.js';
import { answered } from './read-timeout.js';
import { inTransaction } from './transaction.js';

/** A timestamptz column as the API shows times: UTC, milliseconds, `Z`. */
export const TIMESTAMP = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** SQLSTATE classes of a server that cannot serve now: connection, resources, shutdown, system. */
const UNAVAILABLE_CLASSES = new Set(['08', '53', '57', '58']);
const READ_ONLY_TRANSACTION = '25006';

const NETWORK_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);
// node-postgres's own words for a connection that failed, timed out or was cut.
const DRIVER_UNAVAILABLE = /timeout|timed out|Connection terminated|connection error|not queryable/i;

/**
 * Whether a failure is the database's state rather than a fault of ours: the server's errors carry
 * a SQLSTATE; the driver's (refused, reset, timed out, terminated) a network code or its message.
 */
function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (error instanceof pg.DatabaseError) {
    return UNAVAILABLE_CLASSES.has(String(code).slice(0, 2)) || code === READ_ONLY_TRANSACTION;
  }
  return (typeof code === 'string' && NETWORK_ERRORS.has(code)) || DRIVER_UNAVAILABLE.test(error.message);
}

function unavailableOr(error: unknown): unknown {
  return isUnavailable(error) ? new StorageUnavailableError('PostgreSQL is unavailable', { cause: error }) : error;
}

export type Queryable = Pool | PoolClient;

export async function rows<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R[]> {
  try {
    return (await answered(db, db.query<R>(query))).rows;
  } catch (error) {
    throw unavailableOr(error);
  }
}

export async function firstRow<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R | undefined> {
  return (await rows<R>(db, query))[0];
}

/** The same, for a statement that always returns a row (INSERT ... RETURNING). */
export async function onlyRow<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R> {
  const row = await firstRow<R>(db, query);
  if (row === undefined) throw new Error(`no row returned by ${query.name ?? query.text}`);
  return row;
}

/** `work`'s own errors pass as they are; connecting, BEGIN and COMMIT are classified like queries. */
export async function transaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const failed = { inWork: false };
  try {
    return await inTransaction(pool, (client) =>
      work(client).catch((error: unknown) => {
        failed.inWork = true;
        throw error;
      }),
    );
  } catch (error) {
    throw failed.inWork ? error : unavailableOr(error);
  }
}

/**
 * Checkouts that no client can take now: what the pool gauge shows and what holds the delivery
 * worker back. node-postgres queues every checkout made while a client
 * is idle and hands it that client on the next tick, so its `waitingCount` counts them too: a
 * scrape reads 2 on an idle pool, the webhook backlog gauges' own queries, started in the same
 * tick. Only what is queued beyond the idle clients and the room left to connect more waits.
 */
export function waitingForClient(pool: Pool): number {
  const room = pool.options.max - pool.totalCount;
  return Math.max(0, pool.waitingCount - pool.idleCount - room);
}
