import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
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
  /** Changes the table: left out of the shared warm-up, and measured after the reads. */
  writes?: boolean;
  expect: { status: number; items?: number };
  request(table: TableContext): Request;
  /** Each request under load made anew from the first (a random id, a fresh header). */
  perRequest?: (request: Request, table: TableContext) => Request;
}

const get = (path: string, key?: string): Request => ({
  method: 'GET',
  path,
  headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
});

const createPet = (key: string): Request => ({
  method: 'POST',
  path: '/v1/pets',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'Rex', categoryId: 7, status: 'pending' }),
});

/** The scenarios both servers answer, the project and the bare reference (issue 38). */
export const SCENARIOS: readonly Scenario[] = [
  { name: 'list-20', expect: { status: 200, items: 20 }, request: (table) => get('/v1/pets', table.key) },
  {
    name: 'list-100-status',
    expect: { status: 200, items: 100 },
    request: (table) => get('/v1/pets?limit=100&status=available', table.key),
  },
  {
    name: 'get-one',
    expect: { status: 200 },
    request: (table) => get(`/v1/pets/${Math.ceil(table.pets / 2)}`, table.key),
    perRequest: (request, table) => ({ ...request, path: `/v1/pets/${1 + Math.floor(Math.random() * table.pets)}` }),
  },
  { name: 'create', writes: true, expect: { status: 201 }, request: ({ key }) => createPet(key) },
  { name: 'no-key-401', expect: { status: 401 }, request: () => get('/v1/pets') },
  { name: 'bad-limit-400', expect: { status: 400 }, request: (table) => get('/v1/pets?limit=1000', table.key) },
];

/** A create that claims a fresh Idempotency-Key each time: the project's alone (costs.ts). */
export const IDEMPOTENT_CREATE: Scenario = {
  name: 'create-idempotent',
  writes: true,
  expect: { status: 201 },
  request: ({ key }) => createPet(key),
  perRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } }),
};

export function scenarioNamed(name: string): Scenario {
  const found = [...SCENARIOS, IDEMPOTENT_CREATE].find((scenario) => scenario.name === name);
  if (found === undefined) throw new Error(`No scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  return found;
}

/** What autocannon sends for the scenario on each connection. */
export function loadRequests(scenario: Scenario, table: TableContext): autocannon.Request[] {
  const { perRequest } = scenario;
  const request: autocannon.Request = scenario.request(table);
  // autocannon calls setupRequest whenever the key is present, even when it is undefined.
  if (perRequest === undefined) return [request];
  return [{ ...request, setupRequest: (next) => ({ ...next, ...perRequest(scenario.request(table), table) }) }];
}

/**
 * A request of the scenario as its bytes on the wire (HTTP/1.1), made anew as under load;
 * `close` asks the server to close the connection.
 */
export function wireRequest(scenario: Scenario, table: TableContext, { close = false } = {}): string {
  const first = scenario.request(table);
  const { method, path, headers, body } = scenario.perRequest?.(first, table) ?? first;
  const head = Object.entries({
    host: 'localhost',
    ...headers,
    ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
    ...(close ? { connection: 'close' } : {}),
  }).map(([name, value]) => `${name}: ${value}\r\n`);
  return `${method} ${path} HTTP/1.1\r\n${head.join('')}\r\n${body ?? ''}`;
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

/** The status and body shape a server gives the scenario's request; throws unless as expected. */
export async function probe(origin: string, scenario: Scenario, table: TableContext): Promise<string> {
  const { path, ...init } = scenario.request(table);
  const send = async () => {
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
