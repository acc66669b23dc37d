import type { Pool, PoolClient } from 'pg';
import {
  CLAIM_COLUMNS,
  CLAIM_ROW_COLUMNS,
  claimValues,
  type IdempotencyClaimRow,
  settleEarlierClaim,
} from '../idempotency-rows.js';
import { type CreateOutcome, IDEMPOTENCY_TTL_MS, type IdempotencyClaim } from '../types.js';
import { firstRow, rows, transaction } from './queries.js';

/** Idempotency claims, committed with what they claim (a pet, an order). */
export class Claims {
  constructor(
    private readonly pool: Pool,
    private readonly now: () => number,
  ) {}

  /** Forgets expired claims (at start). */
  async purge(): Promise<void> {
    await rows(this.pool, {
      text: 'DELETE FROM idempotency_keys WHERE created_at <= $1',
      values: [this.now() - IDEMPOTENCY_TTL_MS],
    });
  }

  /**
   * Runs `create` in a transaction unless the claim was made before: then the earlier outcome
   * (what it created as it was then, or a conflict for another request; `replay` reads what a
   * claim made before responses were kept created, as it is now). Requests with the same key,
   * on this instance or another, take turns on an advisory lock on it: a retry in flight waits for
   * the first to commit (at most the statement timeout), then replays it.
   */
  async claimed<T>(
    claim: IdempotencyClaim | undefined,
    replay: (id: number) => Promise<T | undefined>,
    create: (client: PoolClient) => Promise<{ id: number; created: T }>,
  ): Promise<CreateOutcome<T>> {
    if (claim === undefined) return { outcome: 'created', created: (await transaction(this.pool, create)).created };
    const at = this.now();
    const since = at - IDEMPOTENCY_TTL_MS;
    const settle = async (earlier: IdempotencyClaimRow): Promise<CreateOutcome<T>> => {
      const settled = settleEarlierClaim<T>(earlier, claim);
      if (settled.outcome === 'conflict') return settled;
      return {
        outcome: 'replayed',
        created: settled.outcome === 'replay-kept' ? settled.created : await replay(settled.resourceId),
      };
    };
    const earlier = await firstRow<IdempotencyClaimRow>(this.pool, find(claim, since));
    if (earlier !== undefined) return settle(earlier);
    const outcome = await transaction(this.pool, async (client) => {
      await rows(client, {
        name: 'claims-lock',
        text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, $2))',
        values: [claim.key, claim.apiKeyId],
      });
      const raced = await firstRow<IdempotencyClaimRow>(client, find(claim, since));
      if (raced !== undefined) return { raced };
      // An expired claim on the same key gives way to the new one.
      await rows(client, {
        text: 'DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
        values: [claim.apiKeyId, claim.key],
      });
      const made = await create(client);
      await rows(client, {
        name: 'claims-save',
        text: `INSERT INTO ${CLAIM_COLUMNS} VALUES ($1, $2, $3, $4, $5, $6)`,
        values: claimValues(claim, made.id, made.created, at),
      });
      return { made };
    });
    return 'raced' in outcome ? settle(outcome.raced) : { outcome: 'created', created: outcome.made.created };
  }
}

function find(claim: IdempotencyClaim, since: number) {
  return {
    name: 'claims-find',
    text: `SELECT ${CLAIM_ROW_COLUMNS} FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND created_at > $3`,
    values: [claim.apiKeyId, claim.key, since],
  };
}
