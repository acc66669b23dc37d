import type { VersionChange } from '../change.js';

/** An endpoint as v1 shows it: without the version of the payloads it receives. */
function withoutApiVersion(endpoint: unknown): unknown {
  if (typeof endpoint !== 'object' || endpoint === null) return endpoint;
  const copy = { ...(endpoint as Record<string, unknown>) };
  delete copy.apiVersion;
  return copy;
}

/**
 * An answer as v1 shows it: an endpoint, or a list of them (a bare array, or v2's page), without
 * `apiVersion`, which only endpoints carry. Read from the answer rather than from a list of
 * operations, so an operation added later that answers endpoints needs no edit here.
 */
function answerWithoutApiVersion(body: unknown): unknown {
  if (Array.isArray(body)) return body.some(hasApiVersion) ? body.map(withoutApiVersion) : body;
  if (typeof body !== 'object' || body === null) return body;
  if (hasApiVersion(body)) return withoutApiVersion(body);
  const { data } = body as { data?: unknown };
  return Array.isArray(data) && data.some(hasApiVersion) ? { ...body, data: data.map(withoutApiVersion) } : body;
}

function hasApiVersion(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'apiVersion' in value;
}

/**
 * v2 delivers each endpoint its events in the API version it names (`apiVersion`, set by the path
 * it was made through, changed with PATCH): the outbox keeps v2's payload and the delivery worker
 * migrates it down through the chain's `eventDown`s before signing (src/events/payload-versions.ts).
 * An endpoint made through v1 is a v1 endpoint; v1's bodies never show the field. The payloads'
 * own differences are the other changes' `eventDown`s: this one migrates no event.
 */
export const eventsByVersion: VersionChange = {
  description:
    'A webhook endpoint receives its events in the API version it names (apiVersion, "v1" or "v2"): the version it was created through unless the create names one, changed with PATCH /webhooks/{webhookId}; endpoints made through v1 receive v1 payloads as before.',
  covers: [
    { at: '#/components/schemas/WebhookApiVersion' },
    { at: 'GET /webhooks responses/200/content/application/json/schema/items' },
    { at: 'POST /webhooks requestBody/content/application/json/schema/properties/apiVersion' },
    { at: 'POST /webhooks responses/201/content/application/json/schema/properties/apiVersion' },
    {
      at: 'PATCH /webhooks/{webhookId} requestBody/content/application/merge-patch+json/schema/properties/apiVersion',
    },
  ],
  requestUp: (request) => {
    if (request.operationId !== 'createWebhook' || typeof request.body !== 'object' || request.body === null) return;
    request.body = { ...request.body, apiVersion: 'v1' };
  },
  responseDown: (response) => {
    if (response.status < 200 || response.status > 299) return;
    response.body = answerWithoutApiVersion(response.body);
  },
};
