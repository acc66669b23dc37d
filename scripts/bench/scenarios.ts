import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { pageItems } from './shapes.js';
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

/** The newest version, which the bench measures against the bare reference. */
export const NEWEST = '/v2';

const randomPet = (table: TableContext) => 1 + Math.floor(Math.random() * table.pets);

/** A create under `base`, with an Idempotency-Key (v2 requires one; a fresh key each request under load). */
function create(base: string): Scenario {
  return {
    name: 'create',
    writes: true,
    expect: { status: 201 },
    request: ({ key }) => ({
      method: 'POST',
      path: `${base}/pets`,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      body: JSON.stringify({ name: 'Rex', categoryId: 7, status: 'pending' }),
    }),
    perRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } }),
  };
}

const list20 = (base: string): Scenario => ({
  name: 'list-20',
  expect: { status: 200, items: 20 },
  request: (table) => get(`${base}/pets`, table.key),
});

/** v2 reads one pet as a page of it (`GET /pets?id=`); v1 still has getPet. */
const getOne = (path: (id: number) => string, items?: number): Scenario => ({
  name: 'get-one',
  expect: { status: 200, ...(items === undefined ? {} : { items }) },
  request: (table) => get(path(Math.ceil(table.pets / 2)), table.key),
  perRequest: (request, table) => ({ ...request, path: path(randomPet(table)) }),
});

/** The scenarios both servers answer, the project and the bare reference (issue 38), on the newest version. */
export const SCENARIOS: readonly Scenario[] = [
  list20(NEWEST),
  {
    name: 'list-100-status',
    expect: { status: 200, items: 100 },
    request: (table) => get(`${NEWEST}/pets?limit=100&status=available`, table.key),
  },
  getOne((id) => `${NEWEST}/pets?id=${id}`, 1),
  create(NEWEST),
  { name: 'no-key-401', expect: { status: 401 }, request: () => get(`${NEWEST}/pets`) },
  { name: 'bad-limit-400', expect: { status: 400 }, request: (table) => get(`${NEWEST}/pets?limit=1000`, table.key) },
];

/** One operation as v1 asks it (answered through the version changes) and as v2 does: the versions part. */
export interface VersionPair {
  name: string;
  v1: Scenario;
  v2: Scenario;
}

/** list-20, get-one by id and create (both with an Idempotency-Key, so both claim one), in v1 and v2. */
export const VERSION_PAIRS: readonly VersionPair[] = [
  { name: 'list-20', v1: list20('/v1'), v2: list20(NEWEST) },
  { name: 'get-one', v1: getOne((id) => `/v1/pets/${id}`), v2: getOne((id) => `${NEWEST}/pets?id=${id}`, 1) },
  { name: 'create', v1: create('/v1'), v2: create(NEWEST) },
];

export function scenarioNamed(name: string): Scenario {
  const found = SCENARIOS.find((scenario) => scenario.name === name);
  if (found === undefined) throw new Error(`No scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  return found;
}

export function versionPairNamed(name: string): VersionPair {
  const found = VERSION_PAIRS.find((pair) => pair.name === name);
  if (found === undefined)
    throw new Error(`No scenario ${name} in both versions; known: ${VERSION_PAIRS.map((p) => p.name).join(', ')}`);
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

/**
 * A body's shape: key names and JSON types, array lengths, and the values of `code` and `status`
 * (a page as an array or an envelope, an error as an Error or a problem detail: whichever it is).
 */
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
  if (response.status !== status || (items !== undefined && pageItems(body)?.length !== items))
    throw new Error(`${scenario.name}: expected ${status}, got ${response.status}: ${response.body.slice(0, 300)}`);
  return JSON.stringify({ status, shape: shapeOf(body) });
}
