import type Database from 'better-sqlite3';
import { type EndpointHealth, endpointHealth } from '../../../domain/endpoint-health.js';
import type { AttemptOutcome, DeliveryQueue, InFlightCaps } from '../../types.js';
import { CLAIM_COLUMNS, type ClaimRow, claimedOf, FAN_OUT_BATCH, inFlight } from '../../webhook-rows.js';
import { BOUND_LIMIT } from '../statements.js';
import type { Synchronous } from '../synchronous.js';
import type { Outbox } from './outbox.js';

/**
 * The first `perEndpoint` due messages of each enabled endpoint with room, numbered in its own order
 * (`nth`), with its account and how many it has in flight: what a fair claim chooses from.
 */
const FIRST_DUE = `first_due AS (
    SELECT d.id, d.next_attempt_at, w.account_id, coalesce(f.count, 0) AS in_flight,
      row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS nth
    FROM webhook_endpoints w LEFT JOIN in_flight f ON f.endpoint_id = w.id
    JOIN webhook_deliveries d ON d.id IN (
      SELECT x.id FROM webhook_deliveries x WHERE x.endpoint_id = w.id AND x.state = 'pending'
        AND x.next_attempt_at <= @at AND coalesce(x.lease_until, 0) <= @at
      ORDER BY x.next_attempt_at, x.id LIMIT @perEndpoint)
    WHERE w.enabled = 1 AND coalesce(f.count, 0) < @perEndpoint)`;

const IN_FLIGHT = inFlight('@at');

/** An endpoint's health as endpointHealth leaves it, with SQLite's boolean. */
type HealthRow = Omit<EndpointHealth, 'reset'> & { reset: number };

/** An endpoint's failing time after a batch: endpointHealth's, or what it was if the batch had no success. */
const FAILING_SINCE = 'CASE WHEN @reset THEN @failingSince ELSE coalesce(failing_since, @failingSince) END';

/**
 * The queue of messages to deliver: the outbox's events made into deliveries (one per endpoint),
 * claimed fairly and leased, their attempts recorded with their endpoint's health.
 */
export function deliveryQueue(db: Database.Database, outbox: Outbox, now: () => number): Synchronous<DeliveryQueue> {
  const mark = db.prepare<[], number>('SELECT last_event_id FROM webhook_fan_out').pluck();
  const batchEnd = db
    .prepare<[number, number], number | null>(
      `SELECT max(id) FROM (SELECT id FROM webhook_events WHERE id > ? ORDER BY id ${BOUND_LIMIT})`,
    )
    .pluck();
  // An endpoint removed since the event committed has no delivery made for it.
  const fanOut = db.prepare<[number, number]>(
    `INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
     SELECT e.id, w.id, e.created_at FROM webhook_events e, json_each(e.endpoints) j
     JOIN webhook_endpoints w ON w.id = j.value WHERE e.id > ? AND e.id <= ? ORDER BY e.id, j.key`,
  );
  const advance = db.prepare<[number]>('UPDATE webhook_fan_out SET last_event_id = ?');
  const fanOutBatch = () => {
    const from = mark.get() as number;
    const to = batchEnd.get(from, FAN_OUT_BATCH);
    if (to === null || to === undefined) return;
    fanOut.run(from, to);
    advance.run(to);
  };
  const due = db.prepare<[InFlightCaps & { at: number; limit: number }], { id: number }>(
    `WITH ${IN_FLIGHT}, ${FIRST_DUE}, turns AS (
       SELECT id, next_attempt_at, account_id,
         row_number() OVER (PARTITION BY account_id ORDER BY nth, next_attempt_at, id) AS turn
       FROM first_due WHERE nth + in_flight <= @perEndpoint)
     SELECT id FROM turns t LEFT JOIN account_in_flight a ON a.account_id = t.account_id
     WHERE turn + coalesce(a.count, 0) <= @perAccount
     ORDER BY turn, next_attempt_at, id LIMIT @limit`,
  );
  const ids = 'IN (SELECT value FROM json_each(?))';
  const lease = db.prepare<[number, string]>(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, lease_until = ? WHERE id ${ids}`,
  );
  const claimed = db.prepare<[string], ClaimRow>(
    `SELECT ${CLAIM_COLUMNS} FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
     JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.id ${ids}`,
  );
  const claim = db.transaction((at: number, leaseMs: number, limit: number, caps: InFlightCaps) => {
    fanOutBatch();
    const chosen = JSON.stringify(due.all({ ...caps, at, limit }).map((row) => row.id));
    lease.run(at + leaseMs, chosen);
    return claimed.all(chosen);
  });
  const settle = db.prepare<[string, number, number | null, number, number]>(
    `UPDATE webhook_deliveries SET state = ?, next_attempt_at = ?, lease_until = NULL, settled_at = ?
     WHERE id = ? AND attempts = ? AND state = 'pending'`,
  );
  const record = db.prepare<
    [number, number, string, number, number, number | null, string | null, number, number | null]
  >(
    `INSERT INTO webhook_attempts (endpoint_id, event_id, event_type, attempt, attempted_at, response_status,
       error, duration_ms, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  // What a batch leaves of an endpoint's health (endpointHealth); only an endpoint whose health
  // changes is written, not its row again on every delivery.
  const health = db.prepare<[HealthRow]>(
    `UPDATE webhook_endpoints SET failing_since = ${FAILING_SINCE},
       enabled = CASE WHEN @disable IS NULL THEN enabled ELSE 0 END,
       disabled_reason = coalesce(@disable, disabled_reason), updated_at = coalesce(@disabledAt, updated_at)
     WHERE id = @endpointId AND (@disable IS NOT NULL OR failing_since IS NOT ${FAILING_SINCE})`,
  );
  const release = db.prepare<[number]>(
    "UPDATE webhook_deliveries SET lease_until = NULL, attempts = attempts - 1 WHERE id = ? AND state = 'pending'",
  );
  // A message in flight is due when its lease ends; an endpoint (or account) with its most in flight
  // has none due until then, and a disabled endpoint has none due at all: counting any of them as due now would
  // have the worker claim in a loop until they settle. Events not yet made into deliveries are due
  // when they committed.
  const nextDue = db.prepare<[InFlightCaps & { at: number }], { at: number | null }>(
    `WITH ${IN_FLIGHT} SELECT min(at) AS at FROM (
       SELECT (SELECT min(d.next_attempt_at) FROM webhook_deliveries d WHERE d.endpoint_id = w.id
                 AND d.state = 'pending' AND coalesce(d.lease_until, 0) <= @at) AS at
       FROM webhook_endpoints w LEFT JOIN in_flight f ON f.endpoint_id = w.id
       LEFT JOIN account_in_flight a ON a.account_id = w.account_id
       WHERE w.enabled = 1 AND coalesce(f.count, 0) < @perEndpoint AND coalesce(a.count, 0) < @perAccount
       UNION ALL
       SELECT min(f.until) FROM in_flight f JOIN webhook_endpoints w ON w.id = f.endpoint_id WHERE w.enabled = 1
       UNION ALL
       SELECT min(created_at) FROM webhook_events WHERE id > (SELECT last_event_id FROM webhook_fan_out))`,
  );
  const backlog = db.prepare<[], { pending: number; oldest: number | null }>(
    `SELECT sum(pending) AS pending, min(oldest) AS oldest FROM (
       SELECT count(*) AS pending, min(e.created_at) AS oldest FROM webhook_deliveries d
       JOIN webhook_events e ON e.id = d.event_id WHERE d.state = 'pending'
       UNION ALL
       SELECT coalesce(sum(json_array_length(endpoints)), 0), min(created_at) FROM webhook_events
       WHERE id > (SELECT last_event_id FROM webhook_fan_out))`,
  );
  const pruneDeliveries = db.prepare<[number]>(
    "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND settled_at < ?",
  );
  const pruneEvents = db.prepare<[number]>(
    `DELETE FROM webhook_events WHERE created_at < ? AND id <= (SELECT last_event_id FROM webhook_fan_out)
       AND id NOT IN (SELECT event_id FROM webhook_deliveries)`,
  );
  const pruneAttempts = db.prepare<[number]>('DELETE FROM webhook_attempts WHERE attempted_at < ?');

  /** Records an attempt unless its lease was lost meanwhile; whether it did. */
  const settleOne = (outcome: AttemptOutcome) => {
    const { delivery, next } = outcome;
    const state = typeof next === 'number' ? 'pending' : next;
    const nextAt = typeof next === 'number' ? next : outcome.attemptedAt;
    const settledAt = typeof next === 'number' ? null : outcome.attemptedAt;
    if (settle.run(state, nextAt, settledAt, delivery.id, delivery.attempt).changes === 0) return false;
    record.run(
      delivery.endpointId,
      delivery.eventId,
      delivery.eventType,
      delivery.attempt,
      outcome.attemptedAt,
      outcome.responseStatus ?? null,
      outcome.error ?? null,
      outcome.durationMs,
      typeof next === 'number' ? next : null,
    );
    return true;
  };
  const settleAll = db.transaction((outcomes: readonly AttemptOutcome[]) => {
    const settled = outcomes.filter(settleOne);
    for (const endpoint of endpointHealth(settled)) health.run({ ...endpoint, reset: Number(endpoint.reset) });
  });
  const releaseAll = db.transaction((ids: readonly number[]) => {
    for (const id of ids) release.run(id);
  });
  const pruneAll = db.transaction((before: number) => {
    const removed = pruneDeliveries.run(before).changes;
    pruneEvents.run(before);
    pruneAttempts.run(before);
    return removed;
  });

  return {
    claim: (limit, leaseMs, caps) => {
      const at = now();
      return claim.immediate(at, leaseMs, limit, caps).map((row) => claimedOf(row, at));
    },
    settle: (outcomes) => settleAll.immediate(outcomes),
    saturated: () => false,
    release: (ids) => releaseAll.immediate(ids),
    nextDueAt: (caps) => nextDue.get({ ...caps, at: now() })?.at ?? undefined,
    backlog: () => {
      const row = backlog.get();
      return { pending: row?.pending ?? 0, oldestCommittedAt: row?.oldest ?? undefined };
    },
    prune: (before) => pruneAll.immediate(before),
    onCommit: (listener) => outbox.onCommit(listener),
  };
}
