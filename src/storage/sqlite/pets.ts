import type Database from 'better-sqlite3';
import type { Synchronous } from './synchronous.js';
import type { Claims } from './idempotency.js';
import type { Outbox } from './webhooks/outbox.js';
import { atomic } from './group-commit.js';
import { BOUND_LIMIT } from './statements.js';
import type { NewPetRecord, Pet, PetFields, PetRepository, PetState, VersionedPet } from '../types.js';
import { pageOf, rowsFor } from '../paging.js';

const PET_COLUMNS = 'id, name, category_id AS categoryId, status';
/** PET_COLUMNS and the version, as a pet's row is read: an array (better-sqlite3's raw mode). */
const VERSIONED_PET = `${PET_COLUMNS}, version`;
type PetColumns = [id: number, name: string, categoryId: number, status: Pet['status'], version: number];

/**
 * Rows of pets are read as arrays and made into pets here: an object row is built by better-sqlite3
 * from C++ a property at a time, which made a page's query take up to twice as long.
 */
function versioned(row: PetColumns): VersionedPet {
  return { pet: { id: row[0], name: row[1], categoryId: row[2], status: row[3] }, version: row[4] };
}

/** A pet as a change is decided on: with its version and its placed order. */
export function petStates(db: Database.Database): (id: number) => PetState | undefined {
  const byId = db.prepare<[number], PetColumns>(`SELECT ${VERSIONED_PET} FROM pets WHERE id = ?`).raw();
  const placedOrder = db.prepare<[number], { id: number }>(
    `SELECT id FROM orders WHERE pet_id = ? AND status = 'placed'`,
  );
  return (id) => {
    const row = byId.get(id);
    return row === undefined ? undefined : { ...versioned(row), placedOrderId: placedOrder.get(id)?.id };
  };
}

/** Moves a pet to a status, as an order's change does, and says so in the outbox. */
export function petStatusSetter(db: Database.Database, outbox: Outbox): (id: number, status: Pet['status']) => void {
  const update = db.prepare<[string, number], Pet>(
    `UPDATE pets SET status = ?, version = version + 1 WHERE id = ? RETURNING ${PET_COLUMNS}`,
  );
  return (id, status) => {
    const moved = update.get(status, id);
    if (moved !== undefined) outbox.emit('pet.updated', moved);
  };
}

export function petRepository(db: Database.Database, claims: Claims, outbox: Outbox): Synchronous<PetRepository> {
  // A list of ids is bound as one JSON array.
  const ids = 'id IN (SELECT value FROM json_each(?))';
  const list = {
    all: db
      .prepare<[number, number], PetColumns>(
        `SELECT ${VERSIONED_PET} FROM pets WHERE id > ? ORDER BY id ${BOUND_LIMIT}`,
      )
      .raw(),
    byStatus: db
      .prepare<[string, number, number], PetColumns>(
        `SELECT ${VERSIONED_PET} FROM pets WHERE status = ? AND id > ? ORDER BY id ${BOUND_LIMIT}`,
      )
      .raw(),
    byIds: db
      .prepare<[string, number, number], PetColumns>(
        `SELECT ${VERSIONED_PET} FROM pets WHERE ${ids} AND id > ? ORDER BY id ${BOUND_LIMIT}`,
      )
      .raw(),
    byIdsAndStatus: db
      .prepare<[string, string, number, number], PetColumns>(
        `SELECT ${VERSIONED_PET} FROM pets WHERE ${ids} AND status = ? AND id > ? ORDER BY id ${BOUND_LIMIT}`,
      )
      .raw(),
  };
  const insert = db
    .prepare<[string, number, string], PetColumns>(
      `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${VERSIONED_PET}`,
    )
    .raw();
  const byId = db.prepare<[number], PetColumns>(`SELECT ${VERSIONED_PET} FROM pets WHERE id = ?`).raw();
  const change = db
    .prepare<[string | null, number | null, string | null, number], PetColumns>(
      `UPDATE pets SET name = coalesce(?, name), category_id = coalesce(?, category_id),
       status = coalesce(?, status), version = version + 1
     WHERE id = ? RETURNING ${VERSIONED_PET}`,
    )
    .raw();
  const remove = db.prepare<[number]>('DELETE FROM pets WHERE id = ?');
  const stateOf = petStates(db);
  const get = (id: number) => {
    const row = byId.get(id);
    return row === undefined ? undefined : versioned(row);
  };
  const create = (pet: NewPetRecord) => {
    const created = versioned(insert.get(pet.name, pet.categoryId, pet.status) as PetColumns);
    outbox.emit('pet.created', created.pet);
    return { id: created.pet.id, created };
  };
  // Without a claim, a create is still one transaction with its event.
  const createUnclaimed = atomic(db, (pet: NewPetRecord) => create(pet).created);
  // When nothing subscribes, the pet alone: one statement, its own transaction. all(), not get():
  // SQLite's commit hook, and with it the WAL's checkpoints, runs only once a statement has run to its end.
  const createAlone = (pet: NewPetRecord) =>
    versioned(insert.all(pet.name, pet.categoryId, pet.status)[0] as PetColumns);
  // IMMEDIATE: the write lock is taken before the pet is read, so the decision and the write are atomic.
  const createClaimed = atomic(db, (pet: NewPetRecord, claim: Parameters<PetRepository['create']>[1]) =>
    claims.claimed(claim, get, () => create(pet)),
  );
  const update = atomic(db, (id: number, decide: Parameters<PetRepository['update']>[1]) => {
    const current = stateOf(id);
    if (current === undefined) return undefined;
    const fields: PetFields | undefined = decide(current);
    if (fields === undefined) return current;
    const changed = versioned(
      change.get(fields.name ?? null, fields.categoryId ?? null, fields.status ?? null, id) as PetColumns,
    );
    outbox.emit('pet.updated', changed.pet);
    return changed;
  });
  const removeChecked = atomic(db, (id: number, check: (current: PetState) => void) => {
    const current = stateOf(id);
    if (current === undefined) return false;
    check(current);
    remove.run(id);
    outbox.emit('pet.deleted', current.pet);
    return true;
  });
  const insertMany = atomic(db, (pets: Iterable<NewPetRecord>) => {
    let count = 0;
    for (const pet of pets) {
      insert.run(pet.name, pet.categoryId, pet.status);
      count += 1;
    }
    return count;
  });

  return {
    list: ({ limit, status, ids: only, afterId = 0 }) => {
      const rows =
        only === undefined
          ? status === undefined
            ? list.all.all(afterId, rowsFor(limit))
            : list.byStatus.all(status, afterId, rowsFor(limit))
          : status === undefined
            ? list.byIds.all(JSON.stringify(only), afterId, rowsFor(limit))
            : list.byIdsAndStatus.all(JSON.stringify(only), status, afterId, rowsFor(limit));
      return pageOf(rows, limit, versioned);
    },
    create: (pet, claim) => {
      if (claim !== undefined) return createClaimed(pet, claim);
      const created = outbox.subscribes('pet.created') ? createUnclaimed(pet) : createAlone(pet);
      return { outcome: 'created', created };
    },
    get: (id) => get(id),
    update: (id, decide) => {
      const updated = update(id, decide);
      return updated === undefined ? undefined : { pet: updated.pet, version: updated.version };
    },
    remove: (id, check) => removeChecked(id, check),
    createMany: (pets) => insertMany(pets),
  };
}
