import type Database from 'better-sqlite3';
import { type IdempotencyClaimRow, originalOf } from '../idempotency-rows.js';
import { type CreateOutcome, IDEMPOTENCY_TTL_MS, type IdempotencyClaim } from '../types.js';

/**
 * Idempotency claims, used inside the transaction that creates what they claim (a pet, an order):
 * IMMEDIATE transactions take the write lock first, so two racing retries cannot both miss it.
 */
export class Claims {
  private readonly find;
  private readonly save;

  constructor(
    db: Database.Database,
    private readonly now: () => number,
  ) {
    this.find = db.prepare<[number, string, number], IdempotencyClaimRow>(
      `SELECT fingerprint, resource_id AS resourceId, response FROM idempotency_keys
       WHERE api_key_id = ? AND key = ? AND created_at > ?`,
    );
    // REPLACE: an expired claim on the same key gives way to the new one.
    this.save = db.prepare<[number, string, Buffer, number, string, number]>(
      `INSERT OR REPLACE INTO idempotency_keys (api_key_id, key, fingerprint, resource_id, response, created_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at <= ?').run(now() - IDEMPOTENCY_TTL_MS);
  }

  /**
   * Creates with `create` unless the claim was made before: then the earlier outcome (what it
   * created as it was then, or a conflict for another request). Call inside an IMMEDIATE
   * transaction. `replay` reads what a claim made before responses were kept created, as it is now.
   */
  claimed<T>(
    claim: IdempotencyClaim | undefined,
    replay: (id: number) => T | undefined,
    create: () => { id: number; created: T },
  ): CreateOutcome<T> {
    const at = this.now();
    if (claim !== undefined) {
      const earlier = this.find.get(claim.apiKeyId, claim.key, at - IDEMPOTENCY_TTL_MS);
      if (earlier !== undefined) {
        if (!earlier.fingerprint.equals(claim.fingerprint)) return { outcome: 'conflict' };
        return { outcome: 'replayed', created: originalOf<T>(earlier) ?? replay(earlier.resourceId) };
      }
    }
    const { id, created } = create();
    if (claim !== undefined)
      this.save.run(claim.apiKeyId, claim.key, claim.fingerprint, id, JSON.stringify(created), at);
    return { outcome: 'created', created };
  }
}
