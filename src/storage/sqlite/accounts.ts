import type Database from 'better-sqlite3';
import type { Synchronous } from './synchronous.js';
import type { Account, AccountRepository, ApiKeyInfo, KeyHash, Principal } from '../types.js';
import { TableCache } from './table-cache.js';

const KEY_COLUMNS = `id, account_id AS accountId, prefix, created_at AS createdAt, revoked_at AS revokedAt,
  scopes, expires_at AS expiresAt`;
const ACCOUNT_COLUMNS = 'id, name, created_at AS createdAt';

/** Scopes are stored space-separated (a scope has no space); NULL is every scope. */
type KeyRow = Omit<ApiKeyInfo, 'scopes'> & { scopes: string | null };

const scopesOf = (stored: string | null) => (stored === null ? null : stored.split(' ').filter(Boolean));
const keyInfo = (row: KeyRow): ApiKeyInfo => ({ ...row, scopes: scopesOf(row.scopes) });

export function accountRepository(db: Database.Database): Synchronous<AccountRepository> {
  const insertAccount = db.prepare<[string], Account>(
    `INSERT INTO accounts (name) VALUES (?) RETURNING ${ACCOUNT_COLUMNS}`,
  );
  const accountByName = db.prepare<[string], Account>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE name = ?`);
  const insertKey = db.prepare<[number, Buffer, string, string | null, string | null], KeyRow>(
    `INSERT INTO api_keys (account_id, hash, prefix, scopes, expires_at) VALUES (?, ?, ?, ?, ?) RETURNING ${KEY_COLUMNS}`,
  );
  const keyById = db.prepare<[number], KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`);
  const keysOfAccount = db.prepare<[number], KeyRow>(
    `SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY id`,
  );
  const revoke = db.prepare<[number]>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     WHERE id = ?`,
  );
  // ISO 8601 strings of one form compare as the times they name.
  const expire = db.prepare<[string, string, number]>(
    `UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NULL OR expires_at > ? THEN ? ELSE expires_at END
     WHERE id = ?`,
  );
  const countKeys = db.prepare<[], { count: number }>('SELECT count(*) AS count FROM api_keys');
  const principalByHash = db.prepare<
    [Buffer],
    { accountId: number; keyId: number; scopes: string | null; expiresAt: string | null }
  >(
    `SELECT account_id AS accountId, id AS keyId, scopes, expires_at AS expiresAt FROM api_keys
     WHERE hash = ? AND revoked_at IS NULL`,
  );
  const principalOf = (hash: KeyHash): Principal | undefined => {
    const row = principalByHash.get(Buffer.from(hash, 'base64'));
    if (row === undefined) return undefined;
    const expiresAt = row.expiresAt === null ? null : Date.parse(row.expiresAt);
    // Shared by every request with this key until it changes.
    return Object.freeze({ accountId: row.accountId, keyId: row.keyId, scopes: scopesOf(row.scopes), expiresAt });
  };
  const principals = new TableCache<string, Principal>(db, 'api_keys', ['INSERT', 'UPDATE', 'DELETE']);

  return {
    createAccount: (name) => insertAccount.get(name) as Account,
    findAccount: (name) => accountByName.get(name),
    addKey: (accountId, hash, prefix, { scopes, expiresAt } = {}) =>
      keyInfo(
        insertKey.get(
          accountId,
          Buffer.from(hash, 'base64'),
          prefix,
          scopes === undefined ? null : scopes.join(' '),
          expiresAt?.toISOString() ?? null,
        ) as KeyRow,
      ),
    findKey: (keyId) => {
      const row = keyById.get(keyId);
      return row === undefined ? undefined : keyInfo(row);
    },
    listKeys: (accountId) => keysOfAccount.all(accountId).map(keyInfo),
    revokeKey: (keyId) => revoke.run(keyId).changes > 0,
    expireKey: (keyId, at) => expire.run(at.toISOString(), at.toISOString(), keyId).changes > 0,
    countKeys: () => countKeys.get()?.count ?? 0,
    // Looked up on every request: from the cache, unless a key changed since (a revoked key is
    // refused on its next request, whichever process revoked it). Unknown keys are not kept.
    findPrincipal: (hash) => principals.get(hash, () => principalOf(hash)),
  };
}
