import type { IdempotencyClaim } from './types.js';

// What both backends' claims (sqlite/idempotency.ts, postgres/idempotency.ts) share: the row, the
// decision an earlier claim of a key makes, and the columns they read and write. Each backend keeps
// its own placeholders, locking and transaction, and its own (sync or async) replay read.

/** An earlier claim of a key, as both backends store it. */
export interface IdempotencyClaimRow {
  fingerprint: Buffer;
  resourceId: number;
  /** What the create made, as JSON, as its answer showed it; null for a claim made before it was kept. */
  response: string | null;
}

/** What a claim's create made, as it was then; undefined when the claim did not keep it. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller's T, which it stored
export function originalOf<T>(earlier: IdempotencyClaimRow): T | undefined {
  // Written, in the transaction that made it, as JSON.stringify of the T the create returned.
  return earlier.response === null ? undefined : (JSON.parse(earlier.response) as T);
}

/** What a request owes to an earlier claim of its key, still within its lifetime. */
export type EarlierClaim<T> =
  /** Another request used the key. */
  | { outcome: 'conflict' }
  /** A retry: answered with what the first create made, as its answer showed it. */
  | { outcome: 'replay-kept'; created: T }
  /** A retry of a claim made before answers were kept: answered with the resource as it is now. */
  | { outcome: 'replay-by-id'; resourceId: number };

/**
 * The same request (by fingerprint) replays what the earlier claim created; another is a conflict,
 * whatever the earlier one made, so a key cannot be reused to learn of another request's resource.
 */
export function settleEarlierClaim<T>(earlier: IdempotencyClaimRow, claim: IdempotencyClaim): EarlierClaim<T> {
  if (!earlier.fingerprint.equals(claim.fingerprint)) return { outcome: 'conflict' };
  const kept = originalOf<T>(earlier);
  return kept === undefined || kept === null
    ? { outcome: 'replay-by-id', resourceId: earlier.resourceId }
    : { outcome: 'replay-kept', created: kept };
}

/** A claim's columns as IdempotencyClaimRow names them (quoted: PostgreSQL folds bare names to lower case). */
export const CLAIM_ROW_COLUMNS = 'fingerprint, resource_id AS "resourceId", response';

/** The columns a claim is saved in, in the order of claimValues. */
export const CLAIM_COLUMNS = 'idempotency_keys (api_key_id, key, fingerprint, resource_id, response, created_at)';

/** The values of a claim saved at `at` for the resource `id`, which its create made as `created`. */
export function claimValues(claim: IdempotencyClaim, id: number, created: unknown, at: number): ClaimValues {
  return [claim.apiKeyId, claim.key, claim.fingerprint, id, JSON.stringify(created), at];
}

export type ClaimValues = [
  apiKeyId: number,
  key: string,
  fingerprint: Buffer,
  resourceId: number,
  response: string,
  at: number,
];
