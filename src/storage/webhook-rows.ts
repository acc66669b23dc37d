import {
  type ApiVersionName,
  eventIdOf,
  type EventType,
  isHttpStatus,
  notAStatus,
  type WebhookDelivery,
  type WebhookEndpoint,
} from '../domain/events.js';
import type { ClaimedDelivery } from './types.js';

/** A webhook endpoint's row, as both backends select it (times in Unix milliseconds). */
export interface EndpointRow {
  id: number;
  url: string;
  /** JSON text on SQLite, parsed jsonb on PostgreSQL. */
  events: string | EventType[];
  enabled: boolean | number;
  apiVersion: ApiVersionName;
  disabledReason: string | null;
  createdAt: number;
  updatedAt: number;
  secretRotatedAt: number | null;
  previousSecretExpiresAt: number | null;
}

export const ENDPOINT_COLUMNS = `id, url, events, enabled, api_version AS "apiVersion", disabled_reason AS "disabledReason",
  created_at AS "createdAt", updated_at AS "updatedAt", secret_rotated_at AS "secretRotatedAt",
  previous_secret_expires_at AS "previousSecretExpiresAt"`;

/**
 * The version of an endpoint whose create names none, as the column's default (migration 014)
 * makes it: endpoints were all made through v1 before they named one.
 */
export const UNNAMED_API_VERSION: ApiVersionName = 'v1';

const iso = (at: number) => new Date(at).toISOString();

export function endpointOf(row: EndpointRow): WebhookEndpoint {
  const endpoint: WebhookEndpoint = {
    id: row.id,
    url: row.url,
    events: typeof row.events === 'string' ? (JSON.parse(row.events) as EventType[]) : row.events,
    enabled: Boolean(row.enabled),
    apiVersion: row.apiVersion,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
  };
  if (row.disabledReason !== null) endpoint.disabledReason = row.disabledReason;
  if (row.secretRotatedAt !== null) endpoint.secretRotatedAt = iso(row.secretRotatedAt);
  if (row.previousSecretExpiresAt !== null) endpoint.previousSecretExpiresAt = iso(row.previousSecretExpiresAt);
  return endpoint;
}

export interface AttemptRow {
  eventId: number;
  eventType: EventType;
  attempt: number;
  attemptedAt: number;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
  nextAttemptAt: number | null;
}

export const ATTEMPT_COLUMNS = `event_id AS "eventId", event_type AS "eventType", attempt,
  attempted_at AS "attemptedAt", response_status AS "responseStatus", error, duration_ms AS "durationMs",
  next_attempt_at AS "nextAttemptAt"`;

export function attemptOf(row: AttemptRow): WebhookDelivery {
  const attempt: WebhookDelivery = {
    eventId: eventIdOf(row.eventId),
    eventType: row.eventType,
    attempt: row.attempt,
    attemptedAt: iso(row.attemptedAt),
    durationMs: row.durationMs,
  };
  // Rows recorded before statuses and retries were bounded (the sender's) are read as the contract
  // allows: a status outside HTTP's range is an error, a next attempt past any date none.
  const status = row.responseStatus ?? undefined;
  if (isHttpStatus(status)) attempt.responseStatus = status;
  const error = status === undefined || isHttpStatus(status) ? row.error : notAStatus(status);
  if (error !== null) attempt.error = error;
  if (row.nextAttemptAt !== null && Number.isFinite(new Date(row.nextAttemptAt).getTime())) {
    attempt.nextAttemptAt = iso(row.nextAttemptAt);
  }
  return attempt;
}

/**
 * A claimed message's row, as both backends return it: the delivery's fields, but the secrets as
 * stored (the previous one until its grace ends) and null where the delivery has undefined.
 */
export type ClaimRow = Omit<ClaimedDelivery, 'secrets' | 'failingSince' | 'traceParent'> & {
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: number | null;
  failingSince: number | null;
  traceParent: string | null;
};

/**
 * How many events a claim makes into deliveries, at most: enough to stay ahead of the worker (a
 * claim takes at most its concurrency), few enough that the transaction holds the event loop (on
 * SQLite) or a connection for a millisecond or two while requests are being served.
 */
export const FAN_OUT_BATCH = 500;

export const CLAIM_COLUMNS = `d.id, d.attempts AS attempt, e.id AS "eventId", e.type AS "eventType", e.body,
  e.created_at AS "committedAt", e.trace_parent AS "traceParent", w.id AS "endpointId", w.url, w.api_version AS "apiVersion", w.secret, w.previous_secret AS "previousSecret",
  w.previous_secret_expires_at AS "previousSecretExpiresAt", w.failing_since AS "failingSince"`;

export function claimedOf(row: ClaimRow, now: number): ClaimedDelivery {
  const { secret, previousSecret, previousSecretExpiresAt, failingSince, traceParent, ...delivery } = row;
  const graceLasts = previousSecret !== null && Number(previousSecretExpiresAt) > now;
  return {
    ...delivery,
    secrets: graceLasts ? [secret, previousSecret] : [secret],
    failingSince: failingSince ?? undefined,
    traceParent: traceParent ?? undefined,
  };
}

/**
 * The messages in flight (leased, by any instance) of each endpoint, with its account and when its
 * first lease ends, and of each account: common table expressions of the claim, with the time as
 * `@at` (SQLite) or `$1` (PostgreSQL).
 */
export function inFlight(at: string): string {
  return `in_flight AS (
    SELECT d.endpoint_id, w.account_id, count(*) AS count, min(d.lease_until) AS until
    FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
    WHERE d.state = 'pending' AND d.lease_until > ${at} GROUP BY d.endpoint_id, w.account_id
  ), account_in_flight AS (
    SELECT account_id, sum(count) AS count FROM in_flight GROUP BY account_id)`;
}
