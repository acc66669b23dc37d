import type { Pool, PoolClient } from 'pg';
import type { Claims } from './idempotency.js';
import { insertEmitting, type Outbox } from './webhooks/outbox.js';
import { firstRow, onlyRow, type Queryable, rows, TIMESTAMP, transaction } from './queries.js';
import { stillAt, SubscriptionHints } from './subscriptions.js';
import type { NewPetRecord, Pet, PetRepository, PetState, PetStatus, VersionedPet } from '../types.js';
import { type PetRow, versioned } from '../pet-rows.js';
import { pageOf, rowsFor } from '../paging.js';

const PET_COLUMNS = `id, name, category_id AS "categoryId", status, ${TIMESTAMP('created_at')} AS "createdAt",
  ${TIMESTAMP('updated_at')} AS "updatedAt"`;
/** A Pet's fields, as PET_COLUMNS names them and versioned() reads them. */
const PET_FIELDS = [
  'id',
  'name',
  'categoryId',
  'status',
  'createdAt',
  'updatedAt',
] as const satisfies readonly (keyof Pet)[];
const INSERT = `INSERT INTO pets (name, category_id, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
  RETURNING ${PET_COLUMNS}, version`;
/** A change's updated_at: the clock's time ($n), or a millisecond past the last change's if that is not later. */
const CHANGED_AT = (n: number) => `updated_at = greatest($${n}::timestamptz, updated_at + interval '1 millisecond')`;
/**
 * The statements of every request, built once: node-postgres checks a named statement's text
 * against the one it prepared on each use, which is a pointer comparison when it is the same string.
 */
const PET_SQL = {
  list: `SELECT ${PET_COLUMNS}, version FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
  listByStatus: `SELECT ${PET_COLUMNS}, version FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listByIds: `SELECT ${PET_COLUMNS}, version FROM pets WHERE id = ANY($1::bigint[]) AND id > $2 ORDER BY id LIMIT $3`,
  listByIdsAndStatus: `SELECT ${PET_COLUMNS}, version FROM pets
    WHERE id = ANY($1::bigint[]) AND status = $2 AND id > $3 ORDER BY id LIMIT $4`,
  insert: INSERT,
  // Nobody subscribed when the version was $5: the pet alone, as long as that is still so.
  insertUnsubscribed: `INSERT INTO pets (name, category_id, status, created_at, updated_at)
    SELECT $1, $2, $3, $4, $4 WHERE ${stillAt(5)}
    RETURNING ${PET_COLUMNS}, version`,
  insertEmitting: insertEmitting(INSERT, 4, PET_FIELDS),
  byId: `SELECT ${PET_COLUMNS}, version FROM pets WHERE id = $1`,
  lock: `SELECT ${PET_COLUMNS}, version FROM pets WHERE id = $1 FOR UPDATE`,
  placedOrder: `SELECT id FROM orders WHERE pet_id = $1 AND status = 'placed'`,
  change: `UPDATE pets SET name = coalesce($1, name), category_id = coalesce($2, category_id),
    status = coalesce($3, status), version = version + 1, ${CHANGED_AT(5)} WHERE id = $4
    RETURNING ${PET_COLUMNS}, version`,
  setStatus: `UPDATE pets SET status = $1, version = version + 1, ${CHANGED_AT(3)} WHERE id = $2
    RETURNING ${PET_COLUMNS}`,
};

/**
 * A pet as a change is decided on, its row locked until the transaction ends: a racing change of
 * the same pet, on any instance, waits and then decides on what this one wrote.
 */
export async function lockPet(client: PoolClient, id: number): Promise<PetState | undefined> {
  const row = await firstRow<PetRow>(client, { name: 'pets-lock', text: PET_SQL.lock, values: [id] });
  if (row === undefined) return undefined;
  const order = await firstRow<{ id: number }>(client, {
    name: 'pets-placed-order',
    text: PET_SQL.placedOrder,
    values: [id],
  });
  return { ...versioned(row), placedOrderId: order?.id };
}

/** Moves a pet to a status, as an order's change does, and says so in the outbox. */
export async function setPetStatus(
  client: PoolClient,
  outbox: Outbox,
  id: number,
  status: PetStatus,
  at: string,
): Promise<void> {
  const moved = await firstRow<Pet>(client, {
    name: 'pets-set-status',
    text: PET_SQL.setStatus,
    values: [status, id, at],
  });
  if (moved !== undefined) await outbox.emit(client, 'pet.updated', moved);
}

async function getPet(db: Queryable, id: number): Promise<VersionedPet | undefined> {
  const row = await firstRow<PetRow>(db, { name: 'pets-by-id', text: PET_SQL.byId, values: [id] });
  return row === undefined ? undefined : versioned(row);
}

export function petRepository(pool: Pool, claims: Claims, outbox: Outbox, now: () => number): PetRepository {
  const timestamp = () => new Date(now()).toISOString();
  const subscriptions = new SubscriptionHints(pool);
  const list = (afterId: number, limit: number, status: string | undefined, ids: readonly number[] | undefined) => {
    const read = rowsFor(limit);
    if (ids === undefined) {
      return status === undefined
        ? { name: 'pets-list', text: PET_SQL.list, values: [afterId, read] }
        : { name: 'pets-list-status', text: PET_SQL.listByStatus, values: [status, afterId, read] };
    }
    return status === undefined
      ? { name: 'pets-list-ids', text: PET_SQL.listByIds, values: [ids, afterId, read] }
      : { name: 'pets-list-ids-status', text: PET_SQL.listByIdsAndStatus, values: [ids, status, afterId, read] };
  };
  const insert = async (client: PoolClient, pet: NewPetRecord) => {
    const created = versioned(
      await onlyRow<PetRow>(client, {
        name: 'pets-insert',
        text: PET_SQL.insert,
        values: [pet.name, pet.categoryId, pet.status, timestamp()],
      }),
    );
    await outbox.emit(client, 'pet.created', created.pet);
    return { id: created.pet.id, created };
  };
  /**
   * Without a claim: while nobody subscribes to pet.created, the pet alone, one statement as a bare
   * server's; otherwise the pet and its event in one statement (insertEmitting). A hint found wrong
   * either way, by the guard or by an event nobody took, is learnt again by the next create.
   */
  const createUnclaimed = async (pet: NewPetRecord): Promise<VersionedPet> => {
    const hint = await subscriptions.of('pet.created');
    if (!hint.anyone) {
      const alone = await firstRow<PetRow>(pool, {
        name: 'pets-insert-unsubscribed',
        text: PET_SQL.insertUnsubscribed,
        values: [pet.name, pet.categoryId, pet.status, timestamp(), hint.version],
      });
      if (alone !== undefined) return versioned(alone);
    }
    const made = await outbox.insertEmitting<PetRow>(
      pool,
      {
        name: 'pets-insert-emitting',
        text: PET_SQL.insertEmitting,
        values: [pet.name, pet.categoryId, pet.status, timestamp()],
      },
      'pet.created',
    );
    if (made.eventId === null || !hint.anyone) subscriptions.forget('pet.created', hint);
    return versioned(made);
  };

  return {
    list: async ({ limit, status, ids, afterId = 0 }) => {
      return pageOf(await rows<PetRow>(pool, list(afterId, limit, status, ids)), limit, versioned);
    },
    create: async (pet, claim) =>
      claim === undefined
        ? { outcome: 'created', created: await createUnclaimed(pet) }
        : claims.claimed(
            claim,
            (id) => getPet(pool, id),
            (client) => insert(client, pet),
          ),
    get: async (id) => getPet(pool, id),
    update: async (id, decide) =>
      transaction(pool, async (client) => {
        const current = await lockPet(client, id);
        if (current === undefined) return undefined;
        const fields = decide(current);
        if (fields === undefined) return { pet: current.pet, version: current.version };
        const changed = versioned(
          await onlyRow<PetRow>(client, {
            name: 'pets-change',
            text: PET_SQL.change,
            values: [fields.name ?? null, fields.categoryId ?? null, fields.status ?? null, id, timestamp()],
          }),
        );
        await outbox.emit(client, 'pet.updated', changed.pet);
        return changed;
      }),
    remove: async (id, check) =>
      transaction(pool, async (client) => {
        const current = await lockPet(client, id);
        if (current === undefined) return false;
        check(current);
        await rows(client, { text: 'DELETE FROM pets WHERE id = $1', values: [id] });
        await outbox.emit(client, 'pet.deleted', current.pet);
        return true;
      }),
    createMany: async (pets) => {
      const all = [...pets];
      const at = timestamp();
      await transaction(pool, async (client) => {
        for (let start = 0; start < all.length; start += 10_000) {
          const batch = all.slice(start, start + 10_000);
          await rows(client, {
            text: `INSERT INTO pets (name, category_id, status, created_at, updated_at)
                   SELECT name, category_id, status, $4, $4 FROM unnest($1::text[], $2::bigint[], $3::text[])
                     AS batch (name, category_id, status)`,
            values: [
              batch.map((pet) => pet.name),
              batch.map((pet) => pet.categoryId),
              batch.map((pet) => pet.status),
              at,
            ],
          });
        }
      });
      return all.length;
    },
  };
}
