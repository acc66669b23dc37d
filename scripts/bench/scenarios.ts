import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { encodeCursor } from '../../src/paging.js';
import type { Table } from './tables.js';

/** What a scenario needs to know of the table under test. */
type TableContext = Pick<Table, 'pets' | 'key'>;

interface Request {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface Scenario {
  name: string;
  /** Also measured on the 1,000,000-pet table. */
  atScale: boolean;
  /** Changes the table: left out of the shared warm-up, and measured after the reads. */
  writes?: boolean;
  expect: { status: number; items?: number };
  request(table: TableContext): Request;
  /** A different path for each request under load (a random id). */
  pathPerRequest?: (table: TableContext) => string;
}

const get = (path: string, key?: string): Request => ({
  method: 'GET',
  path,
  headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
});

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'list-20',
    atScale: true,
    expect: { status: 200, items: 20 },
    request: (table) => get('/v1/pets', table.key),
  },
  {
    name: 'list-100-status',
    atScale: true,
    expect: { status: 200, items: 100 },
    request: (table) => get('/v1/pets?limit=100&status=available', table.key),
  },
  {
    // The page after the sold pet 80% into the table (every tenth pet is sold), as a client
    // following `Link: rel="next"` would reach it.
    name: 'list-deep-page',
    atScale: true,
    expect: { status: 200, items: 100 },
    request: (table) => get(`/v1/pets?limit=100&status=sold&cursor=${encodeCursor(table.pets * 0.8)}`, table.key),
  },
  {
    name: 'get-one',
    atScale: true,
    expect: { status: 200 },
    request: (table) => get(`/v1/pets/${Math.ceil(table.pets / 2)}`, table.key),
    pathPerRequest: (table) => `/v1/pets/${1 + Math.floor(Math.random() * table.pets)}`,
  },
  {
    name: 'create',
    atScale: false,
    writes: true,
    expect: { status: 201 },
    request: ({ key }) => ({
      method: 'POST',
      path: '/v1/pets',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 7, status: 'pending' }),
    }),
  },
  {
    name: 'no-key-401',
    atScale: false,
    expect: { status: 401 },
    request: () => get('/v1/pets'),
  },
  {
    name: 'bad-limit-400',
    atScale: false,
    expect: { status: 400 },
    request: (table) => get('/v1/pets?limit=1000', table.key),
  },
];

export function scenarioNamed(name: string): Scenario {
  const found = SCENARIOS.find((scenario) => scenario.name === name);
  if (found === undefined) throw new Error(`No scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  return found;
}

export function loadRequest(scenario: Scenario, table: TableContext): autocannon.Request {
  const { pathPerRequest } = scenario;
  const request = scenario.request(table);
  // autocannon calls setupRequest whenever the key is present, even when it is undefined.
  if (pathPerRequest === undefined) return request;
  return { ...request, setupRequest: (next) => ({ ...next, path: pathPerRequest(table) }) };
}

/** A body's shape: key names and JSON types, array lengths, and the values of `code` and `status`. */
export function shapeOf(value: unknown, key = ''): unknown {
  if (Array.isArray(value))
    return { length: value.length, items: [...new Set(value.map((item) => JSON.stringify(shapeOf(item))))] };
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, shapeOf(v, k)]),
    );
  return key === 'code' || key === 'status' ? value : typeof value;
}

/** The status and body shape a server gives a scenario's request; throws unless as expected. */
export async function probe(origin: string, scenario: Scenario, table: TableContext): Promise<string> {
  const send = async () => {
    const { path, ...init } = scenario.request(table);
    const response = await fetch(new URL(path, origin), init);
    return { status: response.status, body: await response.text() };
  };
  let response = await send();
  // A fresh project process may still shed (overload protection) after its first 200: not yet.
  for (let tries = 0; response.status === 503 && tries < 50; tries += 1) {
    await sleep(100);
    response = await send();
  }
  const body: unknown = JSON.parse(response.body);
  const { status, items } = scenario.expect;
  if (response.status !== status || (items !== undefined && (body as unknown[]).length !== items))
    throw new Error(`${scenario.name}: expected ${status}, got ${response.status}: ${response.body.slice(0, 300)}`);
  return JSON.stringify({ status, shape: shapeOf(body) });
}
