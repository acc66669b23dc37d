import type { Pool } from 'pg';
import { readMigrations } from '../migrations.js';
import { answered } from './read-timeout.js';
import { inTransaction } from './transaction.js';

/** Any constant will do, as long as nothing else on the database takes the same advisory lock. */
const MIGRATION_LOCK = 0x7065_7473; // "pets"

/**
 * Applies the numbered migrations not yet recorded in `schema_migrations`, all in one transaction
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
    const applied = await answered(client, client.query<{ version: number }>('SELECT version FROM schema_migrations'));
    const done = new Set(applied.rows.map((row) => row.version));
    const pending = readMigrations(dir).filter((migration) => !done.has(migration.version));
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
