import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../domain/errors.js';
import type { CreateOutcome, IdempotencyClaim, Principal } from '../storage/types.js';

/** Who sent a request to a secured operation (the bearer hook has run). */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === undefined) throw new Error('operation is not secured in the contract');
  return request.principal;
}

/**
 * The request's `Idempotency-Key` claim, if it sent one. `request` names the request's meaning
 * (the same, however the JSON was spelled), so a retry is told from a reuse of the key.
 */
export function claimOf(
  request: FastifyRequest<{ Headers: { 'idempotency-key'?: string } }>,
  meaning: unknown[],
): IdempotencyClaim | undefined {
  const key = request.headers['idempotency-key'];
  if (key === undefined) return undefined;
  const fingerprint = createHash('sha256').update(JSON.stringify(meaning)).digest();
  return { apiKeyId: principalOf(request).keyId, key, fingerprint };
}

/** What a create answers: what it made (or, marked replayed, what the first request made, as it was then), or a 422 or 404. */
export function created<T>(outcome: CreateOutcome<T>, reply: FastifyReply, what: string): T {
  if (outcome.outcome === 'conflict') {
    throw new ApiError(422, 'idempotency_key_reused', 'Idempotency-Key was used with a different body');
  }
  const made = outcome.created;
  if (made === undefined) {
    throw new ApiError(404, 'not_found', `The ${what} this Idempotency-Key created has since been removed`);
  }
  if (outcome.outcome === 'replayed') reply.header('idempotent-replayed', 'true');
  reply.code(201);
  return made;
}
