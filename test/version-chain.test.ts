import t from 'tap';
import type { VersionChange } from '../src/versions/change.js';
import { VersionChain } from '../src/versions/chain.js';
import { API_VERSIONS } from '../src/versions/index.js';

// The way between versions (src/versions/chain.ts), with changes made for the test: a request of an
// older version goes up through every later version's changes in order, its answer and events down
// in reverse, so that each change sees the shape of the version it was written against.

/** A field the newer version calls `newer`, the older `older`; the change records what it saw. */
function renaming(name: string, newer: string, older: string, seen: string[]): VersionChange {
  const rename = (value: unknown, from: string, to: string) => {
    const { [from]: moved, ...rest } = value as Record<string, unknown>;
    return moved === undefined ? rest : { ...rest, [to]: moved };
  };
  return {
    description: `${name}: ${older} is called ${newer}.`,
    covers: [],
    requestUp: (request) => {
      seen.push(`${name} up`);
      request.body = rename(request.body, older, newer);
    },
    responseDown: (response) => {
      seen.push(`${name} down`);
      response.body = rename(response.body, newer, older);
    },
    eventDown: (event) => ({ ...event, payload: { ...event.payload, data: rename(event.payload.data, newer, older) } }),
  };
}

t.test('a request goes up through each later version in order, its answer down in reverse', async (t) => {
  const seen: string[] = [];
  // v1 called it `title`; v2 `label`; v3 `name`. Handlers know only `name`.
  const chain = new VersionChain([
    { major: 1, changes: [] },
    { major: 2, changes: [renaming('v2', 'label', 'title', seen)] },
    { major: 3, changes: [renaming('v3', 'name', 'label', seen)] },
  ]);
  t.equal(chain.newest, 3);
  // Up: v1's `title` becomes v2's `label`, then v3's `name`.
  const request = chain.requestUp(1, {
    operationId: 'createThing',
    headers: {},
    params: {},
    query: {},
    body: { title: 'Rex' },
  });
  t.same(request.body, { name: 'Rex' }, 'a v1 request reaches the handler in the newest words');
  t.same(seen.splice(0), ['v2 up', 'v3 up'], 'through v2 first, then v3');
  const response = chain.responseDown(1, {
    operationId: 'getThing',
    params: {},
    status: 200,
    headers: {},
    body: { name: 'Rex', id: 1 },
  });
  t.same(response.body, { title: 'Rex', id: 1 }, 'the newest answer reaches v1 in v1 words');
  t.same(seen, ['v3 down', 'v2 down'], 'through v3 first, then v2');
  t.same(
    chain.responseDown(2, { operationId: 'getThing', params: {}, status: 200, headers: {}, body: { name: 'Rex' } })
      .body,
    {
      label: 'Rex',
    },
  );
  t.same(
    chain.responseDown(3, { operationId: 'getThing', params: {}, status: 200, headers: {}, body: { name: 'Rex' } })
      .body,
    {
      name: 'Rex',
    },
    'the newest version goes through nothing',
  );

  const event = { type: 'thing.created', payload: { type: 'thing.created', timestamp: 'now', data: { name: 'Rex' } } };
  t.same(chain.eventDown(1, event).payload.data, { title: 'Rex' }, 'an event reaches a v1 subscriber in v1 words');
  t.same(event.payload.data, { name: 'Rex' }, "and the newest payload, another subscriber's, is left as it was");
});

t.test('versions follow one another; an unknown version is refused', async (t) => {
  t.throws(() => new VersionChain([]), /at least one version/);
  t.throws(
    () =>
      new VersionChain([
        { major: 1, changes: [] },
        { major: 3, changes: [] },
      ]),
    /versions must follow one another: 1, 3/,
  );
  t.throws(() => new VersionChain([{ major: 1, changes: [] }]).changesSince(2), /no version 2/);
  t.equal(new VersionChain(API_VERSIONS).newest, API_VERSIONS.at(-1)?.major, "the project's versions make a chain");
});
