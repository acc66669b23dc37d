import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { cursorScope, encodeCursor } from '../../src/handlers/cursors.js';
import type { Table } from './tables.js';

/** What a scenario needs to know of the table under test. */
type TableContext = Pick<Table, 'pets' | 'key'>;

interface Request {
  method: 'GET' | 'POST' | 'PATCH';
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
  /** A different body for each request under load (a write that always changes something). */
  bodyPerRequest?: () => string;
  /**
   * Requests that follow the first, in turn, each made from the body of the answer to the one
   * before: a chain, which each connection repeats. A chain is compared and measured whole.
   */
  then?: readonly Step[];
}

/** The answer a step of a chain is made from: a pet or an order. */
interface Made {
  id: number;
}

interface Step {
  status: number;
  request(previous: Made, table: TableContext): Request;
}

const get = (path: string, key?: string): Request => ({
  method: 'GET',
  path,
  headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
});

const send = (method: 'POST' | 'PATCH', path: string, key: string, body: object): Request => ({
  method,
  path,
  headers: {
    authorization: `Bearer ${key}`,
    'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
  },
  body: JSON.stringify(body),
});

const randomPet = (table: TableContext) => `/v1/pets/${1 + Math.floor(Math.random() * table.pets)}`;

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
    request: (table) =>
      get(
        `/v1/pets?limit=100&status=sold&cursor=${encodeCursor(table.pets * 0.8, cursorScope('/v1/pets', { status: 'sold' }))}`,
        table.key,
      ),
  },
  {
    name: 'get-one',
    atScale: true,
    expect: { status: 200 },
    request: (table) => get(`/v1/pets/${Math.ceil(table.pets / 2)}`, table.key),
    pathPerRequest: randomPet,
  },
  {
    name: 'create',
    atScale: false,
    writes: true,
    expect: { status: 201 },
    request: ({ key }) => send('POST', '/v1/pets', key, { name: 'Rex', categoryId: 7, status: 'pending' }),
  },
  {
    // A rename, always allowed, to a name of its own each time: a patch that changes nothing writes nothing.
    name: 'update',
    atScale: false,
    writes: true,
    expect: { status: 200 },
    request: (table) => send('PATCH', `/v1/pets/${Math.ceil(table.pets / 2)}`, table.key, { name: 'Rexy' }),
    pathPerRequest: randomPet,
    bodyPerRequest: () => JSON.stringify({ name: `Rexy ${Math.random().toString(36).slice(2, 10)}` }),
  },
  {
    // An order needs an available pet and its completion sells it for good, so each chain brings
    // its own: a new pet (available), an order for it, the order completed (docs/performance.md).
    name: 'order-complete',
    atScale: false,
    writes: true,
    expect: { status: 201 },
    request: ({ key }) => send('POST', '/v1/pets', key, { name: 'Rex', categoryId: 7 }),
    then: [
      { status: 201, request: (pet, { key }) => send('POST', '/v1/store/orders', key, { petId: pet.id }) },
      {
        status: 200,
        request: (order, { key }) => send('PATCH', `/v1/store/orders/${order.id}`, key, { status: 'completed' }),
      },
    ],
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

/** The scenario's requests, in the order they are sent: one, or the steps of a chain. */
function stepsOf(scenario: Scenario): Step[] {
  const first = { status: scenario.expect.status, request: (_: Made, table: TableContext) => scenario.request(table) };
  return [first, ...(scenario.then ?? [])];
}

/** Of the responses counted by status, those a request of the scenario should have had. */
export function expectedResponses(scenario: Scenario, statuses: Record<string, number>): number {
  const expected = new Set(stepsOf(scenario).map((step) => String(step.status)));
  return [...expected].reduce((sum, status) => sum + (statuses[status] ?? 0), 0);
}

/** A chain's context on one connection: the answer to its last request. */
interface ChainContext {
  previous?: Made | undefined;
}

/** What autocannon sends for the scenario on each connection, in turn. */
export function loadRequests(scenario: Scenario, table: TableContext): autocannon.Request[] {
  const { pathPerRequest, bodyPerRequest, then = [] } = scenario;
  const request: autocannon.Request = scenario.request(table);
  // autocannon calls setupRequest whenever the key is present, even when it is undefined.
  const first: autocannon.Request =
    pathPerRequest === undefined && bodyPerRequest === undefined
      ? request
      : {
          ...request,
          setupRequest: (next) => ({
            ...next,
            path: pathPerRequest?.(table) ?? next.path,
            body: bodyPerRequest?.() ?? next.body,
          }),
        };
  if (then.length === 0) return [first];
  const remember = (status: number, body: string, context: ChainContext) => {
    context.previous = status < 300 ? (JSON.parse(body) as Made) : undefined;
  };
  return [
    { ...first, onResponse: remember },
    ...then.map((step): autocannon.Request => ({
      onResponse: remember,
      // Returning nothing (the step before failed) starts the chain again, with a new context.
      setupRequest: (next, { previous }: ChainContext) =>
        (previous === undefined ? undefined : { ...next, ...step.request(previous, table) }) as autocannon.Request,
    })),
  ];
}

/**
 * A request of the scenario as its bytes on the wire (HTTP/1.1; a chain's first step), with its
 * own path and body when the scenario varies them; `close` asks the server to close the connection.
 */
export function wireRequest(scenario: Scenario, table: TableContext, { close = false } = {}): string {
  const { method, path, headers, body: fixedBody } = scenario.request(table);
  const body = scenario.bodyPerRequest?.() ?? fixedBody;
  const head = Object.entries({
    host: 'localhost',
    ...headers,
    ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
    ...(close ? { connection: 'close' } : {}),
  }).map(([name, value]) => `${name}: ${value}\r\n`);
  return `${method} ${scenario.pathPerRequest?.(table) ?? path} HTTP/1.1\r\n${head.join('')}\r\n${body ?? ''}`;
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

/**
 * The status and body shape a server gives each of a scenario's requests; throws unless as expected.
 * A chain is sent once, each step made from the answer before.
 */
export async function probe(origin: string, scenario: Scenario, table: TableContext): Promise<string> {
  const answers: { status: number; shape: unknown }[] = [];
  let previous: Made = { id: 0 };
  for (const step of stepsOf(scenario)) {
    const { path, ...init } = step.request(previous, table);
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
    const { items } = scenario.expect;
    if (response.status !== step.status || (items !== undefined && (body as unknown[]).length !== items))
      throw new Error(
        `${scenario.name}: expected ${step.status}, got ${response.status}: ${response.body.slice(0, 300)}`,
      );
    answers.push({ status: step.status, shape: shapeOf(body) });
    previous = body as Made;
  }
  return JSON.stringify(answers);
}
