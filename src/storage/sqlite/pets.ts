import type Database from 'better-sqlite3';
import type { Synchronous } from './synchronous.js';
import type { Claims } from './idempotency.js';
import type { Outbox } from './webhooks/outbox.js';
import { atomic } from './group-commit.js';
import { BOUND_LIMIT } from './statements.js';
import type { NewPetRecord, Pet, PetFields, PetRepository, PetState, VersionedPet } from '../types.js';
import { pageOf, rowsFor } from '../paging.js';

const PET_COLUMNS = 'id, name, category_id AS categoryId, status, created_at AS createdAt, updated_at AS updatedAt';
/** PET_COLUMNS and the version, as a pet's row is read: an array (better-sqlite3's raw mode). */
const VERSIONED_PET = `${PET_COLUMNS}, version`;
type PetColumns = [
  id: number,
  name: string,
  categoryId: number,
  status: Pet['status'],
  createdAt: string,
  updatedAt: string,
  version: number,
];
/**
 * A change's updated_at: the clock's time (the statement's first parameter), or a millisecond past
 * the last change's if that is not later. RFC 3339 texts of one width compare as their times do.
 */
const CHANGED_AT = "updated_at = max(?, strftime('%Y-%m-%dT%H:%M:%fZ', updated_at, '+0.001 seconds'))";

/**
 * Rows of pets are read as arrays and made into pets here: an object row is built by better-sqlite3
 * from C++ a property at a time, which made a page's query take up to twice as long.
 */
function versioned(row: PetColumns): VersionedPet {
  return {
    pet: { id: row[0], name: row[1], categoryId: row[2], status: row[3], createdAt: row[4], updatedAt: row[5] },
    version: row[6],
  };
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
export function petStatusSetter(
  db: Database.Database,
  outbox: Outbox,
  now: () => number,
): (id: number, status: Pet['status']) => void {
  const update = db.prepare<[string, string, number], Pet>(
    `UPDATE pets SET ${CHANGED_AT}, status = ?, version = version + 1 WHERE id = ? RETURNING ${PET_COLUMNS}`,
  );
  return (id, status) => {
    const moved = update.get(new Date(now()).toISOString(), status, id);
    if (moved !== undefined) outbox.emit('pet.updated', moved);
  };
}

export function petRepository(
  db: Database.Database,
  claims: Claims,
  outbox: Outbox,
  now: () => number,
): Synchronous<PetRepository> {
  const timestamp = () => new Date(now()).toISOString();
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
    .prepare<{ name: string; categoryId: number; status: string; at: string }, PetColumns>(
      `INSERT INTO pets (name, category_id, status, created_at, updated_at) VALUES (@name, @categoryId, @status, @at, @at)
       RETURNING ${VERSIONED_PET}`,
    )
    .raw();
  const byId = db.prepare<[number], PetColumns>(`SELECT ${VERSIONED_PET} FROM pets WHERE id = ?`).raw();
  const change = db
    .prepare<[string, string | null, number | null, string | null, number], PetColumns>(
      `UPDATE pets SET ${CHANGED_AT}, name = coalesce(?, name), category_id = coalesce(?, category_id),
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
    const created = versioned(insert.get({ ...pet, at: timestamp() }) as PetColumns);
    outbox.emit('pet.created', created.pet);
    return { id: created.pet.id, created };
  };
  // Without a claim, a create is still one transaction with its event.
  const createUnclaimed = atomic(db, (pet: NewPetRecord) => create(pet).created);
  // When nothing subscribes, the pet alone: one statement, its own transaction. all(), not get():
  // SQLite's commit hook, and with it the WAL's checkpoints, runs only once a statement has run to its end.
  const createAlone = (pet: NewPetRecord) => versioned(insert.all({ ...pet, at: timestamp() })[0] as PetColumns);
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
      change.get(timestamp(), fields.name ?? null, fields.categoryId ?? null, fields.status ?? null, id) as PetColumns,
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
    const at = timestamp();
    for (const pet of pets) {
      insert.run({ name: pet.name, categoryId: pet.categoryId, status: pet.status, at });
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
