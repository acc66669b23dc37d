import t from 'tap';
import { SCENARIOS, scenarioNamed, shapeOf } from '../scripts/bench/scenarios.js';

// A benchmark round runs its scenarios on one pair of servers, so which of them write decides what
// the servers have been through when measured; the servers must answer them alike to be compared.

t.test('a scenario is found by its name; an unknown name is an error that lists the known ones', async (t) => {
  t.equal(scenarioNamed('create').expect.status, 201);
  t.throws(() => scenarioNamed('get-two'), /No scenario get-two; known: list-20, .*create/);
});

t.test('only create writes, so the shared warm-up and the reads leave the table as seeded', async (t) => {
  t.same(
    SCENARIOS.filter((scenario) => scenario.writes === true).map((scenario) => scenario.name),
    ['create'],
  );
  for (const scenario of SCENARIOS.filter((candidate) => candidate.writes !== true)) {
    t.not(scenario.request({ pets: 10, key: 'psk_x' }).method, 'POST', scenario.name);
  }
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
