import type Database from 'better-sqlite3';
import type { ApiVersionName } from '../../../domain/events.js';
import type { WebhookFields, WebhookRepository } from '../../types.js';
import {
  ATTEMPT_COLUMNS,
  type AttemptRow,
  attemptOf,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  endpointOf,
  UNNAMED_API_VERSION,
} from '../../webhook-rows.js';
import { atomic } from '../group-commit.js';
import { BOUND_LIMIT } from '../statements.js';
import type { Synchronous } from '../synchronous.js';
import type { Outbox } from './outbox.js';

interface EndpointUpdate {
  url: string | null;
  events: string | null;
  enabled: number | null;
  apiVersion: ApiVersionName | null;
  at: number;
  accountId: number;
  id: number;
}

/** The webhook endpoints behind the API, each account's own; a test event goes through the outbox. */
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
  const insert = db.prepare<[number, string, string, ApiVersionName, string, number, number], EndpointRow>(
    `INSERT INTO webhook_endpoints (account_id, url, events, api_version, secret, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${ENDPOINT_COLUMNS}`,
  );
  // Counted and written under the write lock (an immediate transaction): no other writer between.
  const create = atomic(
    db,
    (accountId: number, fields: Required<WebhookFields>, secret: string, maxEndpoints: number) => {
      if ((count.get(accountId) as number) >= maxEndpoints) return 'limit_reached' as const;
      const { url, events, apiVersion } = fields;
      return endpointOf(
        insert.get(accountId, url, JSON.stringify(events), apiVersion, secret, now(), now()) as EndpointRow,
      );
    },
  );
  // Enabling clears why it was disabled and the failures that led there.
  const update = db.prepare<[EndpointUpdate], EndpointRow>(
    `UPDATE webhook_endpoints SET url = coalesce(@url, url), events = coalesce(@events, events),
       enabled = coalesce(@enabled, enabled), api_version = coalesce(@apiVersion, api_version),
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
    create: (accountId, { url, events, apiVersion = UNNAMED_API_VERSION }, secret, maxEndpoints) =>
      create(accountId, { url, events, apiVersion }, secret, maxEndpoints),
    update: (accountId, id, patch) => {
      const enabled = patch.enabled === undefined ? null : Number(patch.enabled);
      const events = patch.events === undefined ? null : JSON.stringify(patch.events);
      const apiVersion = patch.apiVersion ?? null;
      return found(update.get({ url: patch.url ?? null, events, enabled, apiVersion, at: now(), accountId, id }));
    },
    remove: (accountId, id) => remove.run(accountId, id).changes > 0,
    rotateSecret: (accountId, id, { secret, previousExpiresAt }) =>
      found(rotate.get({ secret, expiresAt: previousExpiresAt, at: now(), accountId, id })),
    sendTest: (accountId, id) => sendTest(accountId, id),
    attempts: (accountId, id, limit) =>
      get.get(accountId, id) === undefined ? undefined : attempts.all(id, limit).map(attemptOf),
  };
}
