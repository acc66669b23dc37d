import { atomic } from './group-commit.js';
import type Database from 'better-sqlite3';
import type { Synchronous } from './synchronous.js';
import type { Claims } from './idempotency.js';
import { petStates, petStatusSetter } from './pets.js';
import type { Outbox } from './webhooks/outbox.js';
import { BOUND_LIMIT } from './statements.js';
import {
  type Order,
  type OrderChange,
  type OrderRepository,
  type Decide,
  ORDER_EVENTS,
  type PetState,
  type PetStatus,
} from '../types.js';
import { pageOf, rowsFor } from '../paging.js';

const ORDER_COLUMNS = 'id, pet_id AS petId, status, placed_at AS placedAt, updated_at AS updatedAt';

export function orderRepository(
  db: Database.Database,
  claims: Claims,
  outbox: Outbox,
  now: () => number,
): Synchronous<OrderRepository> {
  const list = {
    all: db.prepare<[number, number], Order>(
      `SELECT ${ORDER_COLUMNS} FROM orders WHERE id > ? ORDER BY id ${BOUND_LIMIT}`,
    ),
    byStatus: db.prepare<[string, number, number], Order>(
      `SELECT ${ORDER_COLUMNS} FROM orders WHERE status = ? AND id > ? ORDER BY id ${BOUND_LIMIT}`,
    ),
  };
  const byId = db.prepare<[number], Order>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = ?`);
  const insert = db.prepare<[number, string, string], Order>(
    `INSERT INTO orders (pet_id, status, placed_at, updated_at) VALUES (?, 'placed', ?, ?) RETURNING ${ORDER_COLUMNS}`,
  );
  const setStatus = db.prepare<[string, string, number], Order>(
    `UPDATE orders SET status = ?, updated_at = ? WHERE id = ? RETURNING ${ORDER_COLUMNS}`,
  );
  const petState = petStates(db);
  const movePet = petStatusSetter(db, outbox, now);
  const timestamp = () => new Date(now()).toISOString();

  // IMMEDIATE transactions: the pet is read under the write lock, so two orders cannot both find it available.
  const place = atomic(
    db,
    (petId: number, check: (pet: PetState | undefined) => PetStatus, claim: Parameters<OrderRepository['place']>[2]) =>
      claims.claimed(
        claim,
        (id) => byId.get(id),
        () => {
          movePet(petId, check(petState(petId)));
          const at = timestamp();
          const created = insert.get(petId, at, at) as Order;
          outbox.emit(ORDER_EVENTS.placed, created);
          return { id: created.id, created };
        },
      ),
  );
  const update = atomic(db, (id: number, decide: Decide<Order, OrderChange>) => {
    const current = byId.get(id);
    if (current === undefined) return undefined;
    const change = decide(current);
    if (change === undefined) return current;
    movePet(current.petId, change.petStatus);
    const changed = setStatus.get(change.status, timestamp(), id) as Order;
    outbox.emit(ORDER_EVENTS[change.status], changed);
    return changed;
  });

  return {
    list: ({ limit, status, afterId = 0 }) => {
      const rows =
        status === undefined
          ? list.all.all(afterId, rowsFor(limit))
          : list.byStatus.all(status, afterId, rowsFor(limit));
      return pageOf(rows, limit);
    },
    get: (id) => byId.get(id),
    place: (petId, check, claim) => place(petId, check, claim),
    update: (id, decide) => update(id, decide),
  };
}
