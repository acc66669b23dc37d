import { issueKey, type IssuedKey } from './auth/api-keys.js';
import type { AccountRepository } from './storage/types.js';

export const DEVELOPMENT_ACCOUNT = 'development';

/**
 * On a database with no keys at all, creates the development account and a key for it, so a
 * newcomer can call the API at once. Returns the key, or undefined when keys already exist.
 */
export async function ensureDevelopmentKey(accounts: AccountRepository): Promise<IssuedKey | undefined> {
  if ((await accounts.countKeys()) > 0) return undefined;
  const account =
    (await accounts.findAccount(DEVELOPMENT_ACCOUNT)) ?? (await accounts.createAccount(DEVELOPMENT_ACCOUNT));
  return issueKey(accounts, account.id);
}
