import type { Pool } from 'pg';
import type { Account, AccountRepository, ApiKeyInfo, Principal } from '../types.js';
import type { KeyCache } from './key-cache.js';
import { firstRow, onlyRow, rows, TIMESTAMP } from './queries.js';

const KEY_COLUMNS = `id, account_id AS "accountId", prefix, ${TIMESTAMP('created_at')} AS "createdAt",
  ${TIMESTAMP('revoked_at')} AS "revokedAt", scopes, ${TIMESTAMP('expires_at')} AS "expiresAt"`;
const ACCOUNT_COLUMNS = `id, name, ${TIMESTAMP('created_at')} AS "createdAt"`;

export function accountRepository(pool: Pool, keys: KeyCache): AccountRepository {
  /** Whether an UPDATE changed a key: if so, this instance forgets it at once, the others when told. */
  const changedKeys = (updated: unknown[]) => {
    keys.changed();
    return updated.length > 0;
  };
  return {
    createAccount: async (name) =>
      onlyRow<Account>(pool, {
        text: `INSERT INTO accounts (name) VALUES ($1) RETURNING ${ACCOUNT_COLUMNS}`,
        values: [name],
      }),
    findAccount: async (name) =>
      firstRow<Account>(pool, { text: `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE name = $1`, values: [name] }),
    addKey: async (accountId, hash, prefix, { scopes, expiresAt } = {}) =>
      onlyRow<ApiKeyInfo>(pool, {
        text: `INSERT INTO api_keys (account_id, hash, prefix, scopes, expires_at) VALUES ($1, $2, $3, $4, $5)
               RETURNING ${KEY_COLUMNS}`,
        values: [accountId, Buffer.from(hash, 'base64'), prefix, scopes ?? null, expiresAt ?? null],
      }),
    findKey: async (keyId) =>
      firstRow<ApiKeyInfo>(pool, { text: `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, values: [keyId] }),
    listKeys: async (accountId) =>
      rows<ApiKeyInfo>(pool, {
        text: `SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY id`,
        values: [accountId],
      }),
    revokeKey: async (keyId) =>
      changedKeys(
        await rows(pool, {
          text: 'UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING id',
          values: [keyId],
        }),
      ),
    expireKey: async (keyId, at) =>
      changedKeys(
        await rows(pool, {
          text: 'UPDATE api_keys SET expires_at = least(coalesce(expires_at, $1), $1) WHERE id = $2 RETURNING id',
          values: [at, keyId],
        }),
      ),
    countKeys: async () =>
      (await firstRow<{ count: number }>(pool, { text: 'SELECT count(*) AS count FROM api_keys' }))?.count ?? 0,
    // Looked up on every request: from the cache while no change to api_keys has been announced.
    findPrincipal: async (hash) =>
      keys.get(hash, () =>
        firstRow<Principal>(pool, {
          name: 'keys-principal',
          text: `SELECT account_id AS "accountId", id AS "keyId", scopes,
                   (extract(epoch FROM expires_at) * 1000)::float8 AS "expiresAt"
                 FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
          values: [Buffer.from(hash, 'base64')],
        }),
      ),
  };
}
