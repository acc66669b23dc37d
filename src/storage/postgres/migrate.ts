import type { Pool } from 'pg';
import { type Migration, readMigrations } from '../migrations.js';
import { answered } from './read-timeout.js';
import { inTransaction } from './transaction.js';

/** Any constant will do, as long as nothing else on the database takes the same advisory lock. */
const MIGRATION_LOCK = 0x7065_7473; // "pets"

/** A migration's name: its file's, without the number (`003-orders-and-versions.sql`: `orders-and-versions.sql`). */
const nameOf = (file: string) => file.slice(file.indexOf('-') + 1);

/**
 * Which migrations are applied, by name: the numbers changed once, when both backends took the
 * same numbers and names (PostgreSQL's 002, orders and versions, became 003 beside SQLite's), so a
 * database records some under their old numbers. Those are `renumbered`, to be recorded again under
 * their number now; the others not recorded under their name are `pending`. A code of before the
 * renumbering finds every number it knows recorded (the new numbers cover the old) and applies none.
 */
export function reconcile(
  recorded: readonly { version: number; file: string; applied_at: Date }[],
  migrations: readonly Migration[],
): { renumbered: { was: string; version: number; file: string; appliedAt: Date }[]; pending: Migration[] } {
  const byName = new Map(recorded.map((row) => [nameOf(row.file), row]));
  const renumbered = [];
  const pending = [];
  for (const migration of migrations) {
    const row = byName.get(nameOf(migration.file));
    if (row === undefined) pending.push(migration);
    else if (row.file !== migration.file) {
      renumbered.push({ was: row.file, version: migration.version, file: migration.file, appliedAt: row.applied_at });
    }
  }
  return { renumbered, pending };
}

/**
 * Applies the numbered migrations not yet recorded in `schema_migrations` (reconcile), all in one transaction
 * under an advisory lock: instances starting together on an empty database wait for the first,
 * then find nothing left to do. Returns how many ran.
 */
export async function migrate(pool: Pool, dir: string): Promise<number> {
  return inTransaction(pool, async (client) => {
    await answered(client, client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]));
    await answered(
      client,
      client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        file       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`),
    );
    const recorded = await answered(
      client,
      client.query<{ version: number; file: string; applied_at: Date }>(
        'SELECT version, file, applied_at FROM schema_migrations',
      ),
    );
    const migrations = readMigrations(dir);
    const { renumbered, pending } = reconcile(recorded.rows, migrations);
    if (renumbered.length > 0) {
      await answered(
        client,
        client.query('DELETE FROM schema_migrations WHERE file = ANY($1::text[])', [renumbered.map((r) => r.was)]),
      );
      await answered(
        client,
        client.query(
          `INSERT INTO schema_migrations (version, file, applied_at)
           SELECT * FROM unnest($1::integer[], $2::text[], $3::timestamptz[])`,
          [renumbered.map((r) => r.version), renumbered.map((r) => r.file), renumbered.map((r) => r.appliedAt)],
        ),
      );
    }
    for (const { version, file, sql } of pending) {
      await answered(client, client.query(sql));
      await answered(
        client,
        client.query('INSERT INTO schema_migrations (version, file) VALUES ($1, $2)', [version, file]),
      );
    }
    return pending.length;
  });
}
