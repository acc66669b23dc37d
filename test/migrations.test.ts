import { copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import t from 'tap';
import { migrationsDir } from '../src/contract/paths.js';
import { migrate as migratePostgres } from '../src/storage/postgres/migrate.js';
import { migrate as migrateSqlite } from '../src/storage/sqlite/migrate.js';
import { backend, newDatabase, type Teardown, temporaryDirectory } from './helpers/backend.js';

// Both backends' migrations carry the same numbers and names; databases migrated before they did
// upgrade without running anything twice.

const files = (dir: string) => readdirSync(dir).filter((file) => file.endsWith('.sql'));

/** PostgreSQL's migrations as they were numbered before they took SQLite's numbers (issue 55). */
const POSTGRES_BEFORE = [
  '001-initial.sql',
  '002-orders-and-versions.sql',
  '003-key-scopes-and-expiry.sql',
  '004-webhooks.sql',
  '005-webhook-fan-out.sql',
  '006-webhook-fair-claims.sql',
  '007-idempotency-responses.sql',
  '008-event-trace-context.sql',
  '009-api-key-changes.sql',
  '010-webhook-retries-in-range.sql',
  '011-webhook-subscriptions-version.sql',
];

t.test('the two backends have the same migrations, under the same numbers', async (t) => {
  t.same(files(migrationsDir('postgres')), files(migrationsDir('sqlite')));
});

if (backend === 'postgres') {
  /** The tables and columns of a database, and its migrations as recorded. */
  const schemaOf = async (pool: pg.Pool) => ({
    columns: (
      await pool.query(`SELECT table_name, column_name, data_type, is_nullable, column_default
        FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_migrations'
        ORDER BY table_name, column_name`)
    ).rows,
    triggers: (
      await pool.query(`SELECT event_object_table, trigger_name, event_manipulation FROM information_schema.triggers
        ORDER BY 1, 2, 3`)
    ).rows,
    recorded: (await pool.query('SELECT version, file FROM schema_migrations ORDER BY version')).rows,
  });
  const poolOf = async (t: Teardown) => {
    const pool = new pg.Pool({ connectionString: await newDatabase(t), max: 1 });
    t.teardown(() => pool.end());
    return pool;
  };

  t.test(
    'a database migrated under the old numbers runs only what is new, and records every migration anew',
    async (t) => {
      const before = temporaryDirectory(t);
      const now = files(migrationsDir('postgres'));
      for (const old of POSTGRES_BEFORE) {
        const current = now.find((file) => file.slice(4) === old.slice(4));
        if (current === undefined) throw new Error(`${old} has no migration now`);
        copyFileSync(join(migrationsDir('postgres'), current), join(before, old));
      }
      const upgraded = await poolOf(t);
      t.equal(await migratePostgres(upgraded, before), POSTGRES_BEFORE.length);
      t.equal(
        await migratePostgres(upgraded, migrationsDir('postgres')),
        now.length - POSTGRES_BEFORE.length,
        'only the twin new to PostgreSQL (002), and the migrations written since',
      );
      t.equal(await migratePostgres(upgraded, migrationsDir('postgres')), 0, 'and then nothing');
      const fresh = await poolOf(t);
      t.equal(await migratePostgres(fresh, migrationsDir('postgres')), now.length);
      t.same(await schemaOf(upgraded), await schemaOf(fresh), 'the same schema and records as a new database');
    },
  );

  t.test('a migration whose record was removed runs again', async (t) => {
    const pool = await poolOf(t);
    await migratePostgres(pool, migrationsDir('postgres'));
    await pool.query("DELETE FROM schema_migrations WHERE file = '002-idempotency-keys.sql'");
    t.equal(await migratePostgres(pool, migrationsDir('postgres')), 1);
  });
} else {
  t.test('a SQLite database of before the twins applies them and nothing else', async (t) => {
    const before = temporaryDirectory(t);
    for (const file of files(migrationsDir('sqlite')).filter((name) => name < '011')) {
      copyFileSync(join(migrationsDir('sqlite'), file), join(before, file));
    }
    const db = new Database(await newDatabase(t));
    t.teardown(() => db.close());
    t.equal(migrateSqlite(db, before), 10);
    t.equal(
      migrateSqlite(db, migrationsDir('sqlite')),
      files(migrationsDir('sqlite')).filter((name) => name >= '011').length,
      '011 and 012, which change nothing on SQLite, and those written since',
    );
    t.equal(db.pragma('user_version', { simple: true }), files(migrationsDir('sqlite')).length);
    t.equal(migrateSqlite(db, migrationsDir('sqlite')), 0);
  });
}
