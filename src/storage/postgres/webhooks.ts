import type { Pool, PoolClient } from 'pg';
import { type EventData, type EventType, isoTimestamp, outboxEvent } from '../../domain/events.js';
import type { AttemptOutcome, DeliveryQueue, WebhookRepository } from '../types.js';
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
import { firstRow, onlyRow, rows, transaction, waitingForClient } from './queries.js';
import type { Listen } from './listen.js';
import { afterCommit } from './transaction.js';

/** The channel committed events are announced on, to the workers of every instance. */
const CHANNEL = 'petstore_webhook_events';

/**
 * How often, at most, an instance announces its events to the others. A NOTIFY costs the server
 * about as much as the event's rows (its queue is taken under a lock every notifying transaction
 * holds at commit), and another instance needs only to know that there is work; the instance that
 * wrote an event wakes its own worker once the transaction commits.
 */
const NOTIFY_EVERY_MS = 100;

/**
 * The event, with the endpoints subscribed to it (or `$4` alone), and, when `$5`, a NOTIFY, in one
 * statement of the change's transaction: PostgreSQL sends the notification only if the transaction
 * commits. The worker makes the deliveries (FAN_OUT).
 */
const EMIT = `WITH subscribers AS (
    SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids FROM webhook_endpoints
    WHERE enabled AND (CASE WHEN $4::bigint IS NULL THEN events @> jsonb_build_array($1::text) ELSE id = $4 END)
  ), event AS (
    INSERT INTO webhook_events (type, body, created_at, endpoints, trace_parent)
    SELECT $1, $2, $3, ids, $6 FROM subscribers WHERE cardinality(ids) > 0 RETURNING id
  )
  SELECT id, CASE WHEN $5::boolean THEN pg_notify('${CHANNEL}', '') END FROM event`;

/**
 * `insert` (an `INSERT ... RETURNING id, ...` with parameters `$1` to `$<taken>`) and the event of the
 * row it makes, with its subscribers and NOTIFY as EMIT has them, as one statement: PostgreSQL commits
 * a statement whole, so the row and its event need no transaction around them and a create is one
 * round trip instead of four. The event's body is made by PostgreSQL, `data` being the row's
 * `fields`: `row_to_json` writes JSON as `JSON.stringify` does (compact, the same escapes), so the
 * body is outboxEvent's, byte for byte (webhooks.test checks it).
 */
export function insertEmitting(insert: string, taken: number, fields: readonly string[]): string {
  const $ = (n: number) => `$${taken + n}`;
  const data = fields.map((field) => `made."${field}"`).join(', ');
  return `WITH made AS (${insert}), subscribers AS (
      SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids FROM webhook_endpoints
      WHERE enabled AND events @> jsonb_build_array(${$(1)}::text)
    ), event AS (
      INSERT INTO webhook_events (type, body, created_at, endpoints, trace_parent)
      SELECT ${$(1)}, (SELECT row_to_json(body)::text FROM (SELECT ${$(1)}::text AS type, ${$(2)}::text AS "timestamp",
          (SELECT row_to_json(data) FROM (SELECT ${data}) AS data) AS data) AS body),
        ${$(3)}, ids, ${$(4)} FROM made, subscribers
      WHERE cardinality(ids) > 0
      RETURNING id, CASE WHEN ${$(5)}::boolean THEN pg_notify('${CHANNEL}', '') END
    )
    SELECT made.*, event.id AS "eventId" FROM made LEFT JOIN event ON true`;
}

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

/** The outbox, written by the statement above inside the transaction of each change. */
export class Outbox {
  private readonly listeners = new Set<() => void>();
  private notifiedAt = -Infinity;
  private readonly wakeListeners = () => {
    for (const listener of this.listeners) listener();
  };

  constructor(
    private readonly now: () => number,
    private readonly traceParent?: () => string | undefined,
  ) {}

  /** Records an event; `onlyEndpoint` sends it to that endpoint alone (webhook.test). Returns its id. */
  async emit<K extends EventType>(
    client: PoolClient,
    type: K,
    data: EventData<K>,
    onlyEndpoint?: number,
  ): Promise<number | undefined> {
    const event = outboxEvent(type, data, this.now());
    const at = performance.now();
    const notify = at - this.notifiedAt >= NOTIFY_EVERY_MS;
    const row = await firstRow<{ id: number }>(client, {
      name: 'webhooks-emit',
      text: EMIT,
      values: [event.type, event.body, event.at, onlyEndpoint ?? null, notify, this.traceParent?.() ?? null],
    });
    if (row === undefined) return undefined;
    if (notify) this.notifiedAt = at;
    afterCommit(client, this.wakeListeners);
    return row.id;
  }

  /**
   * Runs a statement of insertEmitting's on `pool`: the row it makes, and its event of kind `type`
   * when an endpoint subscribes to it.
   */
  async insertEmitting<R extends { id: number }>(
    pool: Pool,
    insert: { name: string; text: string; values: unknown[] },
    type: EventType,
  ): Promise<R & { eventId: number | null }> {
    const createdAt = this.now();
    const at = performance.now();
    const notify = at - this.notifiedAt >= NOTIFY_EVERY_MS;
    const made = await onlyRow<R & { eventId: number | null }>(pool, {
      ...insert,
      values: [...insert.values, type, isoTimestamp(createdAt), createdAt, this.traceParent?.() ?? null, notify],
    });
    if (made.eventId !== null) {
      if (notify) this.notifiedAt = at;
      this.wakeListeners();
    }
    return made;
  }

  /** `listener` is called when a transaction of this instance that wrote an event commits. */
  onCommit(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export function webhookRepository(pool: Pool, outbox: Outbox, now: () => number): WebhookRepository {
  const owned = 'account_id = $1 AND id = $2';
  const get = (db: Pool | PoolClient, accountId: number, id: number) =>
    firstRow<EndpointRow>(db, {
      text: `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE ${owned}`,
      values: [accountId, id],
    });
  const found = (row: EndpointRow | undefined) => (row === undefined ? undefined : endpointOf(row));

  return {
    list: async (accountId) =>
      (
        await rows<EndpointRow>(pool, {
          text: `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = $1 ORDER BY id`,
          values: [accountId],
        })
      ).map(endpointOf),
    get: async (accountId, id) => found(await get(pool, accountId, id)),
    create: async (accountId, { url, events }, secret, maxEndpoints) =>
      transaction(pool, async (client) => {
        // The account's row, locked, orders the creates of one account: each counts what the one
        // before it committed (read committed: the count is a statement after the lock).
        await rows(client, { text: 'SELECT id FROM accounts WHERE id = $1 FOR UPDATE', values: [accountId] });
        const has = await onlyRow<{ count: number }>(client, {
          text: 'SELECT count(*)::integer AS count FROM webhook_endpoints WHERE account_id = $1',
          values: [accountId],
        });
        if (has.count >= maxEndpoints) return 'limit_reached' as const;
        return endpointOf(
          await onlyRow<EndpointRow>(client, {
            text: `INSERT INTO webhook_endpoints (account_id, url, events, secret, created_at, updated_at)
                   VALUES ($1, $2, $3, $4, $5, $5) RETURNING ${ENDPOINT_COLUMNS}`,
            values: [accountId, url, JSON.stringify(events), secret, now()],
          }),
        );
      }),
    update: async (accountId, id, patch) =>
      found(
        await firstRow<EndpointRow>(pool, {
          // Enabling clears why it was disabled and the failures that led there.
          text: `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4::jsonb, events),
                   enabled = coalesce($5, enabled),
                   disabled_reason = CASE WHEN $5::boolean IS NULL THEN disabled_reason END,
                   failing_since = CASE WHEN $5::boolean THEN NULL ELSE failing_since END,
                   updated_at = $6
                 WHERE ${owned} RETURNING ${ENDPOINT_COLUMNS}`,
          values: [
            accountId,
            id,
            patch.url ?? null,
            patch.events === undefined ? null : JSON.stringify(patch.events),
            patch.enabled ?? null,
            now(),
          ],
        }),
      ),
    remove: async (accountId, id) =>
      (await rows(pool, { text: `DELETE FROM webhook_endpoints WHERE ${owned} RETURNING id`, values: [accountId, id] }))
        .length > 0,
    rotateSecret: async (accountId, id, { secret, previousExpiresAt }) =>
      found(
        await firstRow<EndpointRow>(pool, {
          text: `UPDATE webhook_endpoints SET previous_secret = secret, secret = $3,
                   previous_secret_expires_at = $4, secret_rotated_at = $5, updated_at = $5
                 WHERE ${owned} RETURNING ${ENDPOINT_COLUMNS}`,
          values: [accountId, id, secret, previousExpiresAt, now()],
        }),
      ),
    sendTest: async (accountId, id) =>
      transaction(pool, async (client) => {
        const endpoint = await get(client, accountId, id);
        if (endpoint === undefined) return undefined;
        if (!endpoint.enabled) return 'disabled' as const;
        const eventId = await outbox.emit(client, 'webhook.test', { webhookId: id }, id);
        if (eventId === undefined) throw new Error(`webhook endpoint ${id} did not take its test event`);
        return { eventId };
      }),
    attempts: async (accountId, id, limit) => {
      if ((await get(pool, accountId, id)) === undefined) return undefined;
      const found = await rows<AttemptRow>(pool, {
        text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE endpoint_id = $1 ORDER BY id DESC LIMIT $2`,
        values: [id, limit],
      });
      return found.map(attemptOf);
    },
  };
}

/**
 * What a batch of settled attempts, in order, leaves of each endpoint's health, as if applied one
 * by one: `reset` when one succeeded (failing since the first failure after the last success, or
 * not at all), otherwise failing since the earlier of what it was and the first failure; disabled
 * with the last reason given.
 */
function endpointHealth(settled: readonly AttemptOutcome[]) {
  const byEndpoint = new Map<
    number,
    {
      endpointId: number;
      reset: boolean;
      failingSince: number | null;
      disable: string | null;
      disabledAt: number | null;
    }
  >();
  for (const outcome of settled) {
    const { endpointId } = outcome.delivery;
    const health = byEndpoint.get(endpointId) ?? {
      endpointId,
      reset: false,
      failingSince: null,
      disable: null,
      disabledAt: null,
    };
    if (outcome.next === 'delivered') Object.assign(health, { reset: true, failingSince: null });
    else health.failingSince ??= outcome.attemptedAt;
    if (outcome.disable !== undefined)
      Object.assign(health, { disable: outcome.disable, disabledAt: outcome.attemptedAt });
    byEndpoint.set(endpointId, health);
  }
  return [...byEndpoint.values()].sort((a, b) => a.endpointId - b.endpointId);
}

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
        for (const health of endpointHealth(settled)) {
          await rows(client, {
            name: 'webhooks-endpoint-health',
            text: `UPDATE webhook_endpoints SET
                     failing_since = CASE WHEN $2 THEN $3 ELSE coalesce(failing_since, $3) END,
                     enabled = enabled AND $4::text IS NULL,
                     disabled_reason = coalesce($4, disabled_reason),
                     updated_at = coalesce($5, updated_at)
                   WHERE id = $1`,
            values: [health.endpointId, health.reset, health.failingSince, health.disable, health.disabledAt],
          });
        }
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
