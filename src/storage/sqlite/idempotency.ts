import type Database from 'better-sqlite3';
import {
  CLAIM_COLUMNS,
  CLAIM_ROW_COLUMNS,
  type ClaimValues,
  claimValues,
  type IdempotencyClaimRow,
  settleEarlierClaim,
} from '../idempotency-rows.js';
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
      `SELECT ${CLAIM_ROW_COLUMNS} FROM idempotency_keys WHERE api_key_id = ? AND key = ? AND created_at > ?`,
    );
    // REPLACE: an expired claim on the same key gives way to the new one.
    this.save = db.prepare<ClaimValues>(`INSERT OR REPLACE INTO ${CLAIM_COLUMNS} VALUES (?, ?, ?, ?, ?, ?)`);
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
        const settled = settleEarlierClaim<T>(earlier, claim);
        if (settled.outcome === 'conflict') return settled;
        return {
          outcome: 'replayed',
          created: settled.outcome === 'replay-kept' ? settled.created : replay(settled.resourceId),
        };
      }
    }
    const { id, created } = create();
    if (claim !== undefined) this.save.run(...claimValues(claim, id, created, at));
    return { outcome: 'created', created };
  }
}
