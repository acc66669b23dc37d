import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type autocannon from 'autocannon';
import {
  loadRequests,
  probe,
  SCENARIOS,
  type Scenario,
  scenarioNamed,
  shapeOf,
  VERSION_PAIRS,
  versionPairNamed,
} from '../scripts/bench/scenarios.js';
import { BARE, PROJECT, withServer } from '../scripts/bench/servers.js';
import { contractShapes, pageItems, shapesOf } from '../scripts/bench/shapes.js';
import { sqliteBackend } from '../scripts/bench/tables.js';

// The bench compares the project with the bare reference only where both give the same answer:
// this runs both as the bench does (a table made with `petstore`, each server a child process).

t.test('the project and the bare reference answer every scenario alike on the seeded table', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-scenarios-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const role of ['project', 'bare']) mkdirSync(join(dir, role));
  const table = await sqliteBackend.seed(dir);
  t.match(table.key, /^\S{20,}$/, 'a key issued by `petstore keys create`');
  const answers = async (spec: typeof PROJECT, scenarios: readonly Scenario[]) =>
    withServer(spec, table, join(dir, spec.name), async ({ origin }) => {
      const probed = [];
      for (const scenario of scenarios) probed.push(await probe(origin, scenario, table));
      return probed;
    });
  // The versions part's requests, v1's and v2's, each answered as expected by the project.
  const pairs = VERSION_PAIRS.flatMap(({ v1, v2 }) => [v1, v2]);
  const [project, bare] = [await answers(PROJECT, [...SCENARIOS, ...pairs]), await answers(BARE, SCENARIOS)];
  t.same(bare, project.slice(0, SCENARIOS.length));
  const [list20, , getOne] = project;
  const { envelope } = contractShapes();
  t.match(list20, envelope ? /"data":\{"length":20/ : /"status":200,"shape":\{"length":20/, 'list-20: 20 pets');
  t.match(getOne, envelope ? /"data":\{"length":1,/ : /"status":200,"shape":\{"length":1,/, 'get-one: one pet');
  const [v1List, v2List, v1Pet] = project.slice(SCENARIOS.length);
  t.match(v1List, /"status":200,"shape":\{"length":20,/, 'v1 lists a bare array');
  t.not(v1List, v2List, 'without the timestamps v2 added');
  t.notMatch(v1Pet, /createdAt|length/, 'v1 gets one pet, not a page');
  await t.rejects(probe('http://127.0.0.1:1', scenarioNamed('get-one'), table), 'an unreachable server is an error');
});

t.test('the bare reference answers in the shapes the contract gives, whichever they are', async (t) => {
  const listPets = (page: object, errors: string) => ({
    paths: {
      '/pets': {
        get: {
          responses: {
            '200': { content: { 'application/json': { schema: page } } },
            '400': { content: { [errors]: { schema: {} } } },
          },
        },
      },
    },
  });
  t.same(shapesOf(listPets({ type: 'array' }, 'application/json')), { envelope: false, problem: false });
  t.same(shapesOf(listPets({ type: 'object', properties: { data: {} } }, 'application/problem+json')), {
    envelope: true,
    problem: true,
  });
  t.throws(() => shapesOf({ paths: {} }), /no listPets 200/);
  t.same(pageItems([1, 2]), [1, 2]);
  t.same(pageItems({ data: [1], nextCursor: null }), [1]);
  t.equal(pageItems({ code: 'not_found' }), undefined, 'an error is no page');
});

t.test('a scenario is found by its name; an unknown name is an error that lists the known ones', async (t) => {
  t.equal(scenarioNamed('create').expect.status, 201);
  t.throws(() => scenarioNamed('get-two'), /No scenario get-two; known: list-20, .*create/);
  t.equal(versionPairNamed('get-one').v1.expect.status, 200);
  t.throws(() => versionPairNamed('no-key-401'), /in both versions; known: list-20, get-one, create/);
});

t.test('get-one asks for a random pet and create a fresh key, each request, in either version', async (t) => {
  const table = { pets: 10, key: 'psk_x' };
  const made = (scenario: Scenario) => {
    const [request] = loadRequests(scenario, table);
    const setup = request?.setupRequest as (r: object) => autocannon.Request;
    return [setup({ hostname: 'localhost' }), setup({ hostname: 'localhost' })];
  };
  const getOne = versionPairNamed('get-one');
  t.match(made(getOne.v2)[0], { method: 'GET', path: /^\/v2\/pets\?id=([1-9]|10)$/, hostname: 'localhost' });
  t.match(made(getOne.v1)[0], { method: 'GET', path: /^\/v1\/pets\/([1-9]|10)$/ });
  t.same(scenarioNamed('get-one'), getOne.v2, 'the bench against bare measures v2');
  t.match(made(versionPairNamed('create').v1)[0], {
    path: '/v1/pets',
    headers: { 'idempotency-key': /^[0-9a-f-]{36}$/ },
  });
  const [one, two] = made(scenarioNamed('create'));
  t.match(one, { method: 'POST', headers: { 'idempotency-key': /^[0-9a-f-]{36}$/ } });
  t.not(one?.headers?.['idempotency-key'], two?.headers?.['idempotency-key']);
  t.equal(loadRequests(scenarioNamed('list-20'), table)[0]?.setupRequest, undefined, 'a fixed request is sent as is');
});

t.test('two servers are comparable only if their bodies have the same shape, whatever the values', async (t) => {
  const pet = { id: 1, name: 'Rex', categoryId: 7, status: 'sold' };
  t.same(shapeOf([pet, { ...pet, id: 2 }]), shapeOf([{ status: 'sold', categoryId: 3, name: 'A', id: 9 }, pet]));
  t.not(JSON.stringify(shapeOf([pet])), JSON.stringify(shapeOf([pet, pet])), 'a different page length');
  t.not(JSON.stringify(shapeOf(pet)), JSON.stringify(shapeOf({ ...pet, id: '1' })), 'an id as a string');
  const error = { code: 'unauthorized', message: 'Missing or invalid API key', status: 401 };
  t.not(JSON.stringify(shapeOf(error)), JSON.stringify(shapeOf({ ...error, code: 'invalid_request' })), 'another code');
});
