import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import type { WebhookDelivery } from '../src/domain/events.js';
import { retryDelay } from '../src/domain/retry-policy.js';
import { RESPONSE_BODY_LIMIT, retryAfterMs } from '../src/events/sender.js';
import { issueKey } from '../src/auth/api-keys.js';
import { migrationsDir } from '../src/contract/paths.js';
import type { AttemptOutcome, Pet } from '../src/storage/types.js';
import type { TapTest, TestApi } from './helpers/api.js';
import { backend, newDatabase, openDatabase, probeDatabase } from './helpers/backend.js';
import { loopbackServer, startReceiver } from './helpers/receiver.js';
import { eventually, FAST, start, subscribe, verified, type WithSecret } from './helpers/webhooks.js';

// A webhook receiver is a server somebody else runs: nothing it answers may cost another account
// anything (docs/events.md, "What a receiver may answer").

/** Three attempts; a timeout short enough for a receiver that never answers to use up its attempts soon. */
const SETTINGS = {
  ...FAST,
  retrySchedule: [0, 100, 200],
  timeoutMs: 3000,
  endpointConcurrency: 2,
  accountConcurrency: 8,
};
const ATTEMPTS = SETTINGS.retrySchedule.length;
const EVENTS = 2;

type Hostile = (response: ServerResponse, index: number) => void;

/** Writes a body that never ends, as fast as the connection takes it; counts what it wrote. */
function endlessBody(status: number, written: { bytes: number }): Hostile {
  const chunk = Buffer.alloc(64 * 1024, 'x');
  return (response) => {
    response.writeHead(status, { 'content-type': 'text/plain' });
    const more = () => {
      let flowing = true;
      while (!response.destroyed && flowing) {
        flowing = response.write(chunk);
        written.bytes += chunk.length;
      }
      if (!response.destroyed) response.once('drain', more);
    };
    more();
  };
}

/** The hostile answers the issue lists, each by a receiver of its own. */
function hostileAnswers(written: { bytes: number }): Record<string, Hostile> {
  const malformed = ['soon', '-5', '1e400', '9'.repeat(400), 'Mon, 99 Foo 2026 25:61:61 GMT', ''];
  return {
    'huge Retry-After': (response) => response.writeHead(503, { 'retry-after': '10000000000000000' }).end(),
    'huge Retry-After date': (response) =>
      response.writeHead(429, { 'retry-after': 'Fri, 31 Dec 9999 23:59:59 GMT' }).end(),
    'malformed Retry-After': (response, index) =>
      response.writeHead(503, { 'retry-after': malformed[index % malformed.length] ?? '' }).end(),
    'endless body': endlessBody(500, written),
    'status 999': (response) => response.writeHead(999).end(),
    // Never answers: the sender gives up at its timeout.
    'slow headers': () => undefined,
    // Headers at once, then a byte now and then, never the end.
    'slow body': (response) => {
      response.writeHead(200, { 'content-length': '1000000' });
      const timer = setInterval(() => response.write('x'), 100);
      response.on('close', () => clearInterval(timer));
    },
    'reset mid-body': (response) => {
      response.writeHead(200, { 'content-length': '1000' });
      response.write('x'.repeat(10), () => response.socket?.resetAndDestroy());
    },
  };
}

/** Requests held open at once, now and at most. */
interface Concurrency {
  open: number;
  mostOpen: number;
}

/** A receiver answering as `hostile` says, counting requests and how many it (and `account`) held open at once. */
async function hostileReceiver(t: TapTest, account: Concurrency, hostile: Hostile, redirectTo?: string) {
  const seen = { requests: [] as string[], open: 0, mostOpen: 0 };
  const { port } = await loopbackServer(t, (request, response) => {
    seen.requests.push(String(request.headers['webhook-id']));
    for (const count of [seen, account]) {
      count.open += 1;
      count.mostOpen = Math.max(count.mostOpen, count.open);
    }
    response.on('close', () => {
      seen.open -= 1;
      account.open -= 1;
    });
    request.resume();
    request.on('end', () => {
      if (redirectTo === undefined) hostile(response, seen.requests.length - 1);
      else response.writeHead(307, { location: redirectTo }).end();
    });
  });
  return { url: `http://127.0.0.1:${port}/hook`, seen };
}

async function newAccountKey(api: TestApi, name: string) {
  const { id } = await api.storage.accounts.createAccount(name);
  const { key } = await issueKey(api.storage.accounts, id);
  return { authorization: `Bearer ${key}` };
}

async function deliveryLog(api: TestApi, auth: { authorization: string }, endpoint: number) {
  const response = await api.request({
    method: 'GET',
    url: `/v1/webhooks/${endpoint}/deliveries?limit=100`,
    headers: auth,
  });
  if (response.statusCode !== 200) throw new Error(`listWebhookDeliveries: ${response.statusCode} ${response.body}`);
  return response.json<WebhookDelivery[]>();
}

t.test("hostile receivers of one account leave another's deliveries as they are, and stop at the limit", async (t) => {
  const lines: { level: number; msg: string }[] = [];
  const api = await start(t, {
    webhooks: SETTINGS,
    logger: {
      level: 'warn',
      stream: { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) },
    },
  });
  const hostileKey = await newAccountKey(api, 'hostile');
  const honest = await startReceiver(t);
  const honestEndpoint = (await subscribe(api, honest.url, ['pet.created'])).json<WithSecret>();

  const written = { bytes: 0 };
  const account: Concurrency = { open: 0, mostOpen: 0 };
  const receivers = new Map<string, Awaited<ReturnType<typeof hostileReceiver>> & { id: number }>();
  const answers = { ...hostileAnswers(written), redirect: () => undefined };
  for (const [name, hostile] of Object.entries(answers)) {
    // The redirect points at the honest receiver: were it followed, the honest one would hear twice.
    const receiver = await hostileReceiver(t, account, hostile, name === 'redirect' ? honest.url : undefined);
    const made = await subscribe(api, receiver.url, ['pet.created'], hostileKey);
    t.equal(made.statusCode, 201, `${name}: subscribed`);
    receivers.set(name, { ...receiver, id: made.json<WithSecret>().id });
  }

  // Both accounts write; each endpoint is sent the events its account is sent.
  const pets: Pet[] = [];
  for (let i = 0; i < EVENTS; i++) {
    pets.push(await api.createPet({ name: `honest-${i}`, categoryId: 1 }));
    const made = await api.request({
      method: 'POST',
      url: '/v1/pets',
      headers: hostileKey,
      payload: { name: `hostile-${i}`, categoryId: 1 },
    });
    t.equal(made.statusCode, 201);
    const list = await api.request({ method: 'GET', url: '/v1/pets?limit=20', headers: api.auth });
    t.equal(list.statusCode, 200, "the honest account's list is served meanwhile");
  }
  await eventually(
    'every message delivered or dead',
    async () => (await api.storage.deliveries.backlog()).pending === 0,
    60_000,
  );

  // The honest account: each event once, each attempt recorded.
  const ids = honest.received.map((received) => verified(honestEndpoint.secret, received));
  const names = ids.map((payload) => (payload.data as Pet).name);
  for (const pet of pets) t.ok(names.includes(pet.name), `the honest endpoint heard of ${pet.name}`);
  const eventIds = honest.received.map((received) => String(received.headers['webhook-id']));
  t.equal(new Set(eventIds).size, eventIds.length, 'each event once: no redirect was followed, none resent');
  const honestLog = await deliveryLog(api, api.auth, honestEndpoint.id);
  t.same(
    honestLog.map((attempt) => attempt.eventId).sort(),
    [...eventIds].sort(),
    "every attempt in the honest endpoint's log",
  );
  t.ok(
    honestLog.every((attempt) => attempt.attempt === 1 && attempt.responseStatus === 204),
    'each delivered at its first attempt',
  );

  for (const [name, { id, seen }] of receivers) {
    const byEvent = new Map<string, number>();
    for (const event of seen.requests) byEvent.set(event, (byEvent.get(event) ?? 0) + 1);
    t.ok(byEvent.size >= EVENTS, `${name}: sent the events (${byEvent.size})`);
    t.same(
      [...new Set(byEvent.values())],
      [ATTEMPTS],
      `${name}: each event sent ${ATTEMPTS} times, no more (the attempt limit)`,
    );
    t.ok(
      seen.mostOpen <= SETTINGS.endpointConcurrency,
      `${name}: at most ${SETTINGS.endpointConcurrency} attempts at once, body included (${seen.mostOpen})`,
    );
    // Validated against the contract by api.request: a status of 999 is not one.
    const log = await deliveryLog(api, hostileKey, id);
    t.equal(log.length, seen.requests.length, `${name}: every attempt recorded`);
    t.ok(
      log.every((attempt) => attempt.attempt <= ATTEMPTS),
      `${name}: no attempt numbered past the limit`,
    );
    const latest = Math.max(...SETTINGS.retrySchedule);
    for (const attempt of log.filter((a) => a.nextAttemptAt !== undefined)) {
      const wait = Date.parse(attempt.nextAttemptAt ?? '') - Date.parse(attempt.attemptedAt);
      t.ok(wait >= 0 && wait <= latest * 1.1 + 1, `${name}: a retry no later than the schedule's longest delay`);
    }
    if (name === 'status 999') {
      t.ok(
        log.every(
          (a) => a.responseStatus === undefined && (a.error ?? '').includes('status 999, which is not an HTTP status'),
        ),
        'status 999: recorded as an error, not a status',
      );
    }
    if (name === 'slow body' || name === 'slow headers') {
      t.ok(
        log.every((a) => a.error === `no complete answer within ${SETTINGS.timeoutMs} ms`),
        `${name}: the whole answer within the timeout, or the attempt failed`,
      );
    }
    if (name === 'reset mid-body') {
      t.ok(
        log.every((a) => a.error !== undefined && a.responseStatus === undefined),
        'a broken body fails the attempt',
      );
    }
    if (name === 'redirect')
      t.ok(
        log.every((a) => a.responseStatus === 307),
        'a redirect is a failed attempt',
      );
  }
  t.ok(
    account.mostOpen <= SETTINGS.accountConcurrency,
    `at most ${SETTINGS.accountConcurrency} attempts at once to the account's endpoints (${account.mostOpen})`,
  );
  const endless = receivers.get('endless body')?.seen.requests.length ?? 1;
  t.ok(
    written.bytes / endless < 32 * 1024 * 1024,
    `the endless body is dropped after ${RESPONSE_BODY_LIMIT} bytes (${Math.round(written.bytes / endless / 1024)} KiB written an attempt, socket buffers included)`,
  );
  t.same(
    lines.filter((line) => line.level >= 50).map((line) => line.msg),
    [],
    'no error logged: a receiver failing is not the server failing',
  );
});

t.test(
  "Retry-After is read as seconds or an HTTP date, and waited no longer than the schedule's longest delay",
  async (t) => {
    const now = Date.parse('2026-11-28T12:00:00Z');
    t.equal(retryAfterMs('120', now), 120_000);
    t.equal(retryAfterMs(' 5 ', now), 5000);
    t.equal(retryAfterMs('Sat, 28 Nov 2026 12:01:00 GMT', now), 60_000);
    t.equal(retryAfterMs('Sat, 28 Nov 2026 11:00:00 GMT', now), 0, 'a date past: no wait');
    for (const value of ['soon', '-5', '1e400', '9'.repeat(400), '', '1.5', 'Mon, 99 Foo 2026 25:61:61 GMT']) {
      t.equal(retryAfterMs(value, now), undefined, `"${value.slice(0, 20)}" is ignored`);
    }
    const schedule = [0, 1000, 60_000];
    const answered = (status: number, retryAfter: number | undefined) => ({
      status,
      retryAfterMs: retryAfter,
      durationMs: 1,
    });
    t.equal(retryDelay(schedule, 1, answered(503, 1e19)), 60_000, 'capped at the longest delay');
    t.equal(retryDelay(schedule, 1, answered(429, 30_000)), 30_000, 'waited when within it');
    t.ok((retryDelay(schedule, 1, answered(500, 30_000)) ?? 0) < 2000, 'read on a 429 or a 503 only');
    t.equal(retryDelay(schedule, 3, answered(503, 1e19)), undefined, 'none after the last attempt');
  },
);

t.test('settles of the same endpoints at once, in opposite orders, all record their attempts', async (t) => {
  const storage = await openDatabase(await newDatabase(t));
  t.teardown(() => storage.close());
  const endpoints: { accountId: number; id: number }[] = [];
  for (const name of ['one', 'two']) {
    const { id: accountId } = await storage.accounts.createAccount(name);
    for (let i = 0; i < 3; i++) {
      const made = await storage.webhooks.create(
        accountId,
        { url: `http://127.0.0.1:9/${i}`, events: ['pet.created'] },
        'whsec_AAAA',
        20,
      );
      if (made === 'limit_reached') throw new Error('limit reached');
      endpoints.push({ accountId, id: made.id });
    }
  }
  // Rounds of eight settles at once, each of messages to every endpoint, half of them taking the
  // endpoints in one order, half in the other (the next test forces the interleaving that deadlocked).
  const ROUNDS = 5;
  const PETS_A_ROUND = 20;
  const failures: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < PETS_A_ROUND; i++) {
      await storage.pets.create({ name: `p${round}-${i}`, categoryId: 1, status: 'available' });
    }
    const claimed = await storage.deliveries.claim(1000, 60_000, { perEndpoint: 1000, perAccount: 1000 });
    t.equal(claimed.length, PETS_A_ROUND * endpoints.length, `round ${round}: every message claimed`);
    const at = Date.now();
    const outcomes = claimed.map((delivery): AttemptOutcome => ({
      delivery,
      attemptedAt: at,
      durationMs: 1,
      responseStatus: 500,
      next: 'dead',
    }));
    const batches = Array.from({ length: 8 }, (_, n) =>
      outcomes
        .filter((_, i) => i % 8 === n)
        .sort((a, b) => (n % 2 === 0 ? 1 : -1) * (a.delivery.endpointId - b.delivery.endpointId)),
    );
    const settled = await Promise.allSettled(batches.map((batch) => storage.deliveries.settle(batch)));
    for (const result of settled) if (result.status === 'rejected') failures.push(String(result.reason));
  }
  t.same(failures, [], 'no settle failed (no deadlock)');
  const PETS = ROUNDS * PETS_A_ROUND;
  for (const { accountId, id } of endpoints) {
    t.equal((await storage.webhooks.attempts(accountId, id, 100))?.length, PETS, `endpoint ${id}: every attempt`);
  }
});

t.test("an outcome that cannot be stored fails its own attempt alone, not the others' of its turn", async (t) => {
  const batches: string[][] = [];
  const errors: unknown[] = [];
  const nameOf = (outcome: AttemptOutcome) => (JSON.parse(outcome.delivery.body) as { data: Pet }).data.name;
  const api = await start(t, {
    webhooks: { ...FAST, retrySchedule: [0, 60_000] },
    logger: { level: 'error', stream: { write: (line: string) => void errors.push(line) } },
    storageSeenByServer: (storage) => ({
      ...storage,
      deliveries: {
        ...storage.deliveries,
        settle: (outcomes) => {
          batches.push(outcomes.map(nameOf));
          return outcomes.some((outcome) => nameOf(outcome) === 'poison')
            ? Promise.reject(new Error('a value that cannot be stored'))
            : storage.deliveries.settle(outcomes);
        },
      },
    }),
  });
  const names = ['poison', 'a', 'b', 'c'];
  // Every answer held until all have arrived, then given in the same moment: one turn's outcomes.
  const held: (() => void)[] = [];
  const receiver = await startReceiver(
    t,
    () =>
      new Promise((resolve) => {
        held.push(() => resolve({ status: 204 }));
        if (held.length === names.length) for (const release of held) release();
      }),
  );
  const endpoint = (await subscribe(api, receiver.url, ['pet.created'])).json<WithSecret>();
  await Promise.all(names.map((name) => api.createPet({ name, categoryId: 1 })));
  await receiver.waitFor(names.length);
  const log = async () => deliveryLog(api, api.auth, endpoint.id);
  await eventually('the others recorded', async () => (await log()).length === names.length - 1);
  t.ok(
    batches.some((batch) => batch.length > 1 && batch.includes('poison')),
    `settled together first (${JSON.stringify(batches)})`,
  );
  t.same(
    batches
      .filter((batch) => batch.length === 1)
      .map(([name]) => name)
      .sort(),
    [...names].sort(),
    'then each alone',
  );
  t.equal(errors.length, 1, 'the one that failed is logged, once');
});

t.test('a message an older server put past any date is due again once migrated, and its log reads', async (t) => {
  const databaseUrl = await newDatabase(t);
  let storage = await openDatabase(databaseUrl);
  const { id: accountId } = await storage.accounts.createAccount('attacked');
  const endpoint = await storage.webhooks.create(
    accountId,
    { url: 'http://127.0.0.1:9/', events: ['pet.created'] },
    'whsec_AAAA',
    20,
  );
  if (endpoint === 'limit_reached') throw new Error('limit reached');
  await storage.pets.create({ name: 'rex', categoryId: 1, status: 'available' });
  const caps = { perEndpoint: 10, perAccount: 10 };
  const [delivery] = await storage.deliveries.claim(10, 60_000, caps);
  if (delivery === undefined) throw new Error('nothing claimed');
  // As a server that took an unbounded Retry-After and a status of 999 recorded them.
  const at = Date.now();
  const farOff = 9e18;
  await storage.deliveries.settle([{ delivery, attemptedAt: at, durationMs: 1, responseStatus: 999, next: farOff }]);
  t.equal(await storage.deliveries.nextDueAt(caps), farOff, 'never due, as it was');
  t.same(
    await storage.webhooks.attempts(accountId, endpoint.id, 10),
    [
      {
        eventId: `evt_${delivery.eventId}`,
        eventType: 'pet.created',
        attempt: 1,
        attemptedAt: new Date(at).toISOString(),
        durationMs: 1,
        error: 'answered status 999, which is not an HTTP status (100-599)',
      },
    ],
    'its attempt reads as the contract allows: an error, no next attempt past any date',
  );
  await storage.close();
  const probe = await probeDatabase(t, databaseUrl, { writable: true });
  // Migration 010 once more, as a database an older server left: PostgreSQL runs again what it has
  // no record of; SQLite counts its migrations, so the file itself is run (later ones add columns).
  if (backend === 'sqlite') {
    await probe.query(readFileSync(join(migrationsDir('sqlite'), '010-webhook-retries-in-range.sql'), 'utf8'));
  } else {
    await probe.query('DELETE FROM schema_migrations WHERE version = 10');
  }
  storage = await openDatabase(databaseUrl);
  t.teardown(() => storage.close());
  t.equal(await storage.deliveries.nextDueAt(caps), 0, 'due now, once migrated');
  const [again] = await storage.deliveries.claim(10, 60_000, caps);
  t.equal(again?.attempt, 2, 'its next attempt, within the limit');
});

t.test('PostgreSQL: two settles taking the same endpoints in opposite orders wait for each other', async (t) => {
  if (backend !== 'postgres') return;
  const databaseUrl = await newDatabase(t);
  const storage = await openDatabase(databaseUrl);
  t.teardown(() => storage.close());
  const { id: accountId } = await storage.accounts.createAccount('two');
  const ids: number[] = [];
  for (const path of ['a', 'b']) {
    const made = await storage.webhooks.create(
      accountId,
      { url: `http://127.0.0.1:9/${path}`, events: ['pet.created'] },
      'whsec_AAAA',
      20,
    );
    if (made === 'limit_reached') throw new Error('limit reached');
    ids.push(made.id);
  }
  const [low, high] = ids as [number, number];
  for (const name of ['one', 'two']) await storage.pets.create({ name, categoryId: 1, status: 'available' });
  const claimed = await storage.deliveries.claim(10, 60_000, { perEndpoint: 10, perAccount: 10 });
  const at = Date.now();
  const outcome = (delivery: (typeof claimed)[number]): AttemptOutcome => ({
    delivery,
    attemptedAt: at,
    durationMs: 1,
    responseStatus: 500,
    next: 'dead',
  });
  const to = (endpoint: number) => claimed.filter((delivery) => delivery.endpointId === endpoint).map(outcome);
  const [lowFirst, lowSecond] = to(low);
  const [highFirst, highSecond] = to(high);
  if (lowFirst === undefined || lowSecond === undefined || highFirst === undefined || highSecond === undefined) {
    throw new Error(`claimed ${claimed.length}`);
  }
  // Another transaction holds the first endpoint: a settle of [low, high] queues for it first, then
  // one of [high, low]. Taking the endpoints in the order given, the first would get `low` and wait
  // for `high`, held by the second, which waits for `low`: a deadlock, which fails one of them.
  const holder = await probeDatabase(t, databaseUrl, { writable: true });
  const waiting = async (count: number) =>
    eventually(`${count} settles waiting for a lock`, async () => {
      const [row] = await holder.query<{ count: string }>(
        `SELECT count(*) AS count FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return Number(row?.count) >= count;
    });
  await holder.query('BEGIN');
  await holder.query(`SELECT id FROM webhook_endpoints WHERE id = ${low} FOR UPDATE`);
  const ascending = storage.deliveries.settle([lowFirst, highFirst]);
  await waiting(1);
  const descending = storage.deliveries.settle([highSecond, lowSecond]);
  // The second queues behind the first (or, were it to lock `high` first, it would not wait yet).
  await Promise.race([waiting(2), new Promise((resolve) => setTimeout(resolve, 500))]);
  await holder.query('COMMIT');
  const settled = await Promise.allSettled([ascending, descending]);
  t.same(
    settled.map((result) => (result.status === 'rejected' ? String(result.reason) : 'settled')),
    ['settled', 'settled'],
    'both settled: no deadlock',
  );
  t.equal((await storage.webhooks.attempts(accountId, low, 10))?.length, 2);
  t.equal((await storage.webhooks.attempts(accountId, high, 10))?.length, 2);
});
