/**
 * The benchmark's tables, seeded once through the project's own store; each server life gets a fresh
 * copy. SQLite: a file per table. PostgreSQL: an embedded server of the bench's own, a database per
 * table, copied with `TEMPLATE` and read into shared buffers (a copy is cold to PostgreSQL's cache).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { issueKey } from '../../src/auth/api-keys.js';
import { openPostgres } from '../../src/storage/postgres/index.js';
import { openSqlite } from '../../src/storage/sqlite/index.js';
import type { NewPetRecord, Storage } from '../../src/storage/types.js';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../local-servers.js';

export interface Table {
  pets: number;
  /** A valid API key in it. */
  key: string;
  /** A fresh copy of the seeded database for one server life (in `dir`): its DATABASE_URL. */
  freshCopy(dir: string): Promise<string>;
}

export interface Backend {
  name: string;
  seed(dir: string, pets: number): Promise<Table>;
  close(): Promise<void>;
}

/** 60% available, 30% pending, 10% sold (every tenth id), in a fixed pattern. */
function* newPets(count: number): Generator<NewPetRecord> {
  for (let id = 1; id <= count; id += 1) {
    const slot = id % 10;
    const status = slot === 0 ? 'sold' : slot >= 7 ? 'pending' : 'available';
    yield { name: `Pet ${id}`, categoryId: 1 + (id % 50), status };
  }
}

/** Fills a new database through the store and issues a key; returns the key. */
async function fill(storage: Storage, pets: number): Promise<string> {
  try {
    await storage.pets.createMany(newPets(pets));
    const account = await storage.accounts.createAccount('bench');
    return (await issueKey(storage.accounts, account.id)).key;
  } finally {
    await storage.close();
  }
}

/** Each copy is flushed to disk before its server starts, or the kernel writes it back meanwhile. */
export const sqliteBackend: Backend = {
  name: 'SQLite',
  async seed(dir, pets) {
    const file = join(dir, `seed-${pets}.db`);
    // Closing the last connection checkpoints the WAL into the file.
    const key = await fill(openSqlite({ filename: file }), pets);
    if (existsSync(`${file}-wal`)) throw new Error(`${file} was not checkpointed`);
    return {
      pets,
      key,
      async freshCopy(runDir) {
        const copy = join(runDir, 'run.db');
        for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true });
        copyFileSync(file, copy);
        const descriptor = openSync(copy, 'r+');
        try {
          fsyncSync(descriptor);
        } finally {
          closeSync(descriptor);
        }
        return copy;
      },
    };
  },
  close: async () => undefined,
};

/** Two live copies of the 1M table with its indexes are about 300 MB; the default is 128 MB. */
const POSTGRES_SETTINGS = ['shared_buffers=512MB'];
const PREWARM = `SELECT pg_prewarm(c.oid) FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')`;

export async function postgresBackend(): Promise<Backend> {
  const server = await startEmbeddedPostgres(POSTGRES_SETTINGS);
  const prefix = `petstore_bench_${randomBytes(4).toString('hex')}`;
  return {
    name: 'PostgreSQL',
    async seed(_dir, pets) {
      const seedName = `${prefix}_seed_${pets}`;
      await onServer(server.url, `CREATE DATABASE ${seedName}`);
      const url = databaseUrl(server.url, seedName);
      const key = await fill(await openPostgres({ connectionString: url, poolSize: 2, timeoutMs: 600_000 }), pets);
      await onServer(url, 'VACUUM ANALYZE', 'CREATE EXTENSION IF NOT EXISTS pg_prewarm');
      return {
        pets,
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
