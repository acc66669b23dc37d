import type { Pool, PoolClient } from 'pg';
import type { WebhookRepository } from '../../types.js';
import {
  ATTEMPT_COLUMNS,
  type AttemptRow,
  attemptOf,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  endpointOf,
  UNNAMED_API_VERSION,
} from '../../webhook-rows.js';
import { firstRow, onlyRow, rows, transaction } from '../queries.js';
import type { Outbox } from './outbox.js';

/** The webhook endpoints behind the API, each account's own; a test event goes through the outbox. */
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
    create: async (accountId, { url, events, apiVersion = UNNAMED_API_VERSION }, secret, maxEndpoints) =>
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
            text: `INSERT INTO webhook_endpoints (account_id, url, events, api_version, secret, created_at, updated_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING ${ENDPOINT_COLUMNS}`,
            values: [accountId, url, JSON.stringify(events), apiVersion, secret, now()],
          }),
        );
      }),
    update: async (accountId, id, patch) =>
      found(
        await firstRow<EndpointRow>(pool, {
          // Enabling clears why it was disabled and the failures that led there.
          text: `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4::jsonb, events),
                   enabled = coalesce($5, enabled), api_version = coalesce($7, api_version),
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
            patch.apiVersion ?? null,
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
