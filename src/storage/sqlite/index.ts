import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { makeDirectory } from '../../make-directory.js';
import { migrationsDir } from '../../paths.js';
import {
  type Account,
  DATABASE_RETRY_AFTER_SECONDS,
  type AccountRepository,
  type ApiKeyInfo,
  type CreateOutcome,
  IDEMPOTENCY_TTL_MS,
  type IdempotencyClaim,
  type NewPetRecord,
  type Pet,
  type PetPageQuery,
  type PetRepository,
  type Principal,
  type Storage,
  StorageUnavailableError,
} from '../types.js';
import { migrate } from './migrate.js';

export type SynchronousMode = 'NORMAL' | 'FULL' | 'EXTRA';

export interface SqliteOptions {
  /** A file path, or `:memory:`. */
  filename: string;
  /** SQLite's `synchronous` pragma; see "Guarantees" in the README. */
  synchronous?: SynchronousMode;
  /** The clock idempotency keys expire by (Unix milliseconds). */
  now?: () => number;
}

/**
 * How long a write waits for another process's write lock (the CLI's are a few milliseconds). The
 * wait blocks the event loop, so it is short, and once one write has found the lock held past it,
 * the writes of the next LOCKED_FOR_MS do not wait at all: they are 503s at once while reads,
 * which SQLite's WAL mode never blocks, and /healthz go on being answered.
 */
const BUSY_TIMEOUT_MS = 250;
const LOCKED_FOR_MS = DATABASE_RETRY_AFTER_SECONDS * 1000;

const PET_COLUMNS = 'id, name, category_id AS categoryId, status';
const KEY_COLUMNS = 'id, account_id AS accountId, prefix, created_at AS createdAt, revoked_at AS revokedAt';
const ACCOUNT_COLUMNS = 'id, name, created_at AS createdAt';

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

  return {
    pets: unavailableWhenBusy(petRepository(db, options.now ?? Date.now), lock),
    accounts: unavailableWhenBusy(accountRepository(db), lock),
    migrationsApplied,
    // Ready means writable: take the write lock and let go.
    ping: unavailableWhenBusy({ ping: async () => void db.exec('BEGIN IMMEDIATE; ROLLBACK') }, lock).ping,
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
function unavailableWhenBusy<T extends object>(repository: T, lock: LockWait): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(repository)) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await (method as (...args: unknown[]) => Promise<unknown>)(...args);
      } catch (error) {
        if ((error as { code?: unknown }).code === 'SQLITE_BUSY') {
          lock.held();
          throw new StorageUnavailableError('SQLite is locked by another process', { cause: error });
        }
        throw error;
      }
    };
  }
  return wrapped as T;
}

function petRepository(db: Database.Database, now: () => number): PetRepository {
  // limit + 1 rows tell whether another page follows without a second query.
  const listAll = db.prepare<[number, number], Pet>(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
  const listByStatus = db.prepare<[string, number, number], Pet>(
    `SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
  );
  const insert = db.prepare<[string, number, string], Pet>(
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${PET_COLUMNS}`,
  );
  const byId = db.prepare<[number], Pet>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`);
  const claimOf = db.prepare<[number, string, number], { fingerprint: Buffer; petId: number }>(
    `SELECT fingerprint, pet_id AS petId FROM idempotency_keys
     WHERE api_key_id = ? AND key = ? AND created_at > ?`,
  );
  // REPLACE: an expired claim on the same key gives way to the new one.
  const saveClaim = db.prepare<[number, string, Buffer, number, number]>(
    `INSERT OR REPLACE INTO idempotency_keys (api_key_id, key, fingerprint, pet_id, created_at)
     VALUES (?, ?, ?, ?, ?)`,
  );
  const purgeClaims = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at <= ?');
  // IMMEDIATE takes the write lock first, so two racing retries cannot both miss the claim.
  const createClaimed = db.transaction((pet: NewPetRecord, claim: IdempotencyClaim): CreateOutcome => {
    const at = now();
    const existing = claimOf.get(claim.apiKeyId, claim.key, at - IDEMPOTENCY_TTL_MS);
    if (existing !== undefined) {
      if (!existing.fingerprint.equals(claim.fingerprint)) return { outcome: 'conflict' };
      return { outcome: 'replayed', pet: byId.get(existing.petId) as Pet };
    }
    const created = insert.get(pet.name, pet.categoryId, pet.status) as Pet;
    saveClaim.run(claim.apiKeyId, claim.key, claim.fingerprint, created.id, at);
    return { outcome: 'created', pet: created };
  });
  purgeClaims.run(now() - IDEMPOTENCY_TTL_MS);
  const insertMany = db.transaction((pets: Iterable<NewPetRecord>) => {
    let count = 0;
    for (const pet of pets) {
      insert.run(pet.name, pet.categoryId, pet.status);
      count += 1;
    }
    return count;
  });

  return {
    list: async ({ limit, status, afterId = 0 }: PetPageQuery) => {
      const rows =
        status === undefined ? listAll.all(afterId, limit + 1) : listByStatus.all(status, afterId, limit + 1);
      const hasMore = rows.length > limit;
      return { pets: hasMore ? rows.slice(0, limit) : rows, hasMore };
    },
    create: async (pet, claim) =>
      claim === undefined
        ? { outcome: 'created', pet: insert.get(pet.name, pet.categoryId, pet.status) as Pet }
        : createClaimed.immediate(pet, claim),
    get: async (id) => byId.get(id),
    createMany: async (pets) => insertMany(pets),
  };
}

function accountRepository(db: Database.Database): AccountRepository {
  const insertAccount = db.prepare<[string], Account>(
    `INSERT INTO accounts (name) VALUES (?) RETURNING ${ACCOUNT_COLUMNS}`,
  );
  const accountByName = db.prepare<[string], Account>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE name = ?`);
  const insertKey = db.prepare<[number, Buffer, string], ApiKeyInfo>(
    `INSERT INTO api_keys (account_id, hash, prefix) VALUES (?, ?, ?) RETURNING ${KEY_COLUMNS}`,
  );
  const keysOfAccount = db.prepare<[number], ApiKeyInfo>(
    `SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY id`,
  );
  const revoke = db.prepare<[number]>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     WHERE id = ?`,
  );
  const countKeys = db.prepare<[], { count: number }>('SELECT count(*) AS count FROM api_keys');
  const principalByHash = db.prepare<[Buffer], Principal>(
    `SELECT account_id AS accountId, id AS keyId FROM api_keys
     WHERE hash = ? AND revoked_at IS NULL`,
  );

  return {
    createAccount: async (name) => insertAccount.get(name) as Account,
    findAccount: async (name) => accountByName.get(name),
    addKey: async (accountId, hash, prefix) => insertKey.get(accountId, hash, prefix) as ApiKeyInfo,
    listKeys: async (accountId) => keysOfAccount.all(accountId),
    revokeKey: async (keyId) => revoke.run(keyId).changes > 0,
    countKeys: async () => countKeys.get()?.count ?? 0,
    findPrincipal: async (hash) => principalByHash.get(hash),
  };
}
