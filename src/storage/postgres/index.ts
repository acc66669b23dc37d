import pg, { type Pool, type PoolClient, type QueryConfig, type QueryResultRow } from 'pg';
import { migrationsDir } from '../../paths.js';
import {
  type Account,
  type AccountRepository,
  type ApiKeyInfo,
  type CreateOutcome,
  IDEMPOTENCY_TTL_MS,
  type IdempotencyClaim,
  type NewPetRecord,
  type Pet,
  type PetRepository,
  type Principal,
  type Storage,
  StorageUnavailableError,
} from '../types.js';
import { migrate } from './migrate.js';
import { inTransaction } from './transaction.js';

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
}

// bigint columns hold ids and categoryIds up to 2^53 - 1: exact as numbers, as the contract has them.
const types = new pg.TypeOverrides();
types.setTypeParser(pg.types.builtins.INT8, Number);

const PET_COLUMNS = 'id, name, category_id AS "categoryId", status';
/**
 * The statements of every request, built once: node-postgres checks a named statement's text
 * against the one it prepared on each use, which is a pointer comparison when it is the same string.
 */
const PET_SQL = {
  list: `SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
  listByStatus: `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  insert: `INSERT INTO pets (name, category_id, status) VALUES ($1, $2, $3) RETURNING ${PET_COLUMNS}`,
  byId: `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`,
};
const TIMESTAMP = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const KEY_COLUMNS = `id, account_id AS "accountId", prefix, ${TIMESTAMP('created_at')} AS "createdAt",
  ${TIMESTAMP('revoked_at')} AS "revokedAt"`;
const ACCOUNT_COLUMNS = `id, name, ${TIMESTAMP('created_at')} AS "createdAt"`;

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

type Queryable = Pool | PoolClient;

async function rows<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R[]> {
  try {
    return (await db.query<R>(query)).rows;
  } catch (error) {
    throw unavailableOr(error);
  }
}

async function firstRow<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R | undefined> {
  return (await rows<R>(db, query))[0];
}

/** The same, for a statement that always returns a row (INSERT ... RETURNING). */
async function onlyRow<R extends QueryResultRow>(db: Queryable, query: QueryConfig): Promise<R> {
  const row = await firstRow<R>(db, query);
  if (row === undefined) throw new Error(`no row returned by ${query.name ?? query.text}`);
  return row;
}

/** `work`'s own errors pass as they are; connecting, BEGIN and COMMIT are classified like queries. */
async function transaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
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

/** Connects, applies pending migrations, and returns the storage on a pool of connections. */
export async function openPostgres(options: PostgresOptions): Promise<Storage> {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.timeoutMs,
    // The server cancels a statement past this; the client gives up a little later in case the
    // server cannot even say so (a network that drops everything).
    statement_timeout: options.timeoutMs,
    query_timeout: options.timeoutMs + 1000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: 'petstore',
    types,
  });
  // An idle connection the server dropped is discarded by the pool; without a listener it would
  // be an uncaught error.
  pool.on('error', (error) => options.onIdleError?.(error));
  let migrationsApplied: number;
  try {
    migrationsApplied = await migrate(pool, migrationsDir('postgres'));
  } catch (error) {
    await pool.end();
    throw error;
  }
  const now = options.now ?? Date.now;
  await rows(pool, {
    text: 'DELETE FROM idempotency_keys WHERE created_at <= $1',
    values: [now() - IDEMPOTENCY_TTL_MS],
  });

  return {
    pets: petRepository(pool, now),
    accounts: accountRepository(pool),
    migrationsApplied,
    // Ready means writable: a replica, or a primary being demoted, is not.
    ping: async () => {
      const status = await firstRow<{ readOnly: boolean }>(pool, {
        text: `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean AS "readOnly"`,
      });
      if (status?.readOnly !== false) throw new StorageUnavailableError('PostgreSQL is read-only');
    },
    close: async () => {
      if (!pool.ended) await pool.end();
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  };
}

interface ClaimRow {
  fingerprint: Buffer;
  petId: number;
}

function petRepository(pool: Pool, now: () => number): PetRepository {
  // limit + 1 rows tell whether another page follows without a second query.
  const list = (afterId: number, limit: number, status: string | undefined) =>
    status === undefined
      ? { name: 'pets-list', text: PET_SQL.list, values: [afterId, limit + 1] }
      : { name: 'pets-list-status', text: PET_SQL.listByStatus, values: [status, afterId, limit + 1] };
  const insert = (pet: NewPetRecord) => ({
    name: 'pets-insert',
    text: PET_SQL.insert,
    values: [pet.name, pet.categoryId, pet.status],
  });
  const byId = (id: number) => ({ name: 'pets-by-id', text: PET_SQL.byId, values: [id] });
  const claimOf = (claim: IdempotencyClaim, since: number) => ({
    name: 'claims-find',
    text: `SELECT fingerprint, pet_id AS "petId" FROM idempotency_keys
           WHERE api_key_id = $1 AND key = $2 AND created_at > $3`,
    values: [claim.apiKeyId, claim.key, since],
  });

  const settle = async (claim: IdempotencyClaim, existing: ClaimRow): Promise<CreateOutcome> => {
    if (!existing.fingerprint.equals(claim.fingerprint)) return { outcome: 'conflict' };
    return { outcome: 'replayed', pet: await onlyRow<Pet>(pool, byId(existing.petId)) };
  };

  /**
   * The pet and its claim commit together. A racing request with the same key, on this instance
   * or another, blocks on the claim's primary key until the first commits, then finds its claim
   * and replays it: a retry in flight waits for the first (at most the statement timeout).
   */
  const createClaimed = async (pet: NewPetRecord, claim: IdempotencyClaim): Promise<CreateOutcome> => {
    const at = now();
    const since = at - IDEMPOTENCY_TTL_MS;
    const earlier = await firstRow<ClaimRow>(pool, claimOf(claim, since));
    if (earlier !== undefined) return settle(claim, earlier);
    const created = await transaction(pool, async (client) => {
      // An expired claim on the same key gives way to the new one.
      await rows(client, {
        text: 'DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND created_at <= $3',
        values: [claim.apiKeyId, claim.key, since],
      });
      const inserted = await onlyRow<Pet>(client, insert(pet));
      const saved = await rows(client, {
        name: 'claims-save',
        text: `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, pet_id, created_at)
               VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING pet_id`,
        values: [claim.apiKeyId, claim.key, claim.fingerprint, inserted.id, at],
      });
      // Lost the race: undo this pet (its id is burnt, never reused) and replay the winner's.
      if (saved.length === 0) throw new LostClaimRace();
      return inserted;
    }).catch((error: unknown) => {
      if (error instanceof LostClaimRace) return undefined;
      throw error;
    });
    if (created !== undefined) return { outcome: 'created', pet: created };
    const winner = await firstRow<ClaimRow>(pool, claimOf(claim, since));
    if (winner === undefined) throw new Error('an idempotency claim vanished as it was replayed');
    return settle(claim, winner);
  };

  return {
    list: async ({ limit, status, afterId = 0 }) => {
      const found = await rows<Pet>(pool, list(afterId, limit, status));
      const hasMore = found.length > limit;
      return { pets: hasMore ? found.slice(0, limit) : found, hasMore };
    },
    create: async (pet, claim) =>
      claim === undefined
        ? { outcome: 'created', pet: await onlyRow<Pet>(pool, insert(pet)) }
        : createClaimed(pet, claim),
    get: async (id) => firstRow<Pet>(pool, byId(id)),
    createMany: async (pets) => {
      const all = [...pets];
      await transaction(pool, async (client) => {
        for (let start = 0; start < all.length; start += 10_000) {
          const batch = all.slice(start, start + 10_000);
          await rows(client, {
            text: `INSERT INTO pets (name, category_id, status)
                   SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])`,
            values: [batch.map((pet) => pet.name), batch.map((pet) => pet.categoryId), batch.map((pet) => pet.status)],
          });
        }
      });
      return all.length;
    },
  };
}

class LostClaimRace extends Error {}

function accountRepository(pool: Pool): AccountRepository {
  return {
    createAccount: async (name) =>
      onlyRow<Account>(pool, {
        text: `INSERT INTO accounts (name) VALUES ($1) RETURNING ${ACCOUNT_COLUMNS}`,
        values: [name],
      }),
    findAccount: async (name) =>
      firstRow<Account>(pool, { text: `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE name = $1`, values: [name] }),
    addKey: async (accountId, hash, prefix) =>
      onlyRow<ApiKeyInfo>(pool, {
        text: `INSERT INTO api_keys (account_id, hash, prefix) VALUES ($1, $2, $3) RETURNING ${KEY_COLUMNS}`,
        values: [accountId, hash, prefix],
      }),
    listKeys: async (accountId) =>
      rows<ApiKeyInfo>(pool, {
        text: `SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY id`,
        values: [accountId],
      }),
    revokeKey: async (keyId) =>
      (
        await rows(pool, {
          text: 'UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING id',
          values: [keyId],
        })
      ).length > 0,
    countKeys: async () =>
      (await firstRow<{ count: number }>(pool, { text: 'SELECT count(*) AS count FROM api_keys' }))?.count ?? 0,
    // Looked up on every request, never cached: a revoked key is refused by every instance at once.
    findPrincipal: async (hash) =>
      firstRow<Principal>(pool, {
        name: 'keys-principal',
        text: `SELECT account_id AS "accountId", id AS "keyId" FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
        values: [hash],
      }),
  };
}
