import { ApiError } from '../errors.js';
import { decodeCursor, encodeCursor } from '../paging.js';
import type { PetRepository } from '../storage/types.js';
import type { ServiceHandlers } from './types.js';

export type PetHandlers = Pick<ServiceHandlers, 'listPets' | 'createPet' | 'getPet'>;

const DEFAULT_LIMIT = 20;

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
      const pet = await pets.create({ name, categoryId, status });
      reply.code(201).header('location', `${basePath}/pets/${pet.id}`);
      return pet;
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
