import t from 'tap';
import {
  CLAIM_COLUMNS,
  claimValues,
  type IdempotencyClaimRow,
  settleEarlierClaim,
} from '../src/storage/idempotency-rows.js';
import type { IdempotencyClaim } from '../src/storage/types.js';

// What both backends decide when a key was claimed before, within its lifetime: the same request
// replays what the first created (as its answer showed it, or re-read when the claim kept no
// answer); another request with the key is a conflict.

interface Made {
  id: number;
  name: string;
  status: string;
}

const fingerprint = (text: string) => Buffer.from(text);
const claim: IdempotencyClaim = {
  apiKeyId: 7,
  key: 'retry-me',
  fingerprint: fingerprint('POST /v2/pets {"name":"Rex"}'),
};
const made: Made = { id: 42, name: 'Rex', status: 'available' };

/** The row a claim saved with claimValues reads back as. */
function savedRow(saved: IdempotencyClaim, id: number, created: unknown): IdempotencyClaimRow {
  const [, , savedFingerprint, resourceId, response] = claimValues(saved, id, created, 1_000);
  return { fingerprint: savedFingerprint, resourceId, response };
}

t.test('the same request replays the answer its claim kept, as it was then', async (t) => {
  const earlier = savedRow(claim, made.id, made);
  // Compared by bytes: the retry's fingerprint is computed anew.
  const retry = { ...claim, fingerprint: fingerprint('POST /v2/pets {"name":"Rex"}') };
  t.same(settleEarlierClaim<Made>(earlier, retry), { outcome: 'replay-kept', created: made });
});

t.test('the same request re-reads the resource when its claim kept no answer', async (t) => {
  const earlier: IdempotencyClaimRow = { fingerprint: claim.fingerprint, resourceId: 42, response: null };
  t.same(settleEarlierClaim<Made>(earlier, claim), { outcome: 'replay-by-id', resourceId: 42 });
});

t.test('another request with the key is a conflict, and learns nothing of what the first made', async (t) => {
  const other = { ...claim, fingerprint: fingerprint('POST /v2/pets {"name":"Max"}') };
  const kept = savedRow(claim, made.id, made);
  t.same(settleEarlierClaim<Made>(kept, other), { outcome: 'conflict' }, 'its answer kept');
  const notKept: IdempotencyClaimRow = { ...kept, response: null };
  t.same(settleEarlierClaim<Made>(notKept, other), { outcome: 'conflict' }, 'no answer kept');
  const prefix = { ...claim, fingerprint: claim.fingerprint.subarray(0, 10) };
  t.same(settleEarlierClaim<Made>(kept, prefix), { outcome: 'conflict' }, 'a fingerprint that is a prefix of it');
});

t.test('a claim is saved with what it created, each value in its column', async (t) => {
  const columns =
    /\(([^)]*)\)/
      .exec(CLAIM_COLUMNS)?.[1]
      ?.split(',')
      .map((column) => column.trim()) ?? [];
  const values = claimValues(claim, made.id, made, 1_000);
  t.same(Object.fromEntries(columns.map((column, index) => [column, values[index]])), {
    api_key_id: claim.apiKeyId,
    key: claim.key,
    fingerprint: claim.fingerprint,
    resource_id: made.id,
    response: JSON.stringify(made),
    created_at: 1_000,
  });
  t.equal(columns.length, values.length, 'no value without its column');
});
