/**
 * The benchmark's PostgreSQL, embedded on a free port and removed after. Each table is seeded once
 * into a database of its own; each server life gets a `TEMPLATE` copy, read into shared buffers
 * before the server starts: a copy is a new file, cold to PostgreSQL's cache.
 */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { openPostgres } from '../../src/storage/postgres/index.js';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../local-servers.js';
import { type Backend, fill } from './table.js';

/** Two live copies of the 1M table with its indexes are about 300 MB; the default is 128 MB. */
const SETTINGS = ['shared_buffers=512MB'];
const PREWARM = `SELECT pg_prewarm(c.oid) FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')`;

/** `_server` is always undefined (the bench starts its own); it goes when instructions.ts stops passing it. */
export async function postgresBackend(_server: undefined, log: (message: string) => void): Promise<Backend> {
  const own = await startEmbeddedPostgres(SETTINGS);
  log(`PostgreSQL: embedded, ${SETTINGS.join(' ')}`);
  const prefix = `petstore_bench_${randomBytes(4).toString('hex')}`;
  return {
    name: 'PostgreSQL',
    async seed(_dir, count) {
      const seedName = `${prefix}_seed_${count}`;
      await onServer(own.url, `CREATE DATABASE ${seedName}`);
      const url = databaseUrl(own.url, seedName);
      const key = await fill(await openPostgres({ connectionString: url, poolSize: 2, timeoutMs: 600_000 }), count);
      await onServer(url, 'VACUUM ANALYZE', 'CREATE EXTENSION IF NOT EXISTS pg_prewarm');
      return {
        key,
        async freshCopy(runDir) {
          const name = `${prefix}_run_${basename(runDir).replace(/\W/g, '_').toLowerCase()}`;
          await onServer(own.url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          await onServer(own.url, `CREATE DATABASE ${name} TEMPLATE ${seedName}`);
          const copy = databaseUrl(own.url, name);
          await onServer(copy, PREWARM);
          return copy;
        },
      };
    },
    close: () => own.remove(),
  };
}
