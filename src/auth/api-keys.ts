import { hash, randomBytes } from 'node:crypto';
import type { AccountRepository, ApiKeyInfo, KeyGrant, KeyHash } from '../storage/types.js';

export const KEY_PREFIX = 'psk_';
/** `psk_` and 32 random bytes (256 bits) as unpadded base64url: 43 characters. */
const KEY_LENGTH = KEY_PREFIX.length + 43;
/** How much of a key is kept in clear to tell keys apart in listings. */
const SHOWN_PREFIX_LENGTH = KEY_PREFIX.length + 6;

/**
 * SHA-256 in one call, straight to base64: making a Buffer first cost more than the digest itself
 * (BENCHMARKS.md), and the caches and limits key by the string anyway.
 */
export function hashKey(key: string): KeyHash {
  return hash('sha256', key, 'base64');
}

/**
 * Whether a token has a key's prefix and length: anything else is refused without hashing it or
 * looking it up. The characters are not checked (the scan cost twice the authentication hook's own
 * code; BENCHMARKS.md): a token of the right shape that no key can be is simply not found.
 */
export function hasKeyShape(token: string): boolean {
  return token.length === KEY_LENGTH && token.startsWith(KEY_PREFIX);
}

export interface IssuedKey {
  /** The key itself: shown once, never stored. */
  key: string;
  info: ApiKeyInfo;
}

export async function issueKey(
  accounts: AccountRepository,
  accountId: number,
  grant: KeyGrant = {},
): Promise<IssuedKey> {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const info = await accounts.addKey(accountId, hashKey(key), key.slice(0, SHOWN_PREFIX_LENGTH), grant);
  return { key, info };
}
