import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { Webhook } from 'standardwebhooks';
import type { Contract } from '../../src/contract/document.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from '../../src/events/settings.js';
import type { EventType, WebhookEndpoint } from '../../src/domain/events.js';
import { startApi, type StartOptions, type TestApi } from './api.js';
import type { Teardown } from './backend.js';
import { contract } from './contract.js';
import type { Received } from './receiver.js';

/** Deliveries to loopback receivers, retried within a second, polled often. */
export const FAST: WebhookSettings = {
  ...DEFAULT_WEBHOOKS,
  allowedNetworks: ['loopback'],
  retrySchedule: [0, 200, 400],
  pollMs: 100,
};

export type WithSecret = WebhookEndpoint & { secret: string };

/** A server with its delivery worker, FAST deliveries unless `options` says otherwise. */
export function start(t: Teardown, options: StartOptions = {}): Promise<TestApi> {
  return startApi(t, { webhooks: FAST, deliveries: true, ...options });
}

export function subscribe(api: TestApi, url: string, events: EventType[], auth = api.auth) {
  return api.request({ method: 'POST', url: '/v1/webhooks', headers: auth, payload: { url, events } });
}

export async function subscribed(api: TestApi, url: string, events: EventType[]): Promise<WithSecret> {
  const response = await subscribe(api, url, events);
  if (response.statusCode !== 201) throw new Error(`createWebhook: ${response.statusCode} ${response.body}`);
  return response.json<WithSecret>();
}

/** A merge-patch of `url`, as PATCH operations take it. */
export function patch(api: TestApi, url: string, body: object) {
  return api.request({
    method: 'PATCH',
    url,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: JSON.stringify(body),
  });
}

export interface EventPayload {
  type: string;
  timestamp: string;
  data: unknown;
}

/** Verifies a delivery with the standardwebhooks package's own verifier; returns the payload. */
export function verified(secret: string, received: Received): EventPayload {
  return new Webhook(secret).verify(received.body, received.headers as Record<string, string>) as EventPayload;
}

// The contract's schemas, validated with it (validateContract).
const ajv = new Ajv2020({ strict: false, validateSchema: false });
(addFormats as unknown as (ajv: Ajv2020) => void)(ajv);

const eventsOf = (version: Contract) => (version.dereferenced as { webhooks?: Record<string, unknown> }).webhooks ?? {};

/** The event kinds the contract declares, with their payload schemas. */
export const declaredEvents = eventsOf(contract);

/** Whether a payload is what the contract (the v1 suites', unless `version` names another) declares for its kind. */
export function payloadConforms(type: string, body: unknown, version: Contract = contract): boolean {
  const declared = version === contract ? declaredEvents : eventsOf(version);
  const hook = declared[type] as { post: { requestBody: { content: Record<string, { schema: object }> } } } | undefined;
  const schema = hook?.post.requestBody.content['application/json']?.schema;
  return schema !== undefined && ajv.validate(schema, body);
}

/** Resolves once `check` holds, polling every 50 ms; rejects naming `what` after `timeoutMs`. */
export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
