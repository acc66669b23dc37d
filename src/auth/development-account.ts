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

interface NameSchema {
  minLength: number;
  maxLength: number;
}

/** Which account names `petstore accounts create` takes, and the rule in words. */
export interface AccountNameRule {
  accepts(name: string): boolean;
  words: string;
}

/**
 * Account names follow the contract's rule for pet names, checked by its NewPet.name schema itself:
 * 1 to 100 characters, not only white space, no control characters or unpaired surrogates. White
 * space at either end is refused too: an account is found by its name, typed again on the command
 * line, where such white space does not show.
 */
export async function accountNameRule(): Promise<AccountNameRule> {
  // Loaded only when needed: the petstore commands that take no name do not pay for Ajv.
  const [{ loadContract }, { compileBodySchema }] = await Promise.all([
    import('../contract/document.js'),
    import('../plugins/validation.js'),
  ]);
  const { dereferenced } = await loadContract();
  const newPet = dereferenced.components?.schemas?.NewPet as { properties?: Record<string, object> } | undefined;
  const schema = newPet?.properties?.name;
  if (schema === undefined) throw new Error('the contract gives no schema for NewPet.name');
  const isPetName = compileBodySchema(schema);
  const { minLength, maxLength } = schema as NameSchema;
  return {
    accepts: (name) => isPetName(name) && name.trim() === name,
    words: `${minLength} to ${maxLength} characters, with no control characters and no white space at either end`,
  };
}
