import type { Pool, PoolClient } from 'pg';

/**
 * How long a query may go unanswered before this process gives up on it, by pool and by each of
 * its connections. PostgreSQL cancels a statement past `statement_timeout` itself; this is for a
 * server that cannot even say so (a network that drops everything).
 *
 * node-postgres's own `query_timeout` does the same, but its timer holds the query, and with it the
 * rows as they arrive: with it, each young-generation GC of a load of 100-pet pages took 6-7 ms
 * instead of under 1 (`--trace-gc`, as many GCs a response either way), ~25% of the throughput.
 * This timer holds only the way to fail.
 */
const readTimeouts = new WeakMap<Pool | PoolClient, number>();

export function giveUpAfter(db: Pool | PoolClient, ms: number): void {
  readTimeouts.set(db, ms);
}

/** `pending`, a query of `db`'s, or its failure once the read timeout has passed without an answer. */
export function answered<T>(db: Pool | PoolClient, pending: Promise<T>): Promise<T> {
  const ms = readTimeouts.get(db);
  if (ms === undefined) return pending;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Query read timeout: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([pending, late]).finally(() => clearTimeout(timer));
}
