import t from 'tap';
import type autocannon from 'autocannon';
import { expectedResponses, loadRequests, SCENARIOS, scenarioNamed, shapeOf } from '../scripts/bench/scenarios.js';

// A benchmark round runs its scenarios on one pair of servers, so which of them write decides what
// the servers have been through when measured; the servers must answer them alike to be compared.

t.test('a scenario is found by its name; an unknown name is an error that lists the known ones', async (t) => {
  t.equal(scenarioNamed('create').expect.status, 201);
  t.throws(() => scenarioNamed('get-two'), /No scenario get-two; known: list-20, .*create/);
});

t.test('only the writes change the table, so the shared warm-up and the reads leave it as seeded', async (t) => {
  t.same(
    SCENARIOS.filter((scenario) => scenario.writes === true).map((scenario) => scenario.name),
    ['create', 'update', 'order-complete'],
  );
  for (const scenario of SCENARIOS.filter((candidate) => candidate.writes !== true)) {
    t.equal(scenario.request({ pets: 10, key: 'psk_x' }).method, 'GET', scenario.name);
    t.equal(scenario.then, undefined, `${scenario.name} is no chain`);
  }
});

const table = { pets: 10, key: 'psk_x' };
type SetupRequest = (request: autocannon.Request, context: object) => autocannon.Request | undefined;
type OnResponse = (status: number, body: string, context: object) => void;

/** What autocannon would send: `setupRequest` as it calls it, with the defaults it merges in. */
function built(request: autocannon.Request | undefined, context: object): autocannon.Request | undefined {
  const merged = { hostname: 'localhost', port: 80, ...request };
  return request?.setupRequest === undefined ? merged : (request.setupRequest as SetupRequest)(merged, context);
}

/** autocannon handing a request's answer to its `onResponse`. */
function answer(request: autocannon.Request | undefined, status: number, body: object, context: object): void {
  (request?.onResponse as OnResponse)(status, JSON.stringify(body), context);
}

t.test('an update renames a random pet, to a new name each time so that each request writes', async (t) => {
  const [request] = loadRequests(scenarioNamed('update'), table);
  const first = built(request, {});
  const second = built(request, {});
  t.match(first, { method: 'PATCH', path: /^\/v1\/pets\/([1-9]|10)$/, hostname: 'localhost' });
  t.match(first?.headers, { 'content-type': 'application/merge-patch+json' });
  t.not(first?.body, second?.body);
  t.match(JSON.parse(String(first?.body)), { name: /^Rexy \w+$/ });
});

t.test('an order chain: a new pet, an order for it, the order completed, each from the answer before', async (t) => {
  const scenario = scenarioNamed('order-complete');
  const [create, place, complete] = loadRequests(scenario, table);
  const context = {};
  t.match(built(create, context), { method: 'POST', path: '/v1/pets' });
  answer(create, 201, { id: 42, name: 'Rex', categoryId: 7, status: 'available' }, context);
  const order = built(place, context);
  t.match(order, { method: 'POST', path: '/v1/store/orders', hostname: 'localhost', port: 80 });
  t.same(JSON.parse(String(order?.body)), { petId: 42 });
  answer(place, 201, { id: 7, petId: 42, status: 'placed' }, context);
  const completed = built(complete, context);
  t.match(completed, { method: 'PATCH', path: '/v1/store/orders/7' });
  t.same(JSON.parse(String(completed?.body)), { status: 'completed' });
  answer(place, 409, { code: 'pet_not_available' }, context);
  t.equal(built(complete, context), undefined, 'after a refusal the chain starts again');
  t.equal(expectedResponses(scenario, { 200: 5, 201: 10, 409: 1 }), 15, '201s and 200s are expected, a 409 not');
});

t.test('two servers are comparable only if their bodies have the same shape, whatever the values', async (t) => {
  const pet = { id: 1, name: 'Rex', categoryId: 7, status: 'sold' };
  t.same(
    shapeOf([pet, { ...pet, id: 2, name: 'Tom' }]),
    shapeOf([{ status: 'sold', categoryId: 3, name: 'A', id: 9 }, pet]),
  );
  t.not(JSON.stringify(shapeOf([pet])), JSON.stringify(shapeOf([pet, pet])), 'a different page length');
  t.not(JSON.stringify(shapeOf(pet)), JSON.stringify(shapeOf({ ...pet, id: '1' })), 'an id as a string');
  t.not(JSON.stringify(shapeOf(pet)), JSON.stringify(shapeOf({ ...pet, status: 'pending' })), 'another status');
  const error = { code: 'unauthorized', message: 'Missing or invalid API key', status: 401 };
  t.not(JSON.stringify(shapeOf(error)), JSON.stringify(shapeOf({ ...error, code: 'invalid_request' })), 'another code');
  t.not(JSON.stringify(shapeOf(error)), JSON.stringify(shapeOf({ ...error, extra: 1 })), 'an extra field');
});
