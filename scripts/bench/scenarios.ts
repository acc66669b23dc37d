import type autocannon from 'autocannon';
import { type HttpRequest, send } from './http.js';

/** What the scenarios need to know of the database under test. */
export interface TableContext {
  pets: number;
  key: string;
  /** A `Link: rel="next"` URL far into the table (see findDeepPage). */
  deepPath: string;
}

export interface Scenario {
  name: string;
  summary: string;
  /** Also measured on the 1,000,000-pet table. */
  atScale: boolean;
  /** Changes the table: left out of the shared warm-up, and measured after the scenarios that read. */
  writes?: boolean;
  expect: { status: number; items?: number };
  /** The request (the one verified before measuring). */
  request(table: TableContext): HttpRequest;
  /** A different path for each request under load (e.g. a random id). */
  pathPerRequest?: (table: TableContext) => string;
}

const authorization = (key: string) => ({ authorization: `Bearer ${key}` });

function get(path: string, key?: string): HttpRequest {
  return { method: 'GET', path, headers: key === undefined ? {} : authorization(key) };
}

const randomId = (table: TableContext) => 1 + Math.floor(Math.random() * table.pets);

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'list-20',
    summary: 'GET /v1/pets (default limit 20)',
    atScale: true,
    expect: { status: 200, items: 20 },
    request: (table) => get('/v1/pets', table.key),
  },
  {
    name: 'list-100-status',
    summary: 'GET /v1/pets?limit=100&status=available',
    atScale: true,
    expect: { status: 200, items: 100 },
    request: (table) => get('/v1/pets?limit=100&status=available', table.key),
  },
  {
    name: 'list-deep-page',
    summary: 'a Link rel="next" URL 80% into the table: /v1/pets?limit=100&status=sold&cursor=...',
    atScale: true,
    expect: { status: 200, items: 100 },
    request: (table) => get(table.deepPath, table.key),
  },
  {
    name: 'get-one',
    summary: 'GET /v1/pets/{id}, a random existing id per request',
    atScale: true,
    expect: { status: 200 },
    request: (table) => get(`/v1/pets/${Math.ceil(table.pets / 2)}`, table.key),
    pathPerRequest: (table) => `/v1/pets/${randomId(table)}`,
  },
  {
    name: 'create',
    summary: 'POST /v1/pets {"name":"Rex","categoryId":7,"status":"pending"}',
    atScale: false,
    writes: true,
    expect: { status: 201 },
    request: (table) => ({
      method: 'POST',
      path: '/v1/pets',
      headers: { ...authorization(table.key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Rex', categoryId: 7, status: 'pending' }),
    }),
  },
  {
    name: 'no-key-401',
    summary: 'GET /v1/pets without Authorization',
    atScale: false,
    expect: { status: 401 },
    request: () => get('/v1/pets'),
  },
  {
    name: 'bad-limit-400',
    summary: 'GET /v1/pets?limit=1000',
    atScale: false,
    expect: { status: 400 },
    request: (table) => get('/v1/pets?limit=1000', table.key),
  },
];

export function loadRequest(scenario: Scenario, table: TableContext): autocannon.Request {
  const { pathPerRequest } = scenario;
  const request = scenario.request(table);
  // autocannon calls setupRequest whenever the key is present, even when it is undefined.
  if (pathPerRequest === undefined) return request;
  return { ...request, setupRequest: (next) => ({ ...next, path: pathPerRequest(table) }) };
}

const NEXT = /<([^>]+)>;\s*rel="next"/;

/**
 * Follows `Link: rel="next"` from `?limit=100&status=sold` until the page ends 80% into the table,
 * and returns the next URL: a deep page reached as a client reaches it (the cursor stays opaque).
 * Sold pets are one in ten, so this takes pets / 1000 requests.
 */
export async function findDeepPage(origin: string, pets: number, key: string): Promise<string> {
  let path = '/v1/pets?limit=100&status=sold';
  for (;;) {
    const response = await send(origin, get(path, key));
    const next = NEXT.exec(String(response.headers.link ?? ''))?.[1];
    const page = JSON.parse(response.body) as { id: number }[];
    if (response.status !== 200 || next === undefined)
      throw new Error(`no next page after ${path}: ${response.status}`);
    path = next;
    if ((page.at(-1)?.id ?? 0) >= pets * 0.8) return path;
  }
}

/**
 * The body's shape: key names and JSON types, array lengths, and the values of `code` and
 * `status` (the error code and HTTP status of an Error, a pet's status).
 */
export function shapeOf(value: unknown, key = ''): unknown {
  if (Array.isArray(value))
    return { length: value.length, items: [...new Set(value.map((item) => JSON.stringify(shapeOf(item))))] };
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, shapeOf(v, k)]),
    );
  }
  return key === 'code' || key === 'status' ? value : typeof value;
}

/** The status and body shape a server gives a scenario's request; throws unless as expected. */
export async function probe(origin: string, scenario: Scenario, table: TableContext): Promise<string> {
  const response = await send(origin, scenario.request(table));
  const body: unknown = JSON.parse(response.body);
  const items = Array.isArray(body) ? body.length : undefined;
  const { status, items: expectedItems } = scenario.expect;
  if (response.status !== status || (expectedItems !== undefined && items !== expectedItems)) {
    throw new Error(
      `${scenario.name}: expected ${status}${expectedItems === undefined ? '' : ` with ${expectedItems} items`}, ` +
        `got ${response.status}: ${response.body.slice(0, 300)}`,
    );
  }
  return JSON.stringify({ status: response.status, shape: shapeOf(body) });
}

/** The scenarios named (all when none are), failing on an unknown name. */
export function selectScenarios(names: string[] | undefined): Scenario[] {
  if (names === undefined) return [...SCENARIOS];
  for (const name of names) {
    if (!SCENARIOS.some((candidate) => candidate.name === name))
      throw new Error(`No scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  }
  // In SCENARIOS' order, whatever the order named: the report reads the same either way.
  return SCENARIOS.filter((scenario) => names.includes(scenario.name));
}
