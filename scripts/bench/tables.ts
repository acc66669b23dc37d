/**
 * The bench's table of 10,000 pets, made as an operator would: `petstore migrate`, an account and
 * a key from `petstore keys create`, the pets inserted in one statement. Each server life gets a
 * fresh copy. SQLite: a file. PostgreSQL: an embedded server of the bench's own, a database copied
 * with `TEMPLATE` and read into shared buffers (a copy is cold to PostgreSQL's cache).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import Database from 'better-sqlite3';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../local-servers.js';
import { projectRoot } from './settings.js';

export const PETS = 10_000;

export interface Table {
  pets: number;
  /** A valid API key in it, of every scope. */
  key: string;
  /** A fresh copy of the seeded database for one server life (in `dir`): its DATABASE_URL. */
  freshCopy(dir: string): Promise<string>;
}

export interface Backend {
  name: string;
  seed(dir: string): Promise<Table>;
  close(): Promise<void>;
}

/** 60% available, 30% pending, 10% sold (every tenth id), named and categorised by id. */
const status = (i: string) =>
  `CASE WHEN ${i} % 10 = 0 THEN 'sold' WHEN ${i} % 10 >= 7 THEN 'pending' ELSE 'available' END`;
/** `at`: the time of the seeding, as the project writes a new pet's created_at and updated_at. */
const values = (i: string, at: string) => `'Pet ' || ${i}, 1 + ${i} % 50, ${status(i)}, ${at}, ${at}`;
const COLUMNS = 'name, category_id, status, created_at, updated_at';

/** `petstore <args>` on `database`; its last line of output. */
function petstore(database: string, ...args: string[]): string {
  const out = execFileSync(process.execPath, [join(projectRoot, 'bin/petstore.js'), ...args], {
    env: { ...process.env, DATABASE_URL: database },
    encoding: 'utf8',
  });
  return out.trim().split('\n').at(-1) ?? '';
}

/** Migrates `database` and issues a key on it. */
function prepare(database: string): string {
  petstore(database, 'migrate');
  petstore(database, 'accounts', 'create', 'bench');
  return petstore(database, 'keys', 'create', 'bench');
}

/** Each copy is flushed to disk before its server starts, or the kernel writes it back meanwhile. */
export const sqliteBackend: Backend = {
  name: 'SQLite',
  async seed(dir) {
    const file = join(dir, 'seed.db');
    const key = prepare(file);
    const db = new Database(file);
    db.prepare(
      `INSERT INTO pets (${COLUMNS})
       WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       SELECT ${values('i', "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')")} FROM n`,
    ).run(PETS);
    db.close(); // checkpoints the WAL into the file
    return {
      pets: PETS,
      key,
      async freshCopy(runDir) {
        const copy = join(runDir, 'run.db');
        for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true });
        copyFileSync(file, copy);
        const descriptor = openSync(copy, 'r+');
        fsyncSync(descriptor);
        closeSync(descriptor);
        return copy;
      },
    };
  },
  close: async () => undefined,
};

const PREWARM = `SELECT pg_prewarm(c.oid) FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')`;

export async function postgresBackend(): Promise<Backend> {
  const server = await startEmbeddedPostgres(['shared_buffers=256MB']);
  const prefix = `petstore_bench_${randomBytes(4).toString('hex')}`;
  return {
    name: 'PostgreSQL',
    async seed() {
      const seedName = `${prefix}_seed`;
      await onServer(server.url, `CREATE DATABASE ${seedName}`);
      const url = databaseUrl(server.url, seedName);
      const key = prepare(url);
      await onServer(
        url,
        `INSERT INTO pets (${COLUMNS}) SELECT ${values('i', "date_trunc('milliseconds', now())")}
         FROM generate_series(1, ${PETS}) i`,
        'VACUUM ANALYZE',
        'CREATE EXTENSION IF NOT EXISTS pg_prewarm',
      );
      return {
        pets: PETS,
        key,
        async freshCopy(runDir) {
          const name = `${prefix}_run_${basename(runDir).replace(/\W/g, '_').toLowerCase()}`;
          await onServer(server.url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          await onServer(server.url, `CREATE DATABASE ${name} TEMPLATE ${seedName}`);
          const copy = databaseUrl(server.url, name);
          await onServer(copy, PREWARM);
          return copy;
        },
      };
    },
    close: () => server.remove(),
  };
}
