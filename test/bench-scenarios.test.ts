import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type autocannon from 'autocannon';
import {
  IDEMPOTENT_CREATE,
  loadRequests,
  probe,
  SCENARIOS,
  scenarioNamed,
  shapeOf,
} from '../scripts/bench/scenarios.js';
import { BARE, PROJECT, withServer } from '../scripts/bench/servers.js';
import { sqliteBackend } from '../scripts/bench/tables.js';

// The bench compares the project with the bare reference only where both give the same answer:
// this runs both as the bench does (a table made with `petstore`, each server a child process).

t.test('the project and the bare reference answer every scenario alike on the seeded table', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-scenarios-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const role of ['project', 'bare']) mkdirSync(join(dir, role));
  const table = await sqliteBackend.seed(dir);
  t.match(table.key, /^\S{20,}$/, 'a key issued by `petstore keys create`');
  const answers = async (spec: typeof PROJECT) =>
    withServer(spec, table, join(dir, spec.name), async ({ origin }) => {
      const probed = [];
      for (const scenario of SCENARIOS) probed.push(await probe(origin, scenario, table));
      return probed;
    });
  const [project, bare] = [await answers(PROJECT), await answers(BARE)];
  t.same(bare, project);
  t.match(project[0], /"status":200,"shape":\{"length":20/, 'list-20 is a page of 20 pets');
  await t.rejects(probe('http://127.0.0.1:1', scenarioNamed('get-one'), table), 'an unreachable server is an error');
});

t.test('a scenario is found by its name; an unknown name is an error that lists the known ones', async (t) => {
  t.equal(scenarioNamed('create').expect.status, 201);
  t.throws(() => scenarioNamed('get-two'), /No scenario get-two; known: list-20, .*create/);
});

t.test('get-one asks for a random pet and the idempotent create a fresh key, each request', async (t) => {
  const table = { pets: 10, key: 'psk_x' };
  const made = (name: string) => {
    const [request] = loadRequests(name === IDEMPOTENT_CREATE.name ? IDEMPOTENT_CREATE : scenarioNamed(name), table);
    const setup = request?.setupRequest as (r: object) => autocannon.Request;
    return [setup({ hostname: 'localhost' }), setup({ hostname: 'localhost' })];
  };
  t.match(made('get-one')[0], { method: 'GET', path: /^\/v1\/pets\/([1-9]|10)$/, hostname: 'localhost' });
  const [one, two] = made('create-idempotent');
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
