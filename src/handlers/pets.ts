import type { FastifyReply } from 'fastify';
import { entityTag, preconditionsOf } from '../domain/rules.js';
import { ApiError } from '../domain/errors.js';
import type { VersionedPet } from '../storage/types.js';
import { claimOf, created } from './idempotency.js';
import { DEFAULT_LIMIT, FilteredList } from './paging.js';
import type { HandlerModule } from './types.js';

function notFound(id: number): ApiError {
  return new ApiError(404, 'not_found', `No pet with id ${id}`);
}

/** The pet, with its version as the response's ETag. */
function tagged(reply: FastifyReply, versioned: VersionedPet) {
  reply.header('etag', entityTag(versioned));
  return versioned.pet;
}

export const petHandlers: HandlerModule = ({ storage: { pets }, rules, basePath }) => {
  return {
    async listPets(request, reply) {
      const { limit = DEFAULT_LIMIT, status, id: ids, cursor } = request.query;
      const list = new FilteredList('/pets', { status, id: ids?.join(',') });
      const page = await pets.list({ limit, status, ids, afterId: list.afterId(cursor) });
      const [first] = page.items;
      // `?id=3` is the read of one pet: its ETag comes with it, for a change with If-Match.
      if (first !== undefined && new Set(ids).size === 1) tagged(reply, first);
      return list.page({ items: page.items.map(({ pet }) => pet), hasMore: page.hasMore });
    },

    async createPet(request, reply) {
      const { name, categoryId, status = 'available' } = request.body;
      const pet = { name, categoryId, status };
      // The meaning of a createPet is its three fields (the form claims took before orders existed).
      const outcome = await pets.create(pet, claimOf(request, [name, categoryId, status]));
      const made = created(outcome, reply, 'pet');
      reply.header('location', `${basePath}/pets/${made.pet.id}`);
      return tagged(reply, made);
    },

    async updatePet(request, reply) {
      const { petId } = request.params;
      const decide = rules.changePet(request.body, preconditionsOf(request.headers));
      const updated = await pets.update(petId, decide);
      if (updated === undefined) throw notFound(petId);
      return tagged(reply, updated);
    },

    async deletePet(request, reply) {
      const { petId } = request.params;
      const removed = await pets.remove(petId, rules.removePet(preconditionsOf(request.headers)));
      if (!removed) throw notFound(petId);
      reply.code(204);
      return undefined;
    },
  };
};
