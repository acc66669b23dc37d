import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import type { Pet } from '../src/storage/types.js';
import { PATTERN_WORDS } from '../src/plugins/validation-messages.js';
import { startApi } from './helpers/api.js';
import { contract } from './helpers/contract.js';

const json = { 'content-type': 'application/json' };

t.test('request bodies are strict: each bad body is a 400 naming the field, and nothing is stored', async (t) => {
  const api = await startApi(t);
  const headers = { ...api.auth, ...json };
  const cases: [string, unknown, RegExp][] = [
    ['a string for an integer', { name: 'Rex', categoryId: '5' }, /^body\/categoryId must be integer$/],
    ['a number for a string', { name: 123, categoryId: 1 }, /^body\/name must be string$/],
    ['a fraction for an integer', { name: 'Rex', categoryId: 1.5 }, /^body\/categoryId must be integer$/],
    ['null for a field', { name: null, categoryId: 1 }, /^body\/name must be string$/],
    ['null status', { name: 'Rex', categoryId: 1, status: null }, /^body\/status must be string$/],
    ['an unknown field', { name: 'Rex', categoryId: 1, colour: 'red' }, /^body\/colour is not an allowed field$/],
    ['a client-chosen id', { id: 9, name: 'Rex', categoryId: 1 }, /^body\/id is not an allowed field$/],
    ['a missing name', { categoryId: 1 }, /^body\/name is required$/],
    ['a missing categoryId', { name: 'Rex' }, /^body\/categoryId is required$/],
    ['an empty name', { name: '', categoryId: 1 }, /^body\/name must be at least 1 character long$/],
    [
      'a white-space name',
      { name: ' \t\u00a0 ', categoryId: 1 },
      /^body\/name must contain a visible character and no control characters$/,
    ],
    [
      'a 101-character name',
      { name: 'x'.repeat(101), categoryId: 1 },
      /^body\/name must be at most 100 characters long$/,
    ],
    ['categoryId 0', { name: 'Rex', categoryId: 0 }, /^body\/categoryId must be >= 1$/],
    ['categoryId above 2^53 - 1', { name: 'Rex', categoryId: 9007199254740992 }, /^body\/categoryId /],
    [
      'an unknown status',
      { name: 'Rex', categoryId: 1, status: 'lost' },
      /^body\/status must be one of available, pending, sold$/,
    ],
    ['an array body', [{ name: 'Rex', categoryId: 1 }], /^body must be a JSON object$/],
    ['a string body', 'Rex', /^body must be a JSON object$/],
    ['a boolean for an integer', { name: 'Rex', categoryId: true }, /^body\/categoryId must be integer$/],
    ...[
      ['U+200B alone', '\u200b'],
      ['zero-width characters and white space', ' \u200b\u200c\u200d\u2060\ufeff '],
      ['a soft hyphen and a Hangul filler', '\u00ad\u3164'],
      ['variation selectors and tags', '\ufe0f\u{e0041}'],
    ].map(([what, name]): [string, unknown, RegExp] => [
      `a name of invisible characters only: ${what}`,
      { name, categoryId: 1 },
      /^body\/name must contain a visible character and no control characters$/,
    ]),
    [
      'a NUL in the name',
      { name: '\u0000Rex', categoryId: 1 },
      /^body\/name must contain a visible character and no control characters$/,
    ],
    [
      'a control character in the name',
      { name: 'Rex\n', categoryId: 1 },
      /^body\/name must contain a visible character and no control characters$/,
    ],
    [
      'a lone surrogate in the name',
      { name: 'Rex\ud800', categoryId: 1 },
      /^body\/name must contain a visible character and no control characters$/,
    ],
  ];
  for (const [what, body, message] of cases) {
    const response = await api.request({ method: 'POST', url: '/v1/pets', headers, payload: JSON.stringify(body) });
    t.equal(response.statusCode, 400, what);
    const error = response.json<ErrorBody>();
    t.equal(error.code, 'invalid_request', what);
    t.match(error.message, message, what);
  }
  const listed = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.same(listed.json(), [], 'no rejected body created a pet');
});

t.test('a 100-character name is accepted, counted in characters not bytes', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'é'.repeat(100), categoryId: 1 });
  t.equal(pet.name.length, 100);
  const joined = await api.createPet({ name: '\u200bRex\u200d', categoryId: 1 });
  t.equal(joined.name, '\u200bRex\u200d', 'invisible characters beside a visible one are stored as sent');
  const renamed = await api.request({
    method: 'PATCH',
    url: `/v1/pets/${pet.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: { name: '\u200b\u200b' },
  });
  t.equal(renamed.statusCode, 400, 'a patch is held to the same rule');
});

t.test('?id= names its limit of 100 ids', async (t) => {
  const api = await startApi(t);
  const ids = (count: number) => Array.from({ length: count }, (_, i) => i + 1).join(',');
  const tooMany = await api.request({ method: 'GET', url: `/v1/pets?id=${ids(101)}`, headers: api.auth });
  t.equal(tooMany.statusCode, 400);
  t.equal(tooMany.json<ErrorBody>().message, 'query/id must hold at most 100 items');
  const enough = await api.request({ method: 'GET', url: `/v1/pets?id=${ids(100)}`, headers: api.auth });
  t.equal(enough.statusCode, 200, '100 ids are taken');
  const twice = await api.request({ method: 'GET', url: '/v1/pets?id=1&id=2', headers: api.auth });
  t.equal(twice.json<ErrorBody>().message, 'query/id must be given once');
});

t.test('a cursor holds its list and filters: under another list or other filters it is a 400', async (t) => {
  const api = await startApi(t);
  for (const name of ['Rex', 'Tom', 'Kit']) await api.createPet({ name, categoryId: 1, status: 'sold' });
  await api.createPet({ name: 'Max', categoryId: 1 });
  const first = await api.request({ method: 'GET', url: '/v1/pets?status=sold&limit=1', headers: api.auth });
  const cursor = new URL(/^<([^>]+)>/.exec(String(first.headers.link))?.[1] ?? '', 'http://x').searchParams.get(
    'cursor',
  );
  const cases: [string, string, number][] = [
    ['the same filters', `/v1/pets?status=sold&limit=1&cursor=${cursor}`, 200],
    ['the same filters, another limit', `/v1/pets?limit=5&status=sold&cursor=${cursor}`, 200],
    ['no filter', `/v1/pets?limit=1&cursor=${cursor}`, 400],
    ['another status', `/v1/pets?status=available&cursor=${cursor}`, 400],
    ['an added id filter', `/v1/pets?status=sold&id=1,2,3&cursor=${cursor}`, 400],
  ];
  for (const [what, url, status] of cases) {
    const answer = await api.request({ method: 'GET', url, headers: api.auth });
    t.equal(answer.statusCode, status, what);
    if (status === 400) {
      t.equal(
        answer.json<ErrorBody>().message,
        'query/cursor was made for another list or other filters: use the URL from the Link header as it is',
        what,
      );
    }
  }
  const orders = await api.request({ method: 'GET', url: `/v1/store/orders?cursor=${cursor}`, headers: api.auth });
  t.equal(orders.statusCode, 400, "a pets cursor on the orders' list");
  t.match(orders.json<ErrorBody>().message, /^query\/cursor was made for another list/);
});

t.test('query integers must be canonical decimal integers within range', async (t) => {
  const api = await startApi(t);
  for (const limit of ['1e2', '1.5', '', '+3', 'abc', '0x10', '007', ' 5', '0', '101', '-1', '99999999999999999999']) {
    const response = await api.request({
      method: 'GET',
      url: `/v1/pets?limit=${encodeURIComponent(limit)}`,
      headers: api.auth,
    });
    t.equal(response.statusCode, 400, `limit=${JSON.stringify(limit)}`);
    t.match(response.json<ErrorBody>().message, /^query\/limit /, 'the message names the parameter');
  }
  const notDecimal = await api.request({ method: 'GET', url: '/v1/pets?limit=1e2', headers: api.auth });
  t.equal(
    notDecimal.json<ErrorBody>().message,
    'query/limit must be an integer from 1 to 100 in plain decimal digits',
    "the message gives the parameter's own range",
  );
  const huge = await api.request({ method: 'GET', url: `/v1/pets?limit=${'9'.repeat(400)}`, headers: api.auth });
  t.equal(huge.statusCode, 400, 'an integer past 2^53 is not coerced to Infinity');
  t.match(huge.json<ErrorBody>().message, /^query\/limit /);
  for (const query of ['limit=5&limit=6', 'status=sold&status=pending', 'cursor=a&cursor=b']) {
    const repeated = await api.request({ method: 'GET', url: `/v1/pets?${query}`, headers: api.auth });
    t.equal(repeated.statusCode, 400, `${query}: a repeated parameter is not silently resolved`);
    t.equal(repeated.json<ErrorBody>().message, `query/${query.split('=')[0]} must be given once`);
  }
  for (const limit of ['1', '100']) {
    const response = await api.request({ method: 'GET', url: `/v1/pets?limit=${limit}`, headers: api.auth });
    t.equal(response.statusCode, 200, `limit=${limit} is within 1..100`);
  }
});

t.test('status filter and cursor are validated', async (t) => {
  const api = await startApi(t);
  const status = await api.request({ method: 'GET', url: '/v1/pets?status=lost', headers: api.auth });
  t.equal(status.statusCode, 400);
  t.match(status.json<ErrorBody>().message, /^query\/status /);
  const forged = Buffer.from('v1:abc').toString('base64url');
  const negative = Buffer.from('v1:-5').toString('base64url');
  for (const cursor of [
    'zzz',
    'not a cursor',
    forged,
    negative,
    'x'.repeat(65),
    Buffer.from('v1:012').toString('base64url'),
    Buffer.from('v1:1').toString('base64url'),
  ]) {
    const response = await api.request({
      method: 'GET',
      url: `/v1/pets?cursor=${encodeURIComponent(cursor)}`,
      headers: api.auth,
    });
    t.equal(response.statusCode, 400, `cursor ${cursor}`);
    t.match(response.json<ErrorBody>().message, /^query\/cursor /);
  }
});

const takesLimitStatusCursor = 'is not a parameter of this operation; it takes limit, status, id, cursor';
const takesNone = 'is not a parameter of this operation; it takes no query parameters';

t.test('listPets refuses a query parameter it does not declare, naming it and those it takes', async (t) => {
  const api = await startApi(t);
  await api.createPet({ name: 'Rex', categoryId: 1, status: 'available' });
  const cases: [string, string][] = [
    ['satus=sold', 'satus'],
    ['status[]=sold', 'status[]'],
    ['status+=sold', 'status '],
    ['%E2%80%AEdlos=1', '\\u202edlos'],
    ['Status=sold', 'Status'],
    ['limit=5&offset=10', 'offset'],
    ['dryRun', 'dryRun'],
    ['=sold', ''],
    ['__proto__=x', '__proto__'],
  ];
  for (const [query, name] of cases) {
    const response = await api.request({ method: 'GET', url: `/v1/pets?${query}`, headers: api.auth });
    t.equal(response.statusCode, 400, `${query}: not silently ignored`);
    const error = response.json<ErrorBody>();
    t.same(
      error,
      { code: 'invalid_request', message: `query/"${name}" ${takesLimitStatusCursor}`, status: 400 },
      query,
    );
  }
  const long = await api.request({ method: 'GET', url: `/v1/pets?${'x'.repeat(5_000)}=1`, headers: api.auth });
  t.equal(long.statusCode, 400);
  t.equal(
    long.json<ErrorBody>().message,
    `query/"${'x'.repeat(200)}…" ${takesLimitStatusCursor}`,
    "a long name is shown only in part, as a long path is in a 404's message",
  );
});

t.test('getPet and createPet declare no query parameter: any is a 400', async (t) => {
  const api = await startApi(t);
  const rex = await api.createPet({ name: 'Rex', categoryId: 1 });
  const pet = await api.request({ method: 'GET', url: `/v1/pets/${rex.id}?status=sold`, headers: api.auth });
  t.equal(pet.statusCode, 400);
  t.equal(pet.json<ErrorBody>().message, `query/"status" ${takesNone}`);
  t.equal(pet.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT', 'the 400 of getPet is marked deprecated too');

  const created = await api.request({
    method: 'POST',
    url: '/v1/pets?dryRun=true',
    headers: { ...api.auth, ...json },
    payload: JSON.stringify({ name: 'Tom', categoryId: 2 }),
  });
  t.equal(created.statusCode, 400);
  t.equal(created.json<ErrorBody>().message, `query/"dryRun" ${takesNone}`);
  const listed = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.same(listed.json(), [rex], 'the refused create stored nothing');
});

t.test('the query parameters the next-page Link carries are all accepted together', async (t) => {
  const api = await startApi(t);
  for (const name of ['Rex', 'Tom', 'Kit']) await api.createPet({ name, categoryId: 1, status: 'sold' });
  const first = await api.request({ method: 'GET', url: '/v1/pets?status=sold&limit=2', headers: api.auth });
  t.equal(first.statusCode, 200);
  const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1] ?? '';
  t.match(next, /^\/v1\/pets\?limit=2&status=sold&cursor=[\w-]+$/, 'the Link carries limit, status and cursor');
  const second = await api.request({ method: 'GET', url: next, headers: api.auth });
  t.equal(second.statusCode, 200, 'following it is not refused');
  t.same(
    second.json<Pet[]>().map((pet) => pet.name),
    ['Kit'],
  );
});

t.test('an undeclared query parameter is looked at only after authentication', async (t) => {
  const api = await startApi(t);
  const requests = [
    { method: 'GET', url: '/v1/pets?satus=sold' },
    { method: 'GET', url: '/v1/pets/1?status=sold' },
    { method: 'POST', url: '/v1/pets?dryRun=true', payload: '{"name":"Rex","categoryId":1}' },
  ];
  for (const request of requests) {
    for (const authorization of [undefined, 'Bearer psk_unknown']) {
      const headers = { ...json, ...(authorization === undefined ? {} : { authorization }) };
      const response = await api.request({ ...request, headers });
      t.equal(response.statusCode, 401, `${request.method} ${request.url} with ${authorization ?? 'no key'}`);
    }
  }
});

t.test('petId must be a canonical positive integer', async (t) => {
  const api = await startApi(t);
  // An empty one (`/v1/pets/`) names no pet at all: a 404, as errors.test.ts checks.
  for (const petId of ['abc', '1.5', '1e2', '0', '-1', '+1', '01', '9007199254740992']) {
    const response = await api.request({
      method: 'GET',
      url: `/v1/pets/${encodeURIComponent(petId)}`,
      headers: api.auth,
    });
    t.equal(response.statusCode, 400, `petId ${petId}`);
    t.match(response.json<ErrorBody>().message, /^params\/petId /);
    t.equal(response.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT', 'the 400 of getPet is marked deprecated too');
  }
  const largest = await api.request({ method: 'GET', url: '/v1/pets/9007199254740991', headers: api.auth });
  t.equal(largest.statusCode, 404, 'the largest id is valid, just absent');
});

t.test('every pattern of the contract has words for its 400 message', async (t) => {
  const patterns = new Set<string>();
  const visit = (value: unknown): void => {
    if (typeof value !== 'object' || value === null) return;
    for (const [key, child] of Object.entries(value)) {
      if (key === 'pattern' && typeof child === 'string') patterns.add(child);
      else visit(child);
    }
  };
  visit(contract.dereferenced);
  t.ok(patterns.size > 0);
  for (const pattern of patterns) t.type(PATTERN_WORDS[pattern], 'string', `${pattern} is described in words`);
});
