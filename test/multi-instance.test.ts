// Several server processes on one PostgreSQL and one Redis, as docs/several-instances.md's "Running several
// instances" starts them. Always on PostgreSQL, whatever PETSTORE_TEST_BACKEND says.
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import t from 'tap';
import type { Pet } from '../src/storage/types.js';
import { conformingFetch, type Teardown } from './helpers/api.js';
import { startOwnPostgres, sharedPostgres } from './helpers/postgres.js';
import { databaseWithKey, runCli, type ServerProcess, startServerProcess } from './helpers/process.js';
import { redisMissing, startRedis } from './helpers/redis.js';

interface Cluster {
  databaseUrl: string;
  key: string;
  instances: ServerProcess[];
  /** Calls an instance, checking the answer against the contract. */
  call(instance: number, path: string, init?: RequestInit): Promise<Response>;
  create(instance: number, body: object, headers?: Record<string, string>): Promise<Response>;
}

async function startCluster(t: Teardown, databaseUrl: string, env: Record<string, string> = {}): Promise<Cluster> {
  const key = await databaseWithKey(databaseUrl);
  const settings = { DATABASE_URL: databaseUrl, RATE_LIMIT_PER_MINUTE: '0', ...env };
  // Started together on a migrated database; the migration race has a test of its own below.
  const instances = await Promise.all([startServerProcess(t, settings), startServerProcess(t, settings)]);
  const auth = { authorization: `Bearer ${key}` };
  const call = (instance: number, path: string, init: RequestInit = {}) =>
    conformingFetch(
      new Request(`${instances[instance]?.baseUrl ?? ''}${path}`, {
        ...init,
        headers: { ...auth, ...(init.headers as Record<string, string> | undefined) },
      }),
    );
  const create = (instance: number, body: object, headers: Record<string, string> = {}) =>
    call(instance, '/pets', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  return { databaseUrl, key, instances, call, create };
}

/** One instance's Prometheus metrics, from the address its banner gives. */
async function scrape(server: ServerProcess | undefined): Promise<string> {
  const url = /^ {2}metrics: (http:\/\/\S+)$/m.exec(server?.output() ?? '')?.[1];
  if (url === undefined) throw new Error('no metrics address in the banner');
  return (await fetch(url)).text();
}

/** Every pet, following the Link headers from one instance. */
async function listAll(cluster: Cluster, instance: number, query = 'limit=100'): Promise<Pet[]> {
  const pets: Pet[] = [];
  let path: string | undefined = `/pets?${query}`;
  while (path !== undefined) {
    const page = await cluster.call(instance, path);
    if (page.status !== 200) throw new Error(`listing answered ${page.status}`);
    pets.push(...((await page.json()) as Pet[]));
    const next = /^<\/v1([^>]+)>; rel="next"$/.exec(page.headers.get('link') ?? '')?.[1];
    path = next;
  }
  return pets;
}

t.test('two instances on one database serve one catalogue', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));

  const bodies = Array.from({ length: 60 }, (_, i) => ({ name: `pet ${i}`, categoryId: 1 + (i % 5) }));
  const created = await Promise.all(bodies.map((body, i) => cluster.create(i % 2, body)));
  t.same(
    created.map((response) => response.status),
    bodies.map(() => 201),
    'concurrent creates over both succeed',
  );
  const pets = (await Promise.all(created.map((response) => response.json()))) as Pet[];
  const ids = pets.map((pet) => pet.id);
  t.equal(new Set(ids).size, ids.length, 'every id is distinct');
  t.ok(
    ids.every((id) => Number.isSafeInteger(id) && id > 0),
    'ids are positive integers',
  );

  const fromFirst = await listAll(cluster, 0, 'limit=7');
  const fromSecond = await listAll(cluster, 1, 'limit=7');
  t.equal(fromFirst.length, 60);
  t.same(fromFirst, fromSecond, 'the same pages, in the same order, from either instance');
  t.same(
    fromFirst.map((pet) => pet.id),
    [...ids].sort((a, b) => a - b),
    'in id order',
  );
  // A cursor from one instance continues on the other.
  const page = await cluster.call(0, '/pets?limit=10');
  const link = /^<\/v1([^>]+)>/.exec(page.headers.get('link') ?? '')?.[1] ?? '';
  const continued = (await (await cluster.call(1, link)).json()) as Pet[];
  t.same(continued, fromFirst.slice(10, 20), 'a cursor from one instance continues on the other');
  const metrics = await scrape(cluster.instances[0]);
  t.match(
    metrics,
    /^petstore_storage_pool_clients\{state="total"\} [1-9]/m,
    "the PostgreSQL pool's clients are in the metrics",
  );
  // The scrape's own queries (the webhook backlog) wait for nothing on an idle pool.
  for (let scraped = 0; scraped < 3; scraped += 1)
    t.match(
      await scrape(cluster.instances[scraped % 2]),
      /^petstore_storage_pool_clients\{state="waiting"\} 0$/m,
      'an idle pool has no checkout waiting',
    );
});

t.test('two instances racing over the same pet: one order, one 409; transitions hold across instances', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));
  const json = (body: object) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const mergePatch = (body: object) => ({
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify(body),
  });
  for (let round = 0; round < 5; round += 1) {
    const pet = (await (await cluster.create(round % 2, { name: `race ${round}`, categoryId: 1 })).json()) as Pet;
    const orders = await Promise.all(
      [0, 1].map((instance) => cluster.call(instance, '/store/orders', { method: 'POST', ...json({ petId: pet.id }) })),
    );
    t.same(orders.map(({ status }) => status).sort(), [201, 409], `round ${round}: one order is placed`);

    const other = (await (
      await cluster.create(0, { name: `moves ${round}`, categoryId: 1, status: 'pending' })
    ).json()) as Pet;
    const moves = await Promise.all([
      cluster.call(0, `/pets/${other.id}`, mergePatch({ status: 'available' })),
      cluster.call(1, `/pets/${other.id}`, mergePatch({ status: 'sold' })),
    ]);
    const [stored] = (await (await cluster.call(round % 2, `/pets?id=${other.id}`)).json()) as Pet[];
    const outcome = `${moves.map(({ status }) => status).join('/')} ${String(stored?.status)}`;
    t.ok(
      ['200/200 sold', '409/200 sold'].includes(outcome),
      `round ${round}: a serial outcome, never sold -> available (${outcome})`,
    );
  }
});

t.test('racing retries with one Idempotency-Key over both instances create one pet', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));
  for (let round = 0; round < 5; round += 1) {
    const headers = { 'idempotency-key': `race-${round}` };
    const body = { name: `racer ${round}`, categoryId: 3 };
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => cluster.create(i % 2, body, headers)));
    t.same(
      answers.map((answer) => answer.status),
      answers.map(() => 201),
      `round ${round}: every retry gets the 201`,
    );
    const pets = (await Promise.all(answers.map((answer) => answer.json()))) as Pet[];
    t.equal(new Set(pets.map((pet) => pet.id)).size, 1, `round ${round}: all name the same pet`);
    t.equal(answers.filter((answer) => answer.headers.get('idempotent-replayed') === 'true').length, 7);
  }
  t.equal((await listAll(cluster, 0)).length, 5, 'five pets in all');
});

t.test('a revoked key is refused by every instance on the next request', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));
  t.equal((await cluster.call(0, '/pets')).status, 200);
  t.equal((await cluster.call(1, '/pets')).status, 200);
  const listed = await runCli(['keys', 'list', 'ops'], { DATABASE_URL: cluster.databaseUrl });
  const id = /^(\d+)\t/m.exec(listed.stdout)?.[1] ?? '';
  t.equal((await runCli(['keys', 'revoke', id], { DATABASE_URL: cluster.databaseUrl })).code, 0);
  t.equal((await cluster.call(0, '/pets')).status, 401);
  t.equal((await cluster.call(1, '/pets')).status, 401);
});

t.test('a rotated key is refused by every instance once its grace period ends', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));
  const env = { DATABASE_URL: cluster.databaseUrl };
  const id = /^(\d+)\t/m.exec((await runCli(['keys', 'list', 'ops'], env)).stdout)?.[1] ?? '';
  const rotated = await runCli(['keys', 'rotate', id, '--grace', '5s'], env);
  t.equal(rotated.code, 0, rotated.stderr);
  const started = Date.now();
  t.equal((await cluster.call(0, '/pets')).status, 200, 'the old key works on one instance during its grace period');
  t.equal((await cluster.call(1, '/pets')).status, 200, 'and on the other');
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 5100 - Date.now())));
  t.equal((await cluster.call(0, '/pets')).status, 401, 'then every instance refuses it');
  t.equal((await cluster.call(1, '/pets')).status, 401);
});

t.test('instances started together on an empty database migrate it once', async (t) => {
  const databaseUrl = await (await sharedPostgres()).newDatabase(t);
  const starts = await Promise.all(
    Array.from({ length: 3 }, () => startServerProcess(t, { DATABASE_URL: databaseUrl })),
  );
  const keys = starts.map((server) => server.key).filter((key) => key !== undefined);
  t.ok(keys.length >= 1, 'a development key was issued');
  const answers = await Promise.all(
    starts.map((server) =>
      conformingFetch(new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${keys[0] ?? ''}` } })),
    ),
  );
  t.same(
    answers.map((answer) => answer.status),
    [200, 200, 200],
    'all three serve the same database',
  );
  const migrate = await runCli(['migrate'], { DATABASE_URL: databaseUrl });
  t.equal(migrate.code, 0, migrate.stderr);
  t.match(migrate.stdout, /up to date/);
});

t.test('SIGKILL of one instance under write load loses no acknowledged pet', async (t) => {
  const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t));
  const acknowledged: Pet[] = [];
  const survivorFailures: string[] = [];
  let stop = false;
  const writer = async (instance: number, lane: number) => {
    for (let i = 0; !stop && i < 3000; i += 1) {
      try {
        const response = await cluster.create(instance, { name: `load ${instance}-${lane}-${i}`, categoryId: 1 });
        if (response.status !== 201) throw new Error(`answered ${response.status}`);
        acknowledged.push((await response.json()) as Pet);
      } catch (error) {
        if (instance === 0) return; // the killed instance's requests in flight fail: the point
        survivorFailures.push(String(error));
      }
    }
  };
  const lanes = [0, 1, 2, 3].flatMap((lane) => [writer(0, lane), writer(1, lane)]);
  while (acknowledged.length < 200) await new Promise((resolve) => setTimeout(resolve, 5));
  cluster.instances[0]?.child.kill('SIGKILL');
  const killedAt = acknowledged.length;
  while (acknowledged.length < killedAt + 100) await new Promise((resolve) => setTimeout(resolve, 5));
  stop = true;
  await Promise.all(lanes);

  t.same(survivorFailures, [], 'the other instance never failed meanwhile');
  const stored = new Map((await listAll(cluster, 1)).map((pet) => [pet.id, pet]));
  const missing = acknowledged.filter((pet) => JSON.stringify(stored.get(pet.id)) !== JSON.stringify(pet));
  t.same(missing, [], `all ${acknowledged.length} acknowledged pets are readable from the survivor`);
});

/** A TCP relay to PostgreSQL that can be made to drop everything, as a network can. */
async function relayTo(t: Teardown, target: URL) {
  const sockets = new Set<Socket>();
  let dropping = false;
  const relay = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk: Buffer) => {
        if (!dropping) to.write(chunk);
      });
      from.on('error', () => undefined);
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => relay.close(resolve));
  });
  const url = new URL(target.href);
  url.port = String((relay.address() as AddressInfo).port);
  return { url: url.href, dropEverything: () => void (dropping = true) };
}

t.test('the network to PostgreSQL drops everything: 503 with Retry-After, not a hang', async (t) => {
  const databaseUrl = await (await sharedPostgres()).newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const relay = await relayTo(t, new URL(databaseUrl));
  const server = await startServerProcess(t, {
    DATABASE_URL: relay.url,
    DATABASE_TIMEOUT_MS: '500',
    RATE_LIMIT_PER_MINUTE: '0',
  });
  const list = () =>
    conformingFetch(new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }));
  t.equal((await list()).status, 200, 'served through the relay');
  relay.dropEverything();
  const started = Date.now();
  const answer = await list();
  t.equal(answer.status, 503, 'a query no answer comes back to is a 503');
  t.ok(Number(answer.headers.get('retry-after')) > 0, 'with Retry-After');
  // A bound, not a benchmark: PostgreSQL would cancel the statement at 500 ms, and the server gives
  // up on an answer 1 s after that.
  t.ok(Date.now() - started < 5000, 'within the read timeout, not a hang');
});

t.test('PostgreSQL stopped: 503 with Retry-After, quickly; started again: served, no restart', async (t) => {
  const server = await startOwnPostgres(t);
  const cluster = await startCluster(t, await server.newDatabase(t), { DATABASE_TIMEOUT_MS: '1000' });
  const created = (await (await cluster.create(0, { name: 'before', categoryId: 1 })).json()) as Pet;

  await server.stop();
  for (const instance of [0, 1]) {
    const started = Date.now();
    const answers = await Promise.all([
      cluster.call(instance, '/pets'),
      cluster.create(instance, { name: 'during', categoryId: 1 }),
      cluster.call(instance, `/pets/${created.id}`),
    ]);
    t.same(
      answers.map((answer) => answer.status),
      [503, 503, 503],
      `instance ${instance}: every operation answers 503`,
    );
    t.ok(
      answers.every((answer) => Number(answer.headers.get('retry-after')) > 0),
      'with Retry-After',
    );
    // A bound, not a benchmark: the pool's connection timeout is 1 s here.
    t.ok(Date.now() - started < 5000, 'within the database timeout, not a hang');
    const origin = new URL(cluster.instances[instance]?.baseUrl ?? '').origin;
    t.equal((await fetch(`${origin}/readyz`)).status, 503, '/readyz says not ready');
    t.equal((await fetch(`${origin}/healthz`)).status, 200, '/healthz: the process is up');
  }

  await server.start();
  for (const instance of [0, 1]) {
    const listed = await cluster.call(instance, '/pets');
    t.equal(listed.status, 200, `instance ${instance} serves again without a restart`);
    t.same(await listed.json(), [created], 'nothing was written during the outage');
  }
});

t.test(
  'Redis stopped: the API keeps serving, limits failing open',
  { skip: redisMissing({ stoppable: true }) },
  async (t) => {
    const redis = await startRedis(t, { stoppable: true });
    const cluster = await startCluster(t, await (await sharedPostgres()).newDatabase(t), {
      REDIS_URL: redis.url,
      RATE_LIMIT_PER_MINUTE: '4',
    });
    const statuses = async () => [
      (await cluster.call(0, '/pets')).status,
      (await cluster.call(1, '/pets')).status,
      (await cluster.call(0, '/pets')).status,
      (await cluster.call(1, '/pets')).status,
      (await cluster.call(0, '/pets')).status,
    ];
    t.same(await statuses(), [200, 200, 200, 200, 429], 'four a minute in total over both instances');
    t.match(await scrape(cluster.instances[0]), /^petstore_redis_up 1$/m, 'the metrics say Redis is up');
    await redis.stop();
    // Instance 0 refused the key and remembers it until its minute ends; counting fails open.
    t.same(
      await statuses(),
      [429, 200, 429, 200, 429],
      'Redis down: requests are served uncounted, but where a key was refused it stays refused until its minute ends',
    );
    t.match(await scrape(cluster.instances[0]), /^petstore_redis_up 0$/m, 'and the metrics say it is down');
  },
);
