import type { Pet, VersionedPet } from './types.js';

/** A pet as both backends' queries return it: its fields and its version. */
export type PetRow = Pet & { version: number };

/** Field by field rather than `{ version, ...pet }`: a list maps up to 100 rows, and V8's rest copy is the slow path. */
export function versioned(row: PetRow): VersionedPet {
  return {
    pet: {
      id: row.id,
      name: row.name,
      categoryId: row.categoryId,
      status: row.status,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    },
    version: row.version,
  };
}
