import type { Pool } from 'pg';
import { endpointHealth } from '../../../domain/endpoint-health.js';
import type { AttemptOutcome, DeliveryQueue } from '../../types.js';
import { CLAIM_COLUMNS, type ClaimRow, claimedOf, FAN_OUT_BATCH, inFlight } from '../../webhook-rows.js';
import type { Listen } from '../listen.js';
import { firstRow, rows, transaction, waitingForClient } from '../queries.js';
import { CHANNEL, type Outbox } from './outbox.js';

/**
 * Up to `$1` events made into a delivery for each of their endpoints still there. SKIP LOCKED: two
 * instances take different events; one committed late, with a lower id, is simply taken later.
 */
const FAN_OUT = `WITH batch AS (
    SELECT id, endpoints, created_at FROM webhook_events WHERE NOT fanned_out
    ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
  ), marked AS (
    UPDATE webhook_events e SET fanned_out = true FROM batch WHERE e.id = batch.id
  )
  INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
  SELECT batch.id, w.id, batch.created_at
  FROM batch CROSS JOIN LATERAL unnest(batch.endpoints) WITH ORDINALITY AS endpoint (id, n)
  JOIN webhook_endpoints w ON w.id = endpoint.id
  ORDER BY batch.id, endpoint.n`;

/**
 * A fair claim of up to `$3` due messages, leased until `$2`: the first `$4` due messages of each
 * enabled endpoint with fewer than `$4` in flight, taken by account in turn (each account's first,
 * then each one's second, ...) while the account has fewer than `$5` in flight, then locked with
 * SKIP LOCKED: two instances take different ones.
 */
const CLAIM = `WITH ${inFlight('$1')}, first_due AS (
    SELECT d.id, d.next_attempt_at, w.account_id, coalesce(f.count, 0) AS in_flight, d.nth
    FROM webhook_endpoints w LEFT JOIN in_flight f ON f.endpoint_id = w.id
    CROSS JOIN LATERAL (
      SELECT x.id, x.next_attempt_at, row_number() OVER (ORDER BY x.next_attempt_at, x.id) AS nth
      FROM webhook_deliveries x WHERE x.endpoint_id = w.id AND x.state = 'pending'
        AND x.next_attempt_at <= $1 AND coalesce(x.lease_until, 0) <= $1
      ORDER BY x.next_attempt_at, x.id LIMIT $4) d
    WHERE w.enabled AND coalesce(f.count, 0) < $4
  ), turns AS (
    SELECT id, next_attempt_at, account_id,
      row_number() OVER (PARTITION BY account_id ORDER BY nth, next_attempt_at, id) AS turn
    FROM first_due WHERE nth + in_flight <= $4
  ), chosen AS (
    SELECT id FROM turns t LEFT JOIN account_in_flight a ON a.account_id = t.account_id
    WHERE turn + coalesce(a.count, 0) <= $5
    ORDER BY turn, next_attempt_at, id LIMIT $3
  ), locked AS (
    SELECT d.id FROM webhook_deliveries d JOIN chosen ON chosen.id = d.id
    WHERE d.state = 'pending' AND coalesce(d.lease_until, 0) <= $1 FOR UPDATE OF d SKIP LOCKED
  ), leased AS (
    UPDATE webhook_deliveries d SET attempts = attempts + 1, lease_until = $2
    FROM locked WHERE d.id = locked.id RETURNING d.*
  )
  SELECT ${CLAIM_COLUMNS} FROM leased d JOIN webhook_events e ON e.id = d.event_id
  JOIN webhook_endpoints w ON w.id = d.endpoint_id`;

/**
 * When the next message is due as the claim sees them: a message in flight when its lease ends, an
 * endpoint with `$2` in flight (or of an account with `$3`) has none due until then, a disabled one
 * none at all. Events without their deliveries yet are due when they committed.
 */
const NEXT_DUE = `WITH ${inFlight('$1')} SELECT least(
    (SELECT min(due.at) FROM webhook_endpoints w LEFT JOIN in_flight f ON f.endpoint_id = w.id
     CROSS JOIN LATERAL (SELECT min(d.next_attempt_at) AS at FROM webhook_deliveries d
       WHERE d.endpoint_id = w.id AND d.state = 'pending' AND coalesce(d.lease_until, 0) <= $1) due
     LEFT JOIN account_in_flight a ON a.account_id = w.account_id
     WHERE w.enabled AND coalesce(f.count, 0) < $2 AND coalesce(a.count, 0) < $3),
    (SELECT min(f.until) FROM in_flight f JOIN webhook_endpoints w ON w.id = f.endpoint_id WHERE w.enabled),
    (SELECT min(created_at) FROM webhook_events WHERE NOT fanned_out)) AS at`;

/** An endpoint's failing time after a batch: endpointHealth's, or what it was if the batch had no success. */
const FAILING_SINCE = 'CASE WHEN h.reset THEN h.failing_since ELSE coalesce(w.failing_since, h.failing_since) END';

/**
 * The queue of messages, shared by every instance: a claim takes due rows with FOR UPDATE SKIP
 * LOCKED and leases them, so two instances never take the same attempt, and a dead instance's
 * claims come due again when their lease ends.
 */
export function deliveryQueue(pool: Pool, listen: Listen, outbox: Outbox, now: () => number): DeliveryQueue {
  const listeners = new Set<() => void>();
  // Another instance's events, while anyone listens; if the connection is lost, the worker's timer polls.
  let listening: { stop(): void } | undefined;
  const wakeAll = () => {
    for (const wake of listeners) wake();
  };

  return {
    claim: async (limit, leaseMs, { perEndpoint, perAccount }) => {
      await rows(pool, { name: 'webhooks-fan-out', text: FAN_OUT, values: [FAN_OUT_BATCH] });
      const at = now();
      const claimed = await rows<ClaimRow>(pool, {
        name: 'webhooks-claim',
        text: CLAIM,
        values: [at, at + leaseMs, limit, perEndpoint, perAccount],
      });
      return claimed.map((row) => claimedOf(row, at));
    },
    settle: async (outcomes) =>
      transaction(pool, async (client) => {
        // Every settle locks its endpoints first, in the order of their ids: two settles of the same
        // endpoints wait for each other, never deadlock (an endpoint's removal locks it first too).
        await rows(client, {
          name: 'webhooks-settle-lock',
          text: `SELECT id FROM webhook_endpoints WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE`,
          values: [[...new Set(outcomes.map((o) => o.delivery.endpointId))]],
        });
        const pending = (outcome: AttemptOutcome) => typeof outcome.next === 'number';
        const updated = await rows<{ id: string }>(client, {
          name: 'webhooks-settle',
          text: `UPDATE webhook_deliveries d SET state = s.state, next_attempt_at = s.next_at, lease_until = NULL,
                   settled_at = s.settled_at
                 FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[])
                   AS s (id, attempt, state, next_at, settled_at)
                 WHERE d.id = s.id AND d.attempts = s.attempt AND d.state = 'pending' RETURNING d.id`,
          values: [
            outcomes.map((o) => o.delivery.id),
            outcomes.map((o) => o.delivery.attempt),
            outcomes.map((o) => (pending(o) ? 'pending' : o.next)),
            outcomes.map((o) => (pending(o) ? o.next : o.attemptedAt)),
            outcomes.map((o) => (pending(o) ? null : o.attemptedAt)),
          ],
        });
        const ids = new Set(updated.map((row) => Number(row.id)));
        const settled = outcomes.filter((outcome) => ids.has(outcome.delivery.id));
        if (settled.length === 0) return;
        await rows(client, {
          name: 'webhooks-record-attempts',
          text: `INSERT INTO webhook_attempts (endpoint_id, event_id, event_type, attempt, attempted_at,
                   response_status, error, duration_ms, next_attempt_at)
                 SELECT endpoint_id, event_id, event_type, attempt, attempted_at, response_status, error,
                   duration_ms, next_attempt_at
                 FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::integer[], $5::bigint[],
                   $6::integer[], $7::text[], $8::integer[], $9::bigint[]) WITH ORDINALITY
                   AS a (endpoint_id, event_id, event_type, attempt, attempted_at, response_status, error,
                     duration_ms, next_attempt_at, n)
                 ORDER BY n`,
          values: [
            settled.map((o) => o.delivery.endpointId),
            settled.map((o) => o.delivery.eventId),
            settled.map((o) => o.delivery.eventType),
            settled.map((o) => o.delivery.attempt),
            settled.map((o) => o.attemptedAt),
            settled.map((o) => o.responseStatus ?? null),
            settled.map((o) => o.error ?? null),
            settled.map((o) => o.durationMs),
            settled.map((o) => (pending(o) ? o.next : null)),
          ],
        });
        // What the batch leaves of each endpoint's health (endpointHealth), in one statement; only
        // an endpoint whose health changes is written, not its row again on every delivery.
        const health = endpointHealth(settled);
        await rows(client, {
          name: 'webhooks-endpoint-health',
          text: `UPDATE webhook_endpoints w SET failing_since = ${FAILING_SINCE},
                   enabled = w.enabled AND h.disable IS NULL,
                   disabled_reason = coalesce(h.disable, w.disabled_reason),
                   updated_at = coalesce(h.disabled_at, w.updated_at)
                 FROM unnest($1::bigint[], $2::boolean[], $3::bigint[], $4::text[], $5::bigint[])
                   AS h (id, reset, failing_since, disable, disabled_at)
                 WHERE w.id = h.id AND (h.disable IS NOT NULL OR w.failing_since IS DISTINCT FROM ${FAILING_SINCE})`,
          values: [
            health.map((h) => h.endpointId),
            health.map((h) => h.reset),
            health.map((h) => h.failingSince),
            health.map((h) => h.disable),
            health.map((h) => h.disabledAt),
          ],
        });
      }),
    saturated: async () => waitingForClient(pool) > 0,
    release: async (ids) => {
      await rows(pool, {
        text: `UPDATE webhook_deliveries SET lease_until = NULL, attempts = attempts - 1
               WHERE id = ANY($1::bigint[]) AND state = 'pending'`,
        values: [ids],
      });
    },
    nextDueAt: async ({ perEndpoint, perAccount }) =>
      (
        await firstRow<{ at: number | null }>(pool, {
          name: 'webhooks-next-due',
          text: NEXT_DUE,
          values: [now(), perEndpoint, perAccount],
        })
      )?.at ?? undefined,
    backlog: async () => {
      const row = await firstRow<{ pending: number; oldest: number | null }>(pool, {
        text: `SELECT sum(pending)::integer AS pending, min(oldest) AS oldest FROM (
                 SELECT count(*) AS pending, min(e.created_at) AS oldest FROM webhook_deliveries d
                 JOIN webhook_events e ON e.id = d.event_id WHERE d.state = 'pending'
                 UNION ALL
                 SELECT coalesce(sum(cardinality(endpoints)), 0), min(created_at) FROM webhook_events
                 WHERE NOT fanned_out) AS waiting`,
      });
      return { pending: row?.pending ?? 0, oldestCommittedAt: row?.oldest ?? undefined };
    },
    prune: async (before) =>
      transaction(pool, async (client) => {
        const removed = await rows(client, {
          text: `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND settled_at < $1 RETURNING id`,
          values: [before],
        });
        await rows(client, {
          text: `DELETE FROM webhook_events e WHERE created_at < $1 AND fanned_out
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`,
          values: [before],
        });
        await rows(client, { text: 'DELETE FROM webhook_attempts WHERE attempted_at < $1', values: [before] });
        return removed.length;
      }),
    // This instance's events wake its worker as they commit; the other instances' through LISTEN.
    onCommit: (wake) => {
      const unlistenLocal = outbox.onCommit(wake);
      listeners.add(wake);
      listening ??= listen('petstore-webhooks', CHANNEL, { notified: wakeAll });
      return () => {
        unlistenLocal();
        listeners.delete(wake);
        if (listeners.size === 0) {
          listening?.stop();
          listening = undefined;
        }
      };
    },
  };
}
