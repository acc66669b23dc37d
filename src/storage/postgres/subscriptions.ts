import type { Pool } from 'pg';
import type { EventType } from '../../domain/events.js';
import { onlyRow } from './queries.js';

/** What an instance last learnt of an event kind's subscribers, and at which version of the set (migration 012). */
export interface Subscribed {
  version: number;
  anyone: boolean;
}

const LEARN = `SELECT v.version, EXISTS (
    SELECT 1 FROM webhook_endpoints WHERE enabled AND events @> jsonb_build_array($1::text)
  ) AS anyone FROM webhook_subscriptions_version v`;

/**
 * Whether anyone subscribes to a kind of event, as a hint: a write that relies on "nobody" must
 * check in its own statement that the version it was learnt at is still the current one
 * (`stillAt`), since another instance may have added an endpoint since. PostgreSQL bumps the
 * version in the transaction of every change to who receives what, so a statement that sees the
 * same version sees the same subscribers. A hint found stale is forgotten and learnt again, by
 * one query however many requests wait for it.
 */
export class SubscriptionHints {
  private readonly known = new Map<EventType, Subscribed | Promise<Subscribed>>();

  constructor(private readonly pool: Pool) {}

  async of(type: EventType): Promise<Subscribed> {
    const known = this.known.get(type);
    if (known !== undefined) return known;
    const learning = onlyRow<Subscribed>(this.pool, { name: 'webhooks-subscribed', text: LEARN, values: [type] }).then(
      (learnt) => {
        if (this.known.get(type) === learning) this.known.set(type, learnt);
        return learnt;
      },
      (error: unknown) => {
        if (this.known.get(type) === learning) this.known.delete(type);
        throw error;
      },
    );
    this.known.set(type, learning);
    return learning;
  }

  /** `hint` turned out wrong: the next `of(type)` asks PostgreSQL again (unless another did already). */
  forget(type: EventType, hint: Subscribed): void {
    if (this.known.get(type) === hint) this.known.delete(type);
  }
}

/** The condition, for a statement's WHERE, that the version is still `$<param>`. */
export const stillAt = (param: number) => `(SELECT version FROM webhook_subscriptions_version) = $${param}`;
