import Database from 'better-sqlite3';
import { backend, newDatabase, type Teardown } from './backend.js';
import { startOwnPostgres } from './postgres.js';

/**
 * A database to serve from, what makes it unable to serve for a while, and what ends it. On
 * PostgreSQL a server of this test's own, which it stops: the run's shared one serves other files.
 */
export async function outage(
  t: Teardown,
): Promise<{ databaseUrl: string; begin: () => Promise<void>; end: () => Promise<void> }> {
  if (backend === 'sqlite') {
    const databaseUrl = await newDatabase(t);
    // Another process holding SQLite's write lock: the server's writes are 503s until it lets go.
    let other: Database.Database | undefined;
    return {
      databaseUrl,
      begin: async () => {
        other = new Database(databaseUrl);
        other.exec('BEGIN IMMEDIATE');
      },
      end: async () => {
        other?.exec('ROLLBACK');
        other?.close();
      },
    };
  }
  const server = await startOwnPostgres(t);
  return { databaseUrl: await server.newDatabase(t), begin: () => server.stop(), end: () => server.start() };
}
