/**
 * Creates DATABASE_URL's PostgreSQL database when it does not exist yet (deploy/run-local.sh runs
 * this before the instances, which create their tables but not the database). It is created on the
 * same server, through its `postgres` database, as DATABASE_URL's user.
 */
import pg from 'pg';
import { databaseUrl, onServer } from './local-servers.js';

/** PostgreSQL's invalid_catalog_name: the database named in the URL does not exist. */
const NO_SUCH_DATABASE = '3D000';

/** The database DATABASE_URL names, created if missing: true when it was created now. */
async function createDatabase(url: string): Promise<boolean> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (name === '') throw new Error(`DATABASE_URL names no database (postgres://user@host:port/<database>)`);
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return false;
  } catch (error) {
    if ((error as { code?: string }).code !== NO_SUCH_DATABASE) throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
  // CREATE DATABASE takes no parameters: the name is quoted as an identifier instead.
  await onServer(databaseUrl(url, 'postgres'), `CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  return true;
}

const url = process.env.DATABASE_URL ?? '';
createDatabase(url).then(
  (created) => {
    if (created) process.stdout.write(`created the database ${new URL(url).pathname.slice(1)}\n`);
  },
  (error: unknown) => {
    process.stderr.write(`could not create DATABASE_URL's database: ${String(error)}\n`);
    process.exit(1);
  },
);
