import type Database from 'better-sqlite3';
import type { Account, AccountRepository, ApiKeyInfo, Principal } from '../types.js';

const KEY_COLUMNS = 'id, account_id AS accountId, prefix, created_at AS createdAt, revoked_at AS revokedAt';
const ACCOUNT_COLUMNS = 'id, name, created_at AS createdAt';

export function accountRepository(db: Database.Database): AccountRepository {
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
