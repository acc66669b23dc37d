import type { Pool } from 'pg';
import type { Account, AccountRepository, ApiKeyInfo, Principal } from '../types.js';
import { firstRow, onlyRow, rows, TIMESTAMP } from './queries.js';

const KEY_COLUMNS = `id, account_id AS "accountId", prefix, ${TIMESTAMP('created_at')} AS "createdAt",
  ${TIMESTAMP('revoked_at')} AS "revokedAt"`;
const ACCOUNT_COLUMNS = `id, name, ${TIMESTAMP('created_at')} AS "createdAt"`;

export function accountRepository(pool: Pool): AccountRepository {
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
