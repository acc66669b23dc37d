import type Database from 'better-sqlite3';
import { type EventData, type EventType, outboxEvent } from '../../../domain/events.js';
import { TableCache } from '../table-cache.js';

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
    // No RETURNING: its id read back as lastInsertRowid costs SQLite much less (BENCHMARKS.md).
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
