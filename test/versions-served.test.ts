import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { loadContract } from '../src/contract/document.js';
import { projectRoot } from '../src/contract/paths.js';
import { ResponseConformance } from '../src/contract/response-conformance.js';
import type { VersionChange } from '../src/versions/change.js';
import { VersionChain } from '../src/versions/chain.js';
import { getPetRemoved } from '../src/versions/changes/get-pet-removed.js';
import { API_VERSIONS } from '../src/versions/index.js';
import { checkHandlers, handlerNames } from '../scripts/contract-check/handlers.js';
import { servedContracts } from '../src/versions/served.js';
import { newestRelease } from '../scripts/contract-check/breaking.js';
import { startApi, type TapTest, type TestApi, temporaryDirectory } from './helpers/api.js';
import { servedVersions } from './helpers/contract.js';

// One app serving two versions side by side, each from its own contract (src/app.ts,
// olderContracts): v1 from its newest release in contracts/, v2 from openapi.yaml. Every response
// is checked against the contract of the version it was answered on. The v2 suites (test/v2-*)
// test each of v2's changes; this one, the serving of versions itself.

const released = newestRelease(projectRoot, 1);
if (released === undefined) throw new Error('no v1 release in contracts/');
const v1 = await loadContract(join(projectRoot, released.file));
const v2 = servedVersions.contract;
const [, v2Declared] = API_VERSIONS;
if (v2.basePath !== '/v2' || v2Declared === undefined) throw new Error('openapi.yaml is not v2');

/** Injects a request and fails unless the response conforms to its version's contract: v1's, or `v2`. */
function conformingRequests(t: TapTest, api: TestApi) {
  const conformance = new Map([
    ['/v1', new ResponseConformance(v1)],
    ['/v2', new ResponseConformance(v2)],
  ]);
  return async (method: string, url: string, payload?: object, headers: Record<string, string> = api.auth) => {
    const response = await api.app.inject({ method, url, headers, ...(payload && { payload }) });
    const checker = conformance.get(url.slice(0, 3));
    t.same(checker?.violations(method, url, response), [], `${method} ${url} -> ${response.statusCode} conforms`);
    return response;
  };
}

t.test('v1 and v2 served side by side from one implementation and one database', async (t) => {
  const api = await startApi(t);
  const request = conformingRequests(t, api);

  for (const [base, version] of [
    ['/v1', released.version.join('.')],
    ['/v2', '2.0.0'],
  ] as const) {
    // Served outside the contract it is (checked whole by contract:check's `served`).
    const served = await api.app.inject({ method: 'GET', url: `${base}/openapi.json` });
    const document = served.json<{ info: { version: string }; servers: { url: string }[] }>();
    t.equal(document.info.version, version, `${base}/openapi.json is its own contract`);
    t.match(document.servers[0]?.url, new RegExp(`${base}$`), 'naming this instance under its base path');
  }

  // v2's creates need an Idempotency-Key (issue 51, change 5).
  const created = await request(
    'POST',
    '/v2/pets',
    { name: 'Rex', categoryId: 1 },
    {
      ...api.auth,
      'idempotency-key': 'served-1',
    },
  );
  t.equal(created.statusCode, 201);
  const { id } = created.json<{ id: number }>();
  const readThroughV1 = await request('GET', `/v1/pets?id=${id}`);
  t.match(readThroughV1.json(), [{ id, name: 'Rex' }], 'a pet made through v2 is read through v1');
  const updated = await request(
    'PATCH',
    `/v1/pets/${id}`,
    { name: 'Max' },
    {
      ...api.auth,
      'content-type': 'application/merge-patch+json',
    },
  );
  t.equal(updated.statusCode, 200);
  t.match(
    (await request('GET', `/v2/pets?id=${id}`)).json(),
    { data: [{ id, name: 'Max' }] },
    'and a v1 update by v2 at once',
  );

  t.equal(
    (await request('GET', `/v1/pets/${id}`)).headers.link,
    '</v1/pets>; rel="successor-version"',
    "a version's deprecation names its successor under its own base path",
  );

  const other = await request('PUT', '/v2/pets');
  t.equal(other.statusCode, 405);
  t.equal(other.headers.allow, 'GET, POST', "a version's paths answer 405 with their own Allow");
  t.equal((await request('GET', '/v2/pets', undefined, {})).statusCode, 401, 'and authenticate as v1 does');
  const unknown = await api.app.inject({ method: 'GET', url: '/v3/pets', headers: api.auth });
  t.equal(unknown.statusCode, 404, 'a version not served is a path not served');
});

/**
 * A change made for the test, observable through a contract that did not change: v2 keeps in a
 * pet's name that it was named through v1, which v1 never sees, and v1's errors say they came
 * down through it (a header, and their message).
 */
const namedThroughV1: VersionChange = {
  description: 'A pet named through v1 says so in v2.',
  covers: [],
  requestUp: (request) => {
    const body = request.body as { name?: unknown } | undefined;
    if (typeof body?.name === 'string') request.body = { ...body, name: `${body.name} (v1)` };
  },
  responseDown: (response) => {
    if (response.status >= 400) {
      const error = response.body as { message: string };
      response.body = { ...error, message: `${error.message} [v1]` };
      response.headers['x-answered-as'] = 'v1';
      return;
    }
    const strip = (pet: unknown) => {
      const { name } = (pet ?? {}) as { name?: unknown };
      return typeof name === 'string' ? { ...(pet as object), name: name.replace(/ \(v1\)$/, '') } : pet;
    };
    response.body = Array.isArray(response.body) ? response.body.map(strip) : strip(response.body);
  },
};

t.test('an older version is answered through the changes since: requests up, answers and errors down', async (t) => {
  // First among v2's changes, so that on the way down it sees v1's shapes, which the others make.
  const api = await startApi(t, {
    versions: {
      contract: v2,
      olderContracts: [v1],
      apiVersions: [
        { major: 1, changes: [] },
        { major: 2, changes: [namedThroughV1, ...v2Declared.changes] },
      ],
    },
  });
  const request = conformingRequests(t, api);

  const created = await request('POST', '/v1/pets', { name: 'Rex', categoryId: 1 });
  t.equal(created.statusCode, 201);
  const { id, name } = created.json<{ id: number; name: string }>();
  t.equal(name, 'Rex', 'v1 sees the pet as it named it');
  t.match(
    (await request('GET', `/v2/pets?id=${id}`)).json(),
    { data: [{ id, name: 'Rex (v1)' }] },
    'v2 sees it migrated up',
  );
  t.match((await request('GET', `/v1/pets/${id}`)).json(), { id, name: 'Rex' }, 'and v1 reads it down again');
  t.match((await request('GET', `/v1/pets?id=${id}`)).json(), [{ id, name: 'Rex' }], 'in a list too');

  for (const [what, method, url, payload, headers, status] of [
    ['a refusal written raw (401)', 'GET', '/v1/pets', undefined, {}, 401],
    ['the same refusal again', 'GET', '/v1/pets', undefined, {}, 401],
    ['a validation failure', 'POST', '/v1/pets', { categoryId: 1 }, api.auth, 400],
    ["a path's other method (405)", 'PUT', '/v1/pets', undefined, api.auth, 405],
    ['a path not served (404)', 'GET', '/v1/kennels', undefined, api.auth, 404],
    ['a pet not found', 'GET', '/v1/pets/999999', undefined, api.auth, 404],
  ] as const) {
    const answer = await request(method, url, payload, headers);
    t.equal(answer.statusCode, status, what);
    t.match(answer.json(), { message: / \[v1\]$/, status }, `${what}: v1's error, through the change`);
    t.equal(answer.headers['x-answered-as'], 'v1', `${what}: with the headers the change set`);
  }
  for (const [method, url, headers] of [
    ['GET', '/v2/pets', {}],
    ['PUT', '/v2/pets', api.auth],
    ['GET', '/v2/kennels', api.auth],
  ] as const) {
    const answer = await request(method, url, undefined, headers);
    t.notMatch(answer.json(), { message: /\[v1\]/ }, `${method} ${url}: the newest version's errors are as they are`);
    t.equal(answer.headers['x-answered-as'], undefined);
  }
});

t.test('an operation v2 removed is answered on v1 by the v2 operation its change names', async (t) => {
  const chain = new VersionChain(API_VERSIONS);
  t.notOk(handlerNames(v2).includes('getPet'), 'v2 has no getPet, nor a handler for it');
  t.same(
    checkHandlers(v2, handlerNames(v2), { contracts: [v1], chain }),
    [],
    'every operation of v1 and v2 is answered',
  );
  const unanswered = checkHandlers(v2, handlerNames(v2), {
    contracts: [v1],
    chain: new VersionChain([
      { major: 1, changes: [] },
      { major: 2, changes: v2Declared.changes.filter((change) => change !== getPetRemoved) },
    ]),
  });
  t.match(
    unanswered.map(({ what }) => what),
    ['operation getPet of v1 has no handler'],
    'without the change, the handlers check names the operation of v1 left unanswered',
  );

  const api = await startApi(t);
  const v1Conformance = new ResponseConformance(v1);
  const get = async (url: string) => {
    const response = await api.app.inject({ method: 'GET', url, headers: api.auth });
    t.same(v1Conformance.violations('GET', url, response), [], `GET ${url} -> ${response.statusCode} conforms to v1`);
    return response;
  };
  const created = await api.app.inject({
    method: 'POST',
    url: '/v2/pets',
    headers: { ...api.auth, 'idempotency-key': 'removed-1' },
    payload: { name: 'Rex', categoryId: 1 },
  });
  const { id } = created.json<{ id: number }>();
  const read = await get(`/v1/pets/${id}`);
  t.equal(read.statusCode, 200);
  t.same(
    read.json(),
    (await get(`/v1/pets?id=${id}`)).json<unknown[]>()[0],
    'v1 reads one pet through listPets?id=, as getPet answered it',
  );
  t.equal(read.headers.etag, created.headers.etag, 'with its ETag');
  t.equal(read.headers.link, '</v1/pets>; rel="successor-version"', 'and its deprecation');
  const missing = await get('/v1/pets/999999');
  t.equal(missing.statusCode, 404);
  t.same(
    missing.json(),
    { code: 'not_found', message: 'No pet with id 999999', status: 404 },
    "v1's 404, word for word",
  );
  const gone = await api.app.inject({ method: 'GET', url: `/v2/pets/${id}`, headers: api.auth });
  t.equal(gone.statusCode, 405, 'v2 has no getPet');
  t.equal(
    created.headers.location,
    `/v2/pets/${id}`,
    'a handler written once answers under the base path of the version it answers',
  );
  const createdThroughV1 = await api.app.inject({
    method: 'POST',
    url: '/v1/pets',
    headers: api.auth,
    payload: { name: 'Max', categoryId: 1 },
  });
  t.match(createdThroughV1.headers.location, /^\/v1\/pets\/\d+$/);
});

t.test('two versions may not share a base path', async (t) => {
  await t.rejects(
    startApi(t, { versions: { contract: v1, olderContracts: [v1] } }),
    /two versions share a base path: \/v1, \/v1/,
  );
});

t.test('the server serves openapi.yaml and, beside it, the release of each older version declared', async (t) => {
  const project = await servedContracts();
  t.equal(project.contract.document.info.version, v2.document.info.version, 'openapi.yaml, the newest');
  t.same(
    project.olderContracts.map(({ basePath }) => basePath),
    API_VERSIONS.slice(0, -1)
      .map(({ major }) => `/v${major}`)
      .reverse(),
    'and an older version for each one declared before it',
  );

  // A project of its own: v1 is served from its newest release, as it was promised.
  const root = temporaryDirectory(t);
  mkdirSync(join(root, 'contracts'));
  copyFileSync(join(projectRoot, released.file), join(root, released.file));
  copyFileSync(join(projectRoot, 'openapi.yaml'), join(root, 'openapi.yaml'));
  const v1AndV2 = [
    { major: 1, changes: [] },
    { major: 2, changes: [] },
  ];
  const both = await servedContracts(root, v1AndV2);
  t.equal(both.contract.basePath, '/v2');
  t.same(
    both.olderContracts.map(({ basePath, document }) => [basePath, document.info.version]),
    [['/v1', released.version.join('.')]],
  );
  await t.rejects(
    servedContracts(root, [{ major: 1, changes: [] }]),
    /openapi\.yaml is version 2\.0\.0, but src\/versions\/index\.ts declares versions 1/,
    'a version the registry does not declare is not served',
  );
  rmSync(join(root, released.file));
  await t.rejects(servedContracts(root, v1AndV2), /version 1 is declared but has no release in contracts\//);
});
