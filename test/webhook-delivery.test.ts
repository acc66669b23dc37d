import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { startMetricsServer } from '../src/metrics/server.js';
import type { WebhookDelivery } from '../src/domain/events.js';
import { projectRoot } from '../src/contract/paths.js';
import type { DeliveryQueue, Storage } from '../src/storage/types.js';
import type { TapTest, TestApi } from './helpers/api.js';
import { probeDatabase } from './helpers/backend.js';
import { samples, scrapeUrl } from './helpers/prometheus.js';
import { type Answer, type Received, startReceiver } from './helpers/receiver.js';
import { declaredEvents, eventually, FAST, patch, start, subscribed, verified } from './helpers/webhooks.js';

/** A receiver's answer that never comes: the request stays open until the sender gives up. */
const never = () => new Promise<never>(() => undefined);

/** What the server sees of the storage: the real one, with these of its delivery queue's methods in their stead. */
function queueSeen(replace: (queue: DeliveryQueue) => Partial<DeliveryQueue>): (storage: Storage) => Storage {
  return (storage) => ({ ...storage, deliveries: { ...storage.deliveries, ...replace(storage.deliveries) } });
}

/** The API's metrics served on a listener of their own, as the server does; returns a scrape. */
async function metricsEndpoint(t: TapTest, api: TestApi): Promise<() => Promise<string>> {
  if (api.metrics === undefined) throw new Error('started without metrics');
  const server = await startMetricsServer(api.metrics.registry, '127.0.0.1', 0);
  t.teardown(() => server.close());
  return () => scrapeUrl(server.url);
}

t.test('the metrics count attempts by kind and outcome, time them from commit, and show the backlog', async (t) => {
  const api = await start(t, { metrics: true, webhooks: { ...FAST, retrySchedule: [0, 100, 100] } });
  const scrape = await metricsEndpoint(t, api);
  const one = (text: string, name: string, labels = '') => samples(text, name).get(labels);
  const outcomes = async () => samples(await scrape(), 'petstore_webhook_deliveries_total');
  let release: () => void = () => undefined;
  const held: Answer = (_received, index) =>
    index === 0 ? new Promise((resolve) => (release = () => resolve({ status: 204 }))) : { status: 204 };
  const ok = await startReceiver(t, held);
  // A query string a client chose: it must reach no label.
  const probe = 'tenant=label-probe';
  await subscribed(api, `${ok.url}?${probe}`, ['pet.created']);

  let text = await scrape();
  t.equal(one(text, 'petstore_webhook_backlog_messages'), 0, 'no backlog before any event');
  t.equal(one(text, 'petstore_webhook_oldest_undelivered_age_seconds'), 0);
  const rex = await api.createPet({ name: 'Rex', categoryId: 1 });
  await ok.waitFor(1);
  text = await scrape();
  t.equal(one(text, 'petstore_webhook_backlog_messages'), 1, 'an attempt in flight is still backlog');
  const age = one(text, 'petstore_webhook_oldest_undelivered_age_seconds') ?? 0;
  await new Promise((resolve) => setTimeout(resolve, 400));
  const older = one(await scrape(), 'petstore_webhook_oldest_undelivered_age_seconds') ?? 0;
  t.ok(older - age >= 0.35, `the oldest message ages while it waits (${age} s, then ${older} s)`);
  release();
  await eventually('the delivery is counted', async () => (await outcomes()).size > 0);
  text = await scrape();
  t.same(
    [...samples(text, 'petstore_webhook_deliveries_total')],
    [['{event_type="pet.created",outcome="delivered"}', 1]],
  );
  t.equal(one(text, 'petstore_webhook_delivery_latency_seconds_count'), 1, 'one latency: the one 2xx');
  t.ok(
    (one(text, 'petstore_webhook_delivery_latency_seconds_sum') ?? 0) >= 0.4,
    'measured from the commit, the time the receiver held it included',
  );
  // Counted when answered; the gauges read the database, where the attempt is recorded by the end of the turn.
  await eventually(
    'delivered: no longer backlog',
    async () => one(await scrape(), 'petstore_webhook_backlog_messages') === 0,
  );
  t.equal(one(await scrape(), 'petstore_webhook_oldest_undelivered_age_seconds'), 0);

  const failing = await startReceiver(t, () => ({ status: 500 }));
  const gone = await startReceiver(t, () => ({ status: 410 }));
  await subscribed(api, `${failing.url}?${probe}`, ['pet.updated']);
  await subscribed(api, `${gone.url}?${probe}`, ['pet.deleted']);
  await patch(api, `/v1/pets/${rex.id}`, { name: 'Rexy' });
  await api.request({ method: 'DELETE', url: `/v1/pets/${rex.id}`, headers: api.auth });
  const expected = [
    ['{event_type="pet.created",outcome="delivered"}', 1],
    ['{event_type="pet.deleted",outcome="disabled"}', 1],
    ['{event_type="pet.updated",outcome="dead"}', 1],
    ['{event_type="pet.updated",outcome="retrying"}', 2],
  ];
  const sorted = async () => [...(await outcomes())].sort(([a], [b]) => a.localeCompare(b));
  await eventually('every attempt is counted', async () => (await sorted()).length === expected.length);
  await eventually('the last retry is counted', async () => (await outcomes()).get(expected[2]?.[0] as string) === 1);
  t.same(await sorted(), expected, 'a failure is retrying until the last attempt, dead then; a 410 disables');
  text = await scrape();
  t.equal(one(text, 'petstore_webhook_delivery_latency_seconds_count'), 1, 'failures have no latency');
  t.equal(one(text, 'petstore_webhook_backlog_messages'), 0, 'dead messages are no backlog');

  const kinds = new Set(Object.keys(declaredEvents));
  const known = new Set(['delivered', 'retrying', 'dead', 'disabled']);
  const labels = [...text.matchAll(/^petstore_webhook_\w+\{([^}]*)\}/gm)].flatMap(([, set]) =>
    [...(set ?? '').matchAll(/(\w+)="([^"]*)"/g)].map(([, name, value]) => ({ name, value: value ?? '' })),
  );
  t.ok(labels.length > 0, 'the delivery metrics have labels');
  const outside = labels.filter(
    ({ name, value }) =>
      !(name === 'event_type' && kinds.has(value)) && !(name === 'outcome' && known.has(value)) && name !== 'le',
  );
  t.same(outside, [], 'every label value is an event kind the contract declares or an outcome of a closed set');
  for (const chosen of [probe, 'label-probe', '127.0.0.1', new URL(ok.url).port]) {
    t.notOk(text.includes(chosen), `${chosen} appears nowhere in the metrics`);
  }

  // The alert docs/events.md gives, and every metric it names, exist as written.
  const docs = readFileSync(join(projectRoot, 'docs/events.md'), 'utf8');
  const named = new Set(docs.match(/petstore_webhook_\w+/g));
  t.ok(named.size >= 4, 'the docs name the delivery metrics');
  for (const name of named) t.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} is a metric`);
});

t.test('delivered and dead messages are pruned after the retention; pending ones stay', async (t) => {
  const webhooks = { ...FAST, retrySchedule: [0, 60_000], retentionMs: 3000 };
  const first = await start(t, { webhooks });
  const ok = await startReceiver(t);
  await subscribed(first, ok.url, ['pet.created']);
  await subscribed(first, (await startReceiver(t, () => ({ status: 500 }))).url, ['pet.updated']);
  await subscribed(first, (await startReceiver(t, () => ({ status: 410 }))).url, ['pet.deleted']);
  const probe = await probeDatabase(t, first.databaseUrl);
  const deliveries = async () =>
    (
      await probe.query<{ type: string; state: string }>(
        `SELECT e.type, d.state FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
         ORDER BY d.id`,
      )
    ).map(({ type, state }) => `${type} ${state}`);
  const rex = await first.createPet({ name: 'Rex', categoryId: 1 });
  await patch(first, `/v1/pets/${rex.id}`, { name: 'Rexy' });
  await first.request({ method: 'DELETE', url: `/v1/pets/${rex.id}`, headers: first.auth });
  const settled = ['pet.created delivered', 'pet.updated pending', 'pet.deleted dead'];
  await eventually('every message is settled', async () => (await deliveries()).join() === settled.join());
  await eventually('the failure is recorded', async () => {
    const [row] = await probe.query<{ count: number | string }>('SELECT count(*) AS count FROM webhook_attempts');
    return Number(row?.count) === 3;
  });
  await new Promise((resolve) => setTimeout(resolve, webhooks.retentionMs + 500));
  // One delivered within the retention, which must stay.
  await first.createPet({ name: 'Tom', categoryId: 1 });
  await ok.waitFor(2);
  await eventually('the new one is delivered', async () => (await deliveries()).length === 4);
  await first.app.close();

  // A worker prunes as it starts, then hourly.
  const second = await start(t, { databaseUrl: first.databaseUrl, webhooks });
  await second.app.ready();
  await eventually('the old settled messages are pruned', async () => (await deliveries()).length < 4);
  t.same(await deliveries(), ['pet.updated pending', 'pet.created delivered'], 'the pending one and the new one stay');
  const events = await probe.query<{ type: string }>('SELECT type FROM webhook_events ORDER BY id');
  t.same(
    events.map(({ type }) => type),
    ['pet.updated', 'pet.created'],
    'events go with their last message',
  );
  const attempts = await probe.query<{ event_type: string }>('SELECT event_type FROM webhook_attempts ORDER BY id');
  t.same(
    attempts.map((row) => row.event_type),
    ['pet.created'],
    'attempts older than the retention go, even of a message still pending',
  );
});

interface DeliveryRow {
  state: string;
  attempts: number | string;
  lease_until: number | string | null;
}

/** Reads the one message's row, and the attempts recorded. */
async function deliveryStateOf(t: TapTest, api: TestApi) {
  const probe = await probeDatabase(t, api.databaseUrl);
  return async () => {
    const [row] = await probe.query<DeliveryRow>('SELECT state, attempts, lease_until FROM webhook_deliveries');
    const recorded = await probe.query<{ response_status: number | null }>(
      'SELECT response_status FROM webhook_attempts',
    );
    return {
      delivery: row && { state: row.state, attempts: Number(row.attempts), leased: row.lease_until !== null },
      recorded: recorded.map((attempt) => attempt.response_status),
    };
  };
}

// An attempt may take as long as the endpoint's timeout, far longer than a shutdown waits (5 s).
const PATIENT = { ...FAST, timeoutMs: 60_000 };

t.test('a shutdown gives back an attempt still in flight, and the next start sends it at once', async (t) => {
  const receiver = await startReceiver(t, (_received, index) => (index === 0 ? never() : { status: 204 }));
  const first = await start(t, { webhooks: PATIENT });
  const endpoint = await subscribed(first, receiver.url, ['pet.created']);
  await first.createPet({ name: 'Rex', categoryId: 1 });
  await receiver.waitFor(1);
  await first.app.close();
  const deliveryState = await deliveryStateOf(t, first);
  t.same(
    await deliveryState(),
    { delivery: { state: 'pending', attempts: 0, leased: false }, recorded: [] },
    'released: pending, no longer leased, the unfinished attempt not counted',
  );

  const restarted = Date.now();
  await (await start(t, { databaseUrl: first.databaseUrl, webhooks: PATIENT })).app.ready();
  // The lease would have lasted the timeout and 30 s more: 90 s.
  await receiver.waitFor(2, 20_000);
  const [abandoned, sent] = receiver.received as [Received, Received];
  t.equal(sent.headers['webhook-id'], abandoned.headers['webhook-id'], 'the same event');
  t.match(verified(endpoint.secret, sent), { type: 'pet.created', data: { name: 'Rex' } });
  t.ok(sent.at - restarted < 20_000, 'sent by the next start, not after the lease');
  await eventually('the delivery is recorded', async () => (await deliveryState()).recorded.length === 1);
  t.same(await deliveryState(), {
    delivery: { state: 'delivered', attempts: 1, leased: false },
    recorded: [204],
  });
});

t.test('a shutdown that begins while the worker is claiming gives that claim back unsent', async (t) => {
  const receiver = await startReceiver(t);
  let holding = false;
  let claiming: () => void = () => undefined;
  let stopping: () => void = () => undefined;
  const claimed = new Promise<void>((resolve) => (claiming = resolve));
  const stopped = new Promise<void>((resolve) => (stopping = resolve));
  const api = await start(t, {
    webhooks: PATIENT,
    // The real queue; a claim that took something returns only once the worker stops listening (its stop began).
    storageSeenByServer: queueSeen((queue) => ({
      claim: async (...args) => {
        const taken = await queue.claim(...args);
        if (holding && taken.length > 0) {
          claiming();
          await stopped;
        }
        return taken;
      },
      onCommit: (listener) => {
        const unlisten = queue.onCommit(listener);
        return () => {
          unlisten();
          stopping();
        };
      },
    })),
  });
  await subscribed(api, receiver.url, ['pet.created']);
  holding = true;
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await claimed;
  await api.app.close();
  const deliveryState = await deliveryStateOf(t, api);
  // Anything sent after the close would have arrived by now.
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal(receiver.received.length, 0, 'nothing is sent once the shutdown began');
  t.same(
    await deliveryState(),
    { delivery: { state: 'pending', attempts: 0, leased: false }, recorded: [] },
    'the claim is given back, for the next start to send',
  );
});

t.test('a shutdown waits for an attempt answered within its grace, and records it', async (t) => {
  const receiver = await startReceiver(
    t,
    () => new Promise((resolve) => setTimeout(() => resolve({ status: 204 }), 1000)),
  );
  const api = await start(t, { webhooks: PATIENT });
  await subscribed(api, receiver.url, ['pet.created']);
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await receiver.waitFor(1);
  await api.app.close();
  t.same(
    await (
      await deliveryStateOf(t, api)
    )(),
    { delivery: { state: 'delivered', attempts: 1, leased: false }, recorded: [204] },
    'finished before the process went: delivered, once',
  );
});

t.test('the worker polls no faster than its interval while attempts are in flight or endpoints disabled', async (t) => {
  let claimed = 0;
  const api = await start(t, {
    webhooks: { ...FAST, retrySchedule: [0, 50], pollMs: 1000 },
    // The real queue, its claims counted.
    storageSeenByServer: queueSeen((queue) => ({
      claim: (...args) => {
        claimed += 1;
        return queue.claim(...args);
      },
    })),
  });
  const claims = async () => claimed;
  let release: () => void = () => undefined;
  const holding = await startReceiver(t, () => new Promise((resolve) => (release = () => resolve({ status: 500 }))));
  const endpoint = await subscribed(api, holding.url, ['pet.created']);
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await holding.waitFor(1);
  const before = await claims();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const during = (await claims()) - before;
  t.ok(during <= 4, `${during} claims in 1.5 s while the one message is in flight`);

  // The message fails and waits for its retry; its endpoint is disabled meanwhile.
  await patch(api, `/v1/webhooks/${endpoint.id}`, { enabled: false });
  release();
  await new Promise((resolve) => setTimeout(resolve, 300));
  const after = await claims();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const disabled = (await claims()) - after;
  t.ok(disabled <= 4, `${disabled} claims in 1.5 s while the only message due is a disabled endpoint's`);
  t.equal(holding.received.length, 1, 'nothing is sent to a disabled endpoint');
});

t.test('attempts finished together are recorded in one transaction, each as it went', async (t) => {
  const batches: number[] = [];
  const api = await start(t, {
    // All 12 attempts in flight to the one endpoint at once.
    webhooks: { ...FAST, retrySchedule: [0, 60_000], endpointConcurrency: 12 },
    // The real queue, the size of each settle counted.
    storageSeenByServer: queueSeen((queue) => ({
      settle: (outcomes) => {
        batches.push(outcomes.length);
        return queue.settle(outcomes);
      },
    })),
  });
  // Every answer held until all 12 have arrived, then given in the same moment: by the pet's name.
  const held: (() => void)[] = [];
  const answerFor = (received: Received) => {
    const { name } = (JSON.parse(received.body) as { data: { name: string } }).data;
    return { status: name === 'Gone' ? 410 : name.startsWith('Fail') ? 500 : 204 };
  };
  const receiver = await startReceiver(
    t,
    (received) =>
      new Promise((resolve) => {
        held.push(() => resolve(answerFor(received)));
        if (held.length === 12) for (const release of held) release();
      }),
  );
  const endpoint = await subscribed(api, receiver.url, ['pet.created']);
  const names = [
    ...Array.from({ length: 6 }, (_, i) => `Ok ${i}`),
    ...Array.from({ length: 5 }, (_, i) => `Fail ${i}`),
    'Gone',
  ];
  await Promise.all(names.map((name) => api.createPet({ name, categoryId: 1 })));
  const listed = async () => {
    const response = await api.request({
      method: 'GET',
      url: `/v1/webhooks/${endpoint.id}/deliveries`,
      headers: api.auth,
    });
    return response.json<WebhookDelivery[]>();
  };
  await eventually('every attempt is recorded', async () => (await listed()).length === 12);
  const attempts = await listed();
  const nameOf = new Map(
    receiver.received.map((received) => [
      received.headers['webhook-id'],
      (JSON.parse(received.body) as { data: { name: string } }).data.name,
    ]),
  );
  const statusFor = (name: string) => (name === 'Gone' ? 410 : name.startsWith('Fail') ? 500 : 204);
  t.ok(
    attempts.every(
      (attempt) => attempt.attempt === 1 && attempt.responseStatus === statusFor(nameOf.get(attempt.eventId) ?? ''),
    ),
    'each attempt with its own answer',
  );
  t.equal(
    attempts.filter((attempt) => attempt.nextAttemptAt !== undefined).length,
    5,
    'the five 500s wait for a retry',
  );
  t.ok(batches.length < 12, `12 attempts recorded in ${batches.length} transactions (${batches.join(', ')})`);
  const probe = await probeDatabase(t, api.databaseUrl);
  const states = await probe.query<{ state: string; n: number | string }>(
    'SELECT state, count(*) AS n FROM webhook_deliveries GROUP BY state ORDER BY state',
  );
  t.same(
    states.map(({ state, n }) => [state, Number(n)]),
    [
      ['dead', 1],
      ['delivered', 6],
      ['pending', 5],
    ],
    'delivered, waiting for a retry, or dead (410)',
  );
  const now = await api.request({ method: 'GET', url: `/v1/webhooks/${endpoint.id}`, headers: api.auth });
  t.match(now.json(), { enabled: false, disabledReason: 'the endpoint answered 410 Gone' }, 'the 410 disabled it');
});

t.test('while the event loop is busy the worker claims at most once a poll interval, then catches up', async (t) => {
  let claims = 0;
  const api = await start(t, {
    webhooks: { ...FAST, pollMs: 1000 },
    // The real queue, its claims counted.
    storageSeenByServer: queueSeen((queue) => ({
      claim: (...args) => {
        claims += 1;
        return queue.claim(...args);
      },
    })),
  });
  const receiver = await startReceiver(t);
  await subscribed(api, receiver.url, ['pet.created']);
  await api.createPet({ name: 'Warm-up', categoryId: 1 });
  await receiver.waitFor(1);
  // A loop never idle, each turn 20 ms of work: what serving at capacity looks like to the worker.
  let spinning = true;
  const spin = () => {
    const until = performance.now() + 20;
    while (performance.now() < until);
    if (spinning) setImmediate(spin);
  };
  spin();
  t.teardown(() => (spinning = false));
  await new Promise((resolve) => setTimeout(resolve, 200));
  const [before, from] = [claims, Date.now()];
  for (let i = 0; i < 10; i++) await api.createPet({ name: `Busy ${i}`, categoryId: 1 });
  const [during, intervals] = [claims - before, Math.ceil((Date.now() - from) / 1000)];
  spinning = false;
  // Not yielding, each commit would have been claimed on its own: 10 claims.
  t.ok(during <= intervals + 1, `${during} claims for 10 commits in ${intervals} poll intervals of a busy loop`);
  await receiver.waitFor(11);
  t.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 11, 'every event delivered, once');
});
