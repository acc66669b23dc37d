import { issueKey, type IssuedKey } from './api-keys.js';
import type { AccountRepository } from '../storage/types.js';

export const DEVELOPMENT_ACCOUNT = 'development';

/**
 * On a database with no keys at all, creates the development account and a key for it, so a
 * newcomer can call the API at once. Returns the key, or undefined when keys already exist.
 */
export async function ensureDevelopmentKey(accounts: AccountRepository): Promise<IssuedKey | undefined> {
  if ((await accounts.countKeys()) > 0) return undefined;
  const existing = await accounts.findAccount(DEVELOPMENT_ACCOUNT);
  if (existing !== undefined) return issueKey(accounts, existing.id);
  try {
    return await issueKey(accounts, (await accounts.createAccount(DEVELOPMENT_ACCOUNT)).id);
  } catch (error) {
    // Instances starting together on an empty database: the one that created the account issues
    // the key, the others print how to make one.
    if ((await accounts.findAccount(DEVELOPMENT_ACCOUNT)) !== undefined) return undefined;
    throw error;
  }
}
