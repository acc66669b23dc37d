import type { VersionChange } from '../change.js';

/**
 * v2's creates need an Idempotency-Key, so that a retried create never makes a second pet or
 * order. v1 promised a create without one makes exactly one: its requests reach the same handler,
 * which claims a key only when there is one, so nothing migrates.
 */
export const idempotencyKeyRequired: VersionChange = {
  description:
    'createPet and placeOrder require an Idempotency-Key header: a create without one is a 400 naming the header, so that no retried create is made twice.',
  // One parameter both creates share: the breaking-change check reports it where it first meets it.
  covers: [{ at: 'POST /pets parameters', rule: 'parameter-became-required' }],
};
