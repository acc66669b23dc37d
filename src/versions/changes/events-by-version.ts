import type { VersionChange } from '../change.js';

/** The operations whose success answers one webhook endpoint. */
const ENDPOINT_ANSWERS = new Set(['createWebhook', 'getWebhook', 'updateWebhook', 'rotateWebhookSecret']);

/** An endpoint as v1 shows it: without the version of the payloads it receives. */
function withoutApiVersion(endpoint: unknown): unknown {
  if (typeof endpoint !== 'object' || endpoint === null) return endpoint;
  const copy = { ...(endpoint as Record<string, unknown>) };
  delete copy.apiVersion;
  return copy;
}

/** listWebhooks' answer as v1 shows it: a bare array, or the envelope a later change of v2 makes of it. */
function listWithoutApiVersion(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(withoutApiVersion);
  if (typeof body !== 'object' || body === null) return body;
  const { data } = body as { data?: unknown };
  return Array.isArray(data) ? { ...body, data: data.map(withoutApiVersion) } : body;
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
    if (ENDPOINT_ANSWERS.has(response.operationId)) response.body = withoutApiVersion(response.body);
    else if (response.operationId === 'listWebhooks') response.body = listWithoutApiVersion(response.body);
  },
};
