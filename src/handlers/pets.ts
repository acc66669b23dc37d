import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { decodeCursor, encodeCursor } from '../paging.js';
import type { NewPetRecord, PetRepository, Principal } from '../storage/types.js';
import type { OperationHandlers } from './types.js';

export type PetHandlers = Pick<OperationHandlers, 'listPets' | 'createPet' | 'getPet'>;

const DEFAULT_LIMIT = 20;

/** The same pet, however the JSON was spelled (key order, an explicit default status). */
function fingerprint(pet: NewPetRecord): Buffer {
  return createHash('sha256')
    .update(JSON.stringify([pet.name, pet.categoryId, pet.status]))
    .digest();
}

/** Who sent a request to a secured operation (the bearer hook has run). */
function principalOf(request: FastifyRequest): Principal {
  if (request.principal === undefined) throw new Error('operation is not secured in the contract');
  return request.principal;
}

export function petHandlers(pets: PetRepository, basePath: string): PetHandlers {
  return {
    async listPets(request, reply) {
      const { limit = DEFAULT_LIMIT, status, cursor } = request.query;
      const afterId = cursor === undefined ? undefined : decodeCursor(cursor);
      const page = await pets.list({ limit, status, afterId });
      const last = page.pets.at(-1);
      if (page.hasMore && last !== undefined) {
        const next = new URLSearchParams({ limit: String(limit) });
        if (status !== undefined) next.set('status', status);
        next.set('cursor', encodeCursor(last.id));
        reply.header('link', `<${basePath}/pets?${next.toString()}>; rel="next"`);
      }
      return page.pets;
    },

    async createPet(request, reply) {
      const { name, categoryId, status = 'available' } = request.body;
      const pet = { name, categoryId, status };
      const key = request.headers['idempotency-key'];
      const claim =
        key === undefined ? undefined : { apiKeyId: principalOf(request).keyId, key, fingerprint: fingerprint(pet) };
      const created = await pets.create(pet, claim);
      if (created.outcome === 'conflict') {
        throw new ApiError(422, 'idempotency_key_reused', 'Idempotency-Key was used with a different body');
      }
      if (created.outcome === 'replayed') reply.header('idempotent-replayed', 'true');
      reply.code(201).header('location', `${basePath}/pets/${created.pet.id}`);
      return created.pet;
    },

    async getPet(request) {
      const pet = await pets.get(request.params.petId);
      if (pet === undefined) {
        throw new ApiError(404, 'not_found', `No pet with id ${request.params.petId}`);
      }
      return pet;
    },
  };
}
