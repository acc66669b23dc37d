import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { migrationsDir } from '../../paths.js';
import type {
  Account,
  AccountRepository,
  ApiKeyInfo,
  NewPetRecord,
  Pet,
  PetPageQuery,
  PetRepository,
  Principal,
  Storage,
} from '../types.js';
import { migrate } from './migrate.js';

export type SynchronousMode = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

export interface SqliteOptions {
  /** A file path, or `:memory:`. */
  filename: string;
  /** SQLite's `synchronous` pragma; see "Guarantees" in the README. */
  synchronous?: SynchronousMode;
}

const PET_COLUMNS = 'id, name, category_id AS categoryId, status';
const KEY_COLUMNS =
  'id, account_id AS accountId, prefix, created_at AS createdAt, revoked_at AS revokedAt';
const ACCOUNT_COLUMNS = 'id, name, created_at AS createdAt';

export function openSqlite(options: SqliteOptions): Storage {
  if (options.filename !== ':memory:') mkdirSync(dirname(options.filename), { recursive: true });
  const db = new Database(options.filename);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  // The CLI may write while the server runs: wait for the lock rather than fail.
  db.pragma('busy_timeout = 5000');
  migrate(db, migrationsDir);

  return {
    pets: petRepository(db),
    accounts: accountRepository(db),
    ping: async () => {
      db.prepare('SELECT 1').get();
    },
    close: async () => {
      if (db.open) db.close();
    },
  };
}

function petRepository(db: Database.Database): PetRepository {
  // limit + 1 rows tell whether another page follows without a second query.
  const listAll = db.prepare<[number, number], Pet>(
    `SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`,
  );
  const listByStatus = db.prepare<[string, number, number], Pet>(
    `SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
  );
  const insert = db.prepare<[string, number, string], Pet>(
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${PET_COLUMNS}`,
  );
  const byId = db.prepare<[number], Pet>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`);
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
        status === undefined
          ? listAll.all(afterId, limit + 1)
          : listByStatus.all(status, afterId, limit + 1);
      const hasMore = rows.length > limit;
      return { pets: hasMore ? rows.slice(0, limit) : rows, hasMore };
    },
    create: async (pet) => insert.get(pet.name, pet.categoryId, pet.status) as Pet,
    get: async (id) => byId.get(id),
    createMany: async (pets) => insertMany(pets),
  };
}

function accountRepository(db: Database.Database): AccountRepository {
  const insertAccount = db.prepare<[string], Account>(
    `INSERT INTO accounts (name) VALUES (?) RETURNING ${ACCOUNT_COLUMNS}`,
  );
  const accountByName = db.prepare<[string], Account>(
    `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE name = ?`,
  );
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
