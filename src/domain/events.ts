import type { components, webhooks } from '../../generated/openapi.js';

/** Every kind of event the contract declares (its `webhooks`): an undeclared kind does not compile. */
export type EventType = keyof webhooks;

/** The payload the contract declares for an event kind: `{type, timestamp, data}`. */
export type EventPayload<K extends EventType> = webhooks[K]['post']['requestBody']['content']['application/json'];

/** What an event of a kind carries in `data`: the Pet or Order after the change, for instance. */
export type EventData<K extends EventType> = EventPayload<K>['data'];

export type WebhookEndpoint = components['schemas']['WebhookEndpoint'];
export type WebhookDelivery = components['schemas']['WebhookDelivery'];

/** The API version whose event payloads an endpoint receives (`v1`, `v2`). */
export type ApiVersionName = WebhookEndpoint['apiVersion'];

/** An event as the outbox keeps it: its payload serialized once, when the change is written. */
export interface OutboxEvent {
  type: EventType;
  body: string;
  /** When the change was made (Unix milliseconds). */
  at: number;
}

/** The second isoTimestamp last formatted, and its ISO string up to the milliseconds. */
let formattedSecond = NaN;
let secondPrefix = '';

/**
 * `new Date(at).toISOString()`, formatting the date once a second: V8's formatting was a sixth of
 * what writing an event adds to a subscribed create (BENCHMARKS.md).
 */
export function isoTimestamp(at: number): string {
  const second = Math.floor(at / 1000);
  if (second !== formattedSecond) {
    formattedSecond = second;
    // Up to and including the '.': "2026-11-28T05:27:59." (a year past 9999 is longer).
    secondPrefix = new Date(second * 1000).toISOString().slice(0, -4);
  }
  return `${secondPrefix}${String(at - second * 1000).padStart(3, '0')}Z`;
}

/** The one way an event is made: typed by its kind, so `data` must be what the contract says. */
export function outboxEvent<K extends EventType>(type: K, data: EventData<K>, at: number): OutboxEvent {
  return { type, at, body: JSON.stringify({ type, timestamp: isoTimestamp(at), data }) };
}

/** The `webhook-id` of the outbox's event number `id`. */
export function eventIdOf(id: number): string {
  return `evt_${id}`;
}

/**
 * Whether a receiver's status is one a delivery records (the contract's 100-599); `notAStatus` is
 * the attempt's error when it is not.
 */
export const isHttpStatus = (status: number | undefined): status is number =>
  status !== undefined && Number.isInteger(status) && status >= 100 && status <= 599;

export const notAStatus = (status: number | undefined) =>
  `answered status ${status}, which is not an HTTP status (100-599)`;
