import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { loadConfig } from '../../src/config/environment.js';
import { type OpenOptions, openStorage } from '../../src/storage/index.js';
import type { Storage } from '../../src/storage/types.js';
import { sharedPostgres } from './postgres.js';

/** What the helpers need of a tap test: a place to clean up. */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * The backend the behaviour suites run against: `npm test` runs them once on SQLite and once with
 * `PETSTORE_TEST_BACKEND=postgres`.
 */
export const backend: 'sqlite' | 'postgres' = process.env.PETSTORE_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

export function temporaryDirectory(t: Teardown): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A new, empty database on the backend under test: its `DATABASE_URL`. */
export async function newDatabase(t: Teardown): Promise<string> {
  if (backend === 'sqlite') return join(temporaryDirectory(t), 'petstore.db');
  return (await sharedPostgres()).newDatabase(t);
}

/** Opens a `DATABASE_URL` as the server does. */
export function openDatabase(databaseUrl: string, options: OpenOptions = {}): Promise<Storage> {
  return openStorage(loadConfig({ DATABASE_URL: databaseUrl }).database, options);
}

export type TableCounts = Record<string, number>;

type Row = Record<string, number | string>;

/** Reads a database behind the server's back. The tables and columns are the same on both backends. */
export interface DatabaseProbe {
  query<R>(sql: string): Promise<R[]>;
  /** The rows in every table, and the last id each table handed out. */
  snapshot(): Promise<TableCounts>;
}

const TABLES = ['pets', 'accounts', 'api_keys', 'idempotency_keys'];
/**
 * The ids a request hands out: of the resources clients create. The events a change writes, and
 * the delivery worker's rows, which change in the background, are left out.
 */
const RESOURCES = new Set([...TABLES, 'orders', 'webhook_endpoints']);
const COUNTS = `SELECT ${TABLES.map((name) => `(SELECT count(*) FROM ${name}) AS ${name}`).join(', ')}`;

/** `writable`: the probe may also change the database (to make rows an older server would have left). */
export async function probeDatabase(
  t: Teardown,
  databaseUrl: string,
  { writable = false } = {},
): Promise<DatabaseProbe> {
  let query: DatabaseProbe['query'];
  let sequences: string;
  if (backend === 'sqlite') {
    const db = new Database(databaseUrl, { readonly: !writable, fileMustExist: true });
    t.teardown(() => db.close());
    query = async <R>(sql: string) => {
      const statement = db.prepare(sql);
      return (statement.reader ? statement.all() : (statement.run(), [])) as R[];
    };
    sequences = 'SELECT name, seq FROM sqlite_sequence';
  } else {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    t.teardown(() => client.end());
    query = async <R>(sql: string) => (await client.query(sql)).rows as R[];
    sequences = `SELECT replace(sequencename, '_id_seq', '') AS name, coalesce(last_value, 0) AS seq FROM pg_sequences`;
  }
  return {
    query,
    snapshot: async () => {
      const [counts] = await query<Row>(COUNTS);
      const snapshot: TableCounts = {};
      // node-postgres reads count(*) and bigint as strings.
      for (const [name, count] of Object.entries(counts ?? {})) snapshot[name] = Number(count);
      for (const { name, seq } of await query<{ name: string; seq: number | string }>(sequences)) {
        if (RESOURCES.has(name)) snapshot[`${name} ids`] = Number(seq);
      }
      return snapshot;
    },
  };
}
