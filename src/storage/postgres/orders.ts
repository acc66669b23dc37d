import type { Pool } from 'pg';
import type { Claims } from './idempotency.js';
import type { Outbox } from './webhooks/outbox.js';
import { lockPet, setPetStatus } from './pets.js';
import { firstRow, onlyRow, rows, TIMESTAMP, transaction } from './queries.js';
import { type Order, ORDER_EVENTS, type OrderRepository } from '../types.js';
import { pageOf, rowsFor } from '../paging.js';

const ORDER_COLUMNS = `id, pet_id AS "petId", status, ${TIMESTAMP('placed_at')} AS "placedAt",
  ${TIMESTAMP('updated_at')} AS "updatedAt"`;
const ORDER_SQL = {
  list: `SELECT ${ORDER_COLUMNS} FROM orders WHERE id > $1 ORDER BY id LIMIT $2`,
  listByStatus: `SELECT ${ORDER_COLUMNS} FROM orders WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  byId: `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1`,
  lock: `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 FOR UPDATE`,
  insert: `INSERT INTO orders (pet_id, status, placed_at, updated_at)
    VALUES ($1, 'placed', to_timestamp($2 / 1000.0), to_timestamp($2 / 1000.0)) RETURNING ${ORDER_COLUMNS}`,
  setStatus: `UPDATE orders SET status = $1, updated_at = to_timestamp($2 / 1000.0) WHERE id = $3
    RETURNING ${ORDER_COLUMNS}`,
};

export function orderRepository(pool: Pool, claims: Claims, outbox: Outbox, now: () => number): OrderRepository {
  const byId = (id: number) => firstRow<Order>(pool, { name: 'orders-by-id', text: ORDER_SQL.byId, values: [id] });

  return {
    list: async ({ limit, status, afterId = 0 }) => {
      const query =
        status === undefined
          ? { name: 'orders-list', text: ORDER_SQL.list, values: [afterId, rowsFor(limit)] }
          : { name: 'orders-list-status', text: ORDER_SQL.listByStatus, values: [status, afterId, rowsFor(limit)] };
      return pageOf(await rows<Order>(pool, query), limit);
    },
    get: byId,
    // The pet's row is locked first: two orders for it, on any instances, are decided one after the other.
    place: async (petId, check, claim) =>
      claims.claimed(claim, byId, async (client) => {
        const at = now();
        await setPetStatus(client, outbox, petId, check(await lockPet(client, petId)), new Date(at).toISOString());
        const created = await onlyRow<Order>(client, {
          name: 'orders-insert',
          text: ORDER_SQL.insert,
          values: [petId, at],
        });
        await outbox.emit(client, ORDER_EVENTS.placed, created);
        return { id: created.id, created };
      }),
    update: async (id, decide) =>
      transaction(pool, async (client) => {
        const current = await firstRow<Order>(client, { name: 'orders-lock', text: ORDER_SQL.lock, values: [id] });
        if (current === undefined) return undefined;
        const change = decide(current);
        if (change === undefined) return current;
        const at = now();
        await setPetStatus(client, outbox, current.petId, change.petStatus, new Date(at).toISOString());
        const changed = await onlyRow<Order>(client, {
          name: 'orders-set-status',
          text: ORDER_SQL.setStatus,
          values: [change.status, at, id],
        });
        await outbox.emit(client, ORDER_EVENTS[change.status], changed);
        return changed;
      }),
  };
}
