import pg from 'pg';
import { migrationsDir } from '../../contract/paths.js';
import { type Storage, StorageUnavailableError } from '../types.js';
import { accountRepository } from './accounts.js';
import { Claims } from './idempotency.js';
import { KeyCache } from './key-cache.js';
import { type ListenFailed, listenerOn } from './listen.js';
import { migrate } from './migrate.js';
import { orderRepository } from './orders.js';
import { petRepository } from './pets.js';
import { firstRow, waitingForClient } from './queries.js';
import { giveUpAfter } from './read-timeout.js';
import { deliveryQueue } from './webhooks/delivery-queue.js';
import { webhookRepository } from './webhooks/endpoints.js';
import { Outbox } from './webhooks/outbox.js';

export interface PostgresOptions {
  /** A `postgres://` URL, as node-postgres takes it (`sslmode` and all). */
  connectionString: string;
  /** Connections at most; a request waits for a free one up to `timeoutMs`. */
  poolSize: number;
  /** How long a connection, a wait for one, or a statement may take before the request gets a 503. */
  timeoutMs: number;
  /** The clock idempotency keys expire by (Unix milliseconds). */
  now?: () => number;
  /** Told of a pool connection that failed while idle (the server restarted, say). */
  onIdleError?: (error: Error) => void;
  /** Told when a LISTEN connection fails: changes made by other instances are then seen later. */
  onListenError?: ListenFailed;
  /** The trace context to store with each event (OpenOptions). */
  traceParent?: () => string | undefined;
}

// bigint columns hold ids and categoryIds up to 2^53 - 1: exact as numbers, as the contract has them.
const types = new pg.TypeOverrides();
types.setTypeParser(pg.types.builtins.INT8, Number);

/** Connects, applies pending migrations, and returns the storage on a pool of connections. */
export async function openPostgres(options: PostgresOptions): Promise<Storage> {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.timeoutMs,
    // The server cancels a statement past this; the client gives up a little later (giveUpAfter).
    statement_timeout: options.timeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: 'petstore',
    types,
  });
  // An idle connection the server dropped is discarded by the pool; without a listener it would
  // be an uncaught error.
  pool.on('error', (error) => options.onIdleError?.(error));
  // A connection checked out between two queries (inside a transaction, say) has no listener of
  // the pool's: the server going away then would be an uncaught error that ends the process. Its
  // next query fails instead, and the caller answers 503.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    giveUpAfter(client, options.timeoutMs + 1000);
  });
  giveUpAfter(pool, options.timeoutMs + 1000);
  let migrationsApplied: number;
  try {
    migrationsApplied = await migrate(pool, migrationsDir('postgres'));
  } catch (error) {
    await pool.end();
    throw error;
  }
  const now = options.now ?? Date.now;
  const claims = new Claims(pool, now);
  await claims.purge();
  const outbox = new Outbox(now, options.traceParent);
  const listen = listenerOn(options.connectionString, options.onListenError);
  const deliveries = deliveryQueue(pool, listen, outbox, now);
  const keys = new KeyCache(listen);

  return {
    pets: petRepository(pool, claims, outbox, now),
    orders: orderRepository(pool, claims, outbox, now),
    accounts: accountRepository(pool, keys),
    webhooks: webhookRepository(pool, outbox, now),
    deliveries,
    migrationsApplied,
    // Ready means writable: a replica, or a primary being demoted, is not.
    ping: async () => {
      const status = await firstRow<{ readOnly: boolean }>(pool, {
        text: `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean AS "readOnly"`,
      });
      if (status?.readOnly !== false) throw new StorageUnavailableError('PostgreSQL is read-only');
    },
    close: async () => {
      keys.stop();
      if (!pool.ended) await pool.end();
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: waitingForClient(pool) }),
  };
}
