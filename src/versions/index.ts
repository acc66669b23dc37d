import type { ApiVersion } from './change.js';
import { eventsByVersion } from './changes/events-by-version.js';
import { getPetRemoved } from './changes/get-pet-removed.js';
import { listEnvelopes } from './changes/list-envelopes.js';
import { idempotencyKeyRequired } from './changes/idempotency-key-required.js';
import { petTimestamps } from './changes/pet-timestamps.js';
import { problemDetails } from './changes/problem-details.js';

/**
 * Every major version of the API, oldest first, each with the version changes that lead to it from
 * the one before (one module per change, in src/versions/changes/). The newest version's contract is
 * openapi.yaml; each older one's is its newest release in contracts/. Adding a version is its
 * contract and its changes, listed here; contract:check proves the changes cover every breaking
 * difference between the contracts (docs/versions.md).
 *
 * A response goes down through a version's changes last to first, so a change listed later sees the
 * newer version's shapes and one listed earlier sees what the later ones left.
 */
export const API_VERSIONS: readonly ApiVersion[] = [
  { major: 1, changes: [] },
  {
    major: 2,
    changes: [getPetRemoved, problemDetails, listEnvelopes, petTimestamps, idempotencyKeyRequired, eventsByVersion],
  },
];
