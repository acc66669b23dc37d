import { servedVersions } from './contract.js';

/**
 * The version whose payloads the server delivers to a webhook endpoint made through /v1, as the
 * client suites make theirs: its own, `v1`, once endpoints carry an `apiVersion` (issue 51 change 6,
 * eventsByVersion); until then the newest version's, to every endpoint. Read from openapi.yaml, so
 * that the suites unwrap with the matching client, and move to v1's the day the change lands.
 */
const endpoint = servedVersions.contract.dereferenced.components?.schemas?.WebhookEndpoint as
  { properties?: Record<string, unknown> } | undefined;
export const deliveredVersion: 'v1' | 'v2' = endpoint?.properties?.apiVersion === undefined ? 'v2' : 'v1';
