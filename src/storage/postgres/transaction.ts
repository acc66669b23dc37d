import type { Pool, PoolClient } from 'pg';
import { answered } from './read-timeout.js';

/** What to do once the transaction a client is in has committed (nothing, if it rolls back). */
const committed = new WeakMap<PoolClient, Set<() => void>>();

/** Runs `then` after the transaction `client` is in commits; once, however often it is asked. */
export function afterCommit(client: PoolClient, then: () => void): void {
  const pending = committed.get(client) ?? new Set();
  pending.add(then);
  committed.set(client, pending);
}

/**
 * Runs `work` in a transaction on a client of its own, committing what it returns. On an error it
 * rolls back; a client that cannot even roll back has lost its connection and is discarded rather
 * than returned to the pool.
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await answered(client, client.query('BEGIN'));
    const result = await work(client);
    await answered(client, client.query('COMMIT'));
    for (const then of committed.get(client) ?? []) then();
    return result;
  } catch (error) {
    await answered(client, client.query('ROLLBACK')).catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    committed.delete(client);
    client.release(broken);
  }
}
