import t from 'tap';
import { SCENARIOS, selectScenarios } from '../scripts/bench/scenarios.js';

// A benchmark round runs its scenarios on one pair of servers, so which scenarios are chosen, in
// what order, and which of them write decide what the servers have been through when measured.

const names = (scenarios: readonly { name: string }[]) => scenarios.map((scenario) => scenario.name);

t.test('a chosen subset runs in the list order, whatever order it is named in', async (t) => {
  t.same(names(selectScenarios(['get-one', 'list-20'])), ['list-20', 'get-one']);
  t.same(names(selectScenarios(['no-key-401', 'create', 'list-deep-page'])), [
    'list-deep-page',
    'create',
    'no-key-401',
  ]);
  t.same(names(selectScenarios(undefined)), names(SCENARIOS));
});

t.test('an unknown scenario name is an error that lists the known ones', async (t) => {
  t.throws(() => selectScenarios(['get-one', 'get-two']), /No scenario get-two; known: list-20, .*create/);
});

t.test('only create writes, so the shared warm-up and the reads leave the table as seeded', async (t) => {
  t.same(names(SCENARIOS.filter((scenario) => scenario.writes === true)), ['create']);
  for (const scenario of SCENARIOS.filter((candidate) => candidate.writes !== true)) {
    t.not(scenario.request({ pets: 10, key: 'psk_x', deepPath: '/v1/pets' }).method, 'POST', scenario.name);
  }
});
