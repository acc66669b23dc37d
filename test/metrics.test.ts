import { join } from 'node:path';
import { Counter, Histogram, Registry } from 'prom-client';
import t from 'tap';
import { CounterFamily, HistogramFamily } from '../src/metrics/series.js';
import { listen, rawExchange, startApi, temporaryDirectory, type TestApi } from './helpers/api.js';
import { contract } from './helpers/contract.js';
import { samples } from './helpers/prometheus.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';

async function scrape(api: TestApi): Promise<string> {
  if (api.metrics === undefined) throw new Error('started without metrics');
  return api.metrics.registry.metrics();
}

t.test('requests are counted and timed by operationId, method and status', async (t) => {
  const api = await startApi(t, { metrics: true });
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  await api.request({ method: 'GET', url: '/v1/pets/999999', headers: api.auth });
  await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);

  const text = await scrape(api);
  const requests = samples(text, 'petstore_http_requests_total');
  t.equal(requests.get('{method="GET",operation="getPet",status="200"}'), 2);
  t.equal(requests.get('{method="GET",operation="getPet",status="404"}'), 1);
  t.equal(requests.get('{method="POST",operation="createPet",status="201"}'), 1);
  t.equal(requests.get('{method="GET",operation="listPets",status="200"}'), 1);
  t.equal(requests.get('{method="GET",operation="/healthz",status="200"}'), 1, 'routes outside the contract by path');
  const durations = samples(text, 'petstore_http_request_duration_seconds_count');
  t.equal(durations.get('{method="GET",operation="getPet"}'), 3);
  const fastest = samples(text, 'petstore_http_request_duration_seconds_bucket').get(
    '{le="0.0005",method="GET",operation="getPet"}',
  );
  t.ok(fastest !== undefined, 'buckets start below a millisecond');
  t.equal(samples(text, 'petstore_http_requests_in_flight').get(''), 0, 'nothing in flight once answered');
  t.ok(samples(text, 'nodejs_eventloop_lag_seconds').size > 0, "Node's default metrics are there");
  t.ok(samples(text, 'process_resident_memory_bytes').size > 0);

  const queries = samples(text, 'petstore_storage_query_duration_seconds_count');
  // v1's getPet is answered by listPets since v2 (src/versions/changes/get-pet-removed.ts).
  t.equal(queries.get('{query="pets.list"}'), 4, 'each storage call is timed');
  t.ok((queries.get('{query="accounts.findPrincipal"}') ?? 0) >= 5);
  t.equal(samples(text, 'petstore_storage_errors_total').size, 0, 'no storage call failed');
});

t.test('refusals are counted by cause, replays counted, and no key reaches a label', async (t) => {
  const api = await startApi(t, { metrics: true, rateLimit: { perMinute: 2, authFailuresPerMinute: 2 } });
  const create = { method: 'POST', url: '/v1/pets', payload: { name: 'Rex', categoryId: 1 } } as const;
  const once = { ...api.auth, 'idempotency-key': 'retry-me' };
  t.equal((await api.request({ ...create, headers: once })).statusCode, 201);
  const replay = await api.request({ ...create, headers: once });
  t.equal(replay.headers['idempotent-replayed'], 'true');
  for (let i = 0; i < 2; i++) {
    t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).statusCode, 429);
  }
  const wrong = { authorization: 'Bearer psk_notakeyatallnotakeyatallnotakeyat' };
  for (let i = 0; i < 3; i++) await api.request({ method: 'GET', url: '/v1/pets', headers: wrong });
  const fresh = await startApi(t, { metrics: true });
  t.equal((await fresh.request({ method: 'GET', url: '/v1/pets?limit=0', headers: fresh.auth })).statusCode, 400);

  const text = await scrape(api);
  const rejections = samples(text, 'petstore_http_rejections_total');
  t.equal(rejections.get('{cause="rate_limit"}'), 2, 'the third and fourth requests of a key limited to two');
  t.equal(rejections.get('{cause="authentication"}'), 2, 'two failures allowed to say 401');
  t.equal(rejections.get('{cause="authentication_limit"}'), 1, 'the third failure is a 429');
  t.equal(samples(text, 'petstore_idempotent_replays_total').get(''), 1);
  t.equal(samples(await scrape(fresh), 'petstore_http_rejections_total').get('{cause="validation"}'), 1);
  for (const secret of [api.key, api.key.slice(0, 12), 'psk_notakeyatall', 'retry-me']) {
    t.notOk(text.includes(secret), `${secret.slice(0, 8)}… appears nowhere in the metrics`);
  }
});

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'PROPFIND', 'PURGE', 'MKCOL', 'SEARCH'];

/** The kinds of path a client can send: unknown, under the API, under an operation's path, undecodable. */
function pathShapes(random: () => number): (() => string)[] {
  const segment = () => Math.floor(random() * 36 ** 6).toString(36);
  return [
    () => `/${segment()}`,
    () => `/v1/${segment()}/${segment()}`,
    () => `/v1/pets/${segment()}/${segment()}`,
    () => `/v1/pets/%${segment()}`,
    () => `/v1/pets/%zz${segment()}`,
    () => `/${segment()}?${segment()}=${segment()}`,
    () => `/v1/pets/${Math.floor(random() * 1000)}`,
  ];
}

t.test('a thousand random paths and methods add no series', async (t) => {
  // No failed-authentication limit: its 429s would come only after the first thirty 401s.
  const api = await startApi(t, { metrics: true, rateLimit: { perMinute: 1000, authFailuresPerMinute: 0 } });
  const { origin } = await listen(t, api);
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const shapes = pathShapes(random);
  const pick = <T>(from: T[]): T => from[Math.floor(random() * from.length)] as T;
  const send = async (count: number) => {
    for (let i = 0; i < count; i++) await fetch(`${origin}${pick(shapes)()}`, { method: pick(METHODS) });
    // Requests Node cannot parse at all: a made-up method, a broken request line.
    const port = Number(new URL(origin).port);
    await rawExchange(port, `BREW${Math.floor(random() * 1e6)} / HTTP/1.1\r\nHost: x\r\n\r\n`);
    await rawExchange(port, `GET /${Math.floor(random() * 1e6)} HTTP/9\r\n\r\n`);
  };
  const series = async () => {
    const text = await scrape(api);
    return [
      ...samples(text, 'petstore_http_requests_total').keys(),
      ...samples(text, 'petstore_http_request_duration_seconds_count').keys(),
      ...samples(text, 'petstore_http_rejections_total').keys(),
    ].sort();
  };
  // Every method on every shape of path once, then a thousand random requests.
  for (const method of METHODS) for (const shape of shapes) await fetch(`${origin}${shape()}`, { method });
  await send(0);
  const before = await series();
  await send(1000);
  t.same(await series(), before, 'the same series after a thousand more');
  const text = await scrape(api);
  const requests = samples(text, 'petstore_http_requests_total');
  const labelled = new Set(['unmatched', 'unparsable', ...contract.operations.map(({ operationId }) => operationId)]);
  t.ok(requests.get('{method="GET",operation="unmatched",status="404"}'), 'unknown paths are unmatched');
  t.ok(
    [...requests.keys()].some((labels) => labels.endsWith('operation="unmatched",status="405"}')),
    'a known path with another method',
  );
  t.ok(requests.get('{method="GET",operation="getPet",status="401"}'), 'an operation without a key');
  t.notOk(
    requests.get('{method="GET",operation="unmatched",status="401"}'),
    'an undecodable URL of an operation (no key) is counted under the operation, as its hooks answered it',
  );
  t.ok(requests.get('{method="other",operation="unparsable",status="400"}'), 'unparsable requests');
  t.ok(
    [...requests.keys()].every((labels) => labelled.has(/operation="([^"]*)"/.exec(labels)?.[1] ?? '')),
    `all of them under the fixed labels: ${[...requests.keys()].join(' ')}`,
  );
});

t.test('npm start serves metrics on their own port and names it; METRICS_PORT=off turns them off', async (t) => {
  const databaseFile = join(temporaryDirectory(t), 'metrics.db');
  const key = await databaseWithKey(databaseFile);
  const server = await startServerProcess(t, { DATABASE_URL: databaseFile });
  const url = /metrics: (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(server.output())?.[1];
  t.ok(url, 'the banner names the metrics address');
  const response = await fetch(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } });
  t.equal(response.status, 200);
  const scraped = await fetch(url ?? '');
  t.equal(scraped.status, 200);
  t.match(scraped.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  t.match(await scraped.text(), /petstore_http_requests_total\{method="GET",operation="listPets",status="200"\} 1/);
  const api = new URL(server.baseUrl).origin;
  t.equal((await fetch(`${api}/metrics`)).status, 404, 'the API port does not serve them');
  t.equal(await server.stop(), 0);

  const off = await startServerProcess(t, { DATABASE_URL: databaseFile, METRICS_PORT: 'off' });
  t.match(off.output(), /metrics: off/);
  t.equal(await off.stop(), 0);
});

t.test('storage failures are counted, and a pooled backend reports its pool', async (t) => {
  let failing = false;
  const api = await startApi(t, {
    metrics: true,
    storageSeenByServer: (storage) => ({
      ...storage,
      pets: {
        ...storage.pets,
        get: (id) => storage.pets.get(id),
        list: async (query) => {
          if (failing) throw new Error('database gone');
          return storage.pets.list(query);
        },
        create: (pet, claim) => storage.pets.create(pet, claim),
        createMany: (pets) => storage.pets.createMany(pets),
      },
      stats: () => ({ total: 10, idle: 7, waiting: 2 }),
    }),
  });
  await api.app.inject({ method: 'GET', url: '/v1/pets/1', headers: api.auth });
  failing = true;
  await api.app.inject({ method: 'GET', url: '/v1/pets/1', headers: api.auth });
  const text = await scrape(api);
  t.equal(samples(text, 'petstore_storage_errors_total').get('{query="pets.list"}'), 1);
  t.equal(samples(text, 'petstore_storage_query_duration_seconds_count').get('{query="pets.list"}'), 2);
  const pool = samples(text, 'petstore_storage_pool_clients');
  t.same(Object.fromEntries(pool), { '{state="total"}': 10, '{state="idle"}': 7, '{state="waiting"}': 2 });
});

t.test("series counted in plain numbers read at a scrape exactly as prom-client's own metrics", async (t) => {
  const ours = new Registry();
  const theirs = new Registry();
  const buckets = [0.001, 0.01, 0.1];
  const counter = { name: 'c_total', help: 'c', labelNames: ['method', 'status'] };
  const histogram = { name: 'h_seconds', help: 'h', labelNames: ['operation'], buckets };
  const ourCounter = new CounterFamily({ ...counter, registers: [ours] });
  const ourHistogram = new HistogramFamily({ ...histogram, registers: [ours] });
  const theirCounter = new Counter({ ...counter, registers: [theirs] });
  const theirHistogram = new Histogram({ ...histogram, registers: [theirs] });
  const kept = ourCounter.series({ method: 'GET', status: '200' });
  for (const [method, status] of [
    ['GET', '200'],
    ['GET', '200'],
    ['POST', '201'],
    ['GET', '404'],
  ] as const) {
    if (method === 'GET' && status === '200') kept.inc();
    else ourCounter.inc({ method, status });
    theirCounter.inc({ method, status });
  }
  for (const [operation, seconds] of [
    ['getPet', 0.0004],
    ['getPet', 0.05],
    ['getPet', 3],
    ['listPets', 0.01],
  ] as const) {
    ourHistogram.observe({ operation }, seconds);
    theirHistogram.observe({ operation }, seconds);
  }
  ourCounter.series({ method: 'PUT', status: '500' });
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same text; a series never counted is not shown');

  ours.resetMetrics();
  theirs.resetMetrics();
  t.equal(await ours.metrics(), await theirs.metrics(), 'reset: as if never counted');
  kept.inc();
  theirCounter.inc({ method: 'GET', status: '200' });
  ourHistogram.observe({ operation: 'getPet' }, 0.05);
  theirHistogram.observe({ operation: 'getPet' }, 0.05);
  t.equal(await ours.metrics(), await theirs.metrics(), 'a series kept across the reset counts again');
});
