import type { Pool, PoolClient } from 'pg';
import { type EventData, type EventType, isoTimestamp, outboxEvent } from '../../../domain/events.js';
import { firstRow, onlyRow } from '../queries.js';
import { afterCommit } from '../transaction.js';

/** The channel committed events are announced on, to the workers of every instance. */
export const CHANNEL = 'petstore_webhook_events';

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
