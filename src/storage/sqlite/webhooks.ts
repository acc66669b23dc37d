import { atomic } from './group-commit.js';
import type Database from 'better-sqlite3';
import type { Synchronous } from './synchronous.js';
import { BOUND_LIMIT } from './statements.js';
import { type EventData, type EventType, outboxEvent } from '../../domain/events.js';
import type { AttemptOutcome, DeliveryQueue, InFlightCaps, WebhookRepository } from '../types.js';
import {
  ATTEMPT_COLUMNS,
  type AttemptRow,
  attemptOf,
  CLAIM_COLUMNS,
  type ClaimRow,
  claimedOf,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  endpointOf,
  FAN_OUT_BATCH,
  inFlight,
} from '../webhook-rows.js';
import { TableCache } from './table-cache.js';

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

/**
 * The outbox, written inside the transaction of the change an event describes: the event, with the
 * endpoints subscribed to its kind at that moment. Nothing is written when none is. The delivery
 * queue makes the deliveries later (FAN_OUT_BATCH): one row is all a change adds.
 */
export class Outbox {
  private readonly subscribers;
  private readonly endpoint;
  private readonly insertEvent;
  /** The subscribers of each kind, as a JSON array of ids, while no endpoint's subscription changed. */
  private readonly subscribersOf;
  private readonly listeners = new Set<() => void>();
  private wakePending = false;

  constructor(
    db: Database.Database,
    private readonly now: () => number,
    private readonly traceParent?: () => string | undefined,
  ) {
    const enabled = 'SELECT json_group_array(id) FROM webhook_endpoints WHERE enabled = 1';
    this.subscribers = db
      .prepare<[string], string>(`${enabled} AND ? IN (SELECT value FROM json_each(events))`)
      .pluck();
    this.endpoint = db.prepare<[number], string>(`${enabled} AND id = ?`).pluck();
    // No RETURNING: its id read back as lastInsertRowid costs 10,000 fewer instructions (callgrind).
    this.insertEvent = db.prepare<[string, string, number, string, string | null]>(
      'INSERT INTO webhook_events (type, body, created_at, endpoints, trace_parent) VALUES (?, ?, ?, ?, ?)',
    );
    // No transaction changes endpoints and emits an event, so a rolled-back one cannot leave its
    // subscribers behind in the cache.
    this.subscribersOf = new TableCache<EventType, string>(db, 'webhook_endpoints', [
      'INSERT',
      'UPDATE OF enabled, events',
      'DELETE',
    ]);
  }

  private subscribersFor(type: EventType): string {
    return this.subscribersOf.get(type, () => this.subscribers.get(type) ?? '[]') ?? '[]';
  }

  /** Whether an event of `type` would be recorded now: whether an enabled endpoint subscribes to it. */
  subscribes(type: EventType): boolean {
    return this.subscribersFor(type) !== '[]';
  }

  /** Records an event; `onlyEndpoint` sends it to that endpoint alone (webhook.test). Returns its id. */
  emit<K extends EventType>(type: K, data: EventData<K>, onlyEndpoint?: number): number | undefined {
    const endpoints =
      onlyEndpoint === undefined ? this.subscribersFor(type) : (this.endpoint.get(onlyEndpoint) as string);
    if (endpoints === '[]') return undefined;
    const event = outboxEvent(type, data, this.now());
    const { lastInsertRowid } = this.insertEvent.run(
      event.type,
      event.body,
      event.at,
      endpoints,
      this.traceParent?.() ?? null,
    );
    // Transactions are synchronous here: by the time this runs, the change committed or rolled back.
    if (!this.wakePending) {
      this.wakePending = true;
      setImmediate(() => {
        this.wakePending = false;
        for (const listener of this.listeners) listener();
      });
    }
    return Number(lastInsertRowid);
  }

  onCommit(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

interface EndpointUpdate {
  url: string | null;
  events: string | null;
  enabled: number | null;
  at: number;
  accountId: number;
  id: number;
}

export function webhookRepository(
  db: Database.Database,
  outbox: Outbox,
  now: () => number,
): Synchronous<WebhookRepository> {
  const owned = 'account_id = ? AND id = ?';
  const list = db.prepare<[number], EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = ? ORDER BY id`,
  );
  const get = db.prepare<[number, number], EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE ${owned}`,
  );
  const count = db.prepare<[number], number>('SELECT count(*) FROM webhook_endpoints WHERE account_id = ?').pluck();
  const insert = db.prepare<[number, string, string, string, number, number], EndpointRow>(
    `INSERT INTO webhook_endpoints (account_id, url, events, secret, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?) RETURNING ${ENDPOINT_COLUMNS}`,
  );
  // Counted and written under the write lock (an immediate transaction): no other writer between.
  const create = atomic(db, (accountId: number, url: string, events: string, secret: string, maxEndpoints: number) => {
    if ((count.get(accountId) as number) >= maxEndpoints) return 'limit_reached' as const;
    return endpointOf(insert.get(accountId, url, events, secret, now(), now()) as EndpointRow);
  });
  // Enabling clears why it was disabled and the failures that led there.
  const update = db.prepare<[EndpointUpdate], EndpointRow>(
    `UPDATE webhook_endpoints SET url = coalesce(@url, url), events = coalesce(@events, events),
       enabled = coalesce(@enabled, enabled),
       disabled_reason = CASE WHEN @enabled IS NULL THEN disabled_reason ELSE NULL END,
       failing_since = CASE WHEN @enabled = 1 THEN NULL ELSE failing_since END,
       updated_at = @at
     WHERE account_id = @accountId AND id = @id RETURNING ${ENDPOINT_COLUMNS}`,
  );
  const remove = db.prepare<[number, number]>(`DELETE FROM webhook_endpoints WHERE ${owned}`);
  const rotate = db.prepare<
    [{ secret: string; expiresAt: number; at: number; accountId: number; id: number }],
    EndpointRow
  >(
    `UPDATE webhook_endpoints SET previous_secret = secret, secret = @secret,
       previous_secret_expires_at = @expiresAt, secret_rotated_at = @at, updated_at = @at
     WHERE account_id = @accountId AND id = @id RETURNING ${ENDPOINT_COLUMNS}`,
  );
  const attempts = db.prepare<[number, number], AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE endpoint_id = ? ORDER BY id DESC ${BOUND_LIMIT}`,
  );
  const sendTest = atomic(db, (accountId: number, id: number) => {
    const endpoint = get.get(accountId, id);
    if (endpoint === undefined) return undefined;
    if (!endpoint.enabled) return 'disabled' as const;
    const eventId = outbox.emit('webhook.test', { webhookId: id }, id);
    if (eventId === undefined) throw new Error(`webhook endpoint ${id} did not take its test event`);
    return { eventId };
  });
  const found = (row: EndpointRow | undefined) => (row === undefined ? undefined : endpointOf(row));

  return {
    list: (accountId) => list.all(accountId).map(endpointOf),
    get: (accountId, id) => found(get.get(accountId, id)),
    create: (accountId, { url, events }, secret, maxEndpoints) =>
      create(accountId, url, JSON.stringify(events), secret, maxEndpoints),
    update: (accountId, id, patch) => {
      const enabled = patch.enabled === undefined ? null : Number(patch.enabled);
      const events = patch.events === undefined ? null : JSON.stringify(patch.events);
      return found(update.get({ url: patch.url ?? null, events, enabled, at: now(), accountId, id }));
    },
    remove: (accountId, id) => remove.run(accountId, id).changes > 0,
    rotateSecret: (accountId, id, { secret, previousExpiresAt }) =>
      found(rotate.get({ secret, expiresAt: previousExpiresAt, at: now(), accountId, id })),
    sendTest: (accountId, id) => sendTest(accountId, id),
    attempts: (accountId, id, limit) =>
      get.get(accountId, id) === undefined ? undefined : attempts.all(id, limit).map(attemptOf),
  };
}

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
  // Only an endpoint whose failing changes is written: not its row again on every delivery.
  const succeeded = db.prepare<[number]>(
    'UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL',
  );
  const failed = db.prepare<[number, number]>(
    'UPDATE webhook_endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL',
  );
  const disable = db.prepare<[string, number, number]>(
    'UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?',
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

  const settleOne = (outcome: AttemptOutcome) => {
    const { delivery, next } = outcome;
    const state = typeof next === 'number' ? 'pending' : next;
    const nextAt = typeof next === 'number' ? next : outcome.attemptedAt;
    const settledAt = typeof next === 'number' ? null : outcome.attemptedAt;
    if (settle.run(state, nextAt, settledAt, delivery.id, delivery.attempt).changes === 0) return;
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
    if (next === 'delivered') succeeded.run(delivery.endpointId);
    else failed.run(outcome.attemptedAt, delivery.endpointId);
    if (outcome.disable !== undefined) disable.run(outcome.disable, outcome.attemptedAt, delivery.endpointId);
  };
  const settleAll = db.transaction((outcomes: readonly AttemptOutcome[]) => {
    for (const outcome of outcomes) settleOne(outcome);
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
