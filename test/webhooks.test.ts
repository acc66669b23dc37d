import { randomBytes } from 'node:crypto';
import { copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { ApiError, type ErrorBody } from '../src/domain/errors.js';
import { DEFAULT_WEBHOOKS } from '../src/events/settings.js';
import fc from 'fast-check';
import {
  type EventType,
  isoTimestamp,
  outboxEvent,
  type WebhookDelivery,
  type WebhookEndpoint,
} from '../src/domain/events.js';
import { issueKey } from '../src/auth/api-keys.js';
import type { Order, Pet } from '../src/storage/types.js';
import { migrationsDir } from '../src/contract/paths.js';
import { migrate } from '../src/storage/sqlite/migrate.js';
import { backend, newDatabase, openDatabase, probeDatabase, temporaryDirectory } from './helpers/backend.js';
import { type Received, startReceiver } from './helpers/receiver.js';
import {
  eventually,
  FAST,
  patch,
  payloadConforms,
  start,
  subscribe,
  subscribed,
  verified,
  type WithSecret,
} from './helpers/webhooks.js';

const ALL: EventType[] = [
  'pet.created',
  'pet.updated',
  'pet.deleted',
  'order.placed',
  'order.completed',
  'order.cancelled',
];

t.test('every change of every kind is delivered, signed, as the contract declares it', async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await subscribed(api, receiver.url, ALL);
  t.match(endpoint, { url: receiver.url, events: ALL, enabled: true, secret: /^whsec_[A-Za-z0-9+/]+=*$/ });

  const rex = await api.createPet({ name: 'Rex', categoryId: 1 });
  await patch(api, `/v1/pets/${rex.id}`, { name: 'Rexy' });
  const placed = await api.request({
    method: 'POST',
    url: '/v1/store/orders',
    headers: api.auth,
    payload: { petId: rex.id },
  });
  const order = placed.json<Order>();
  await patch(api, `/v1/store/orders/${order.id}`, { status: 'completed' });
  const tom = await api.createPet({ name: 'Tom', categoryId: 2 });
  const second = await api.request({
    method: 'POST',
    url: '/v1/store/orders',
    headers: api.auth,
    payload: { petId: tom.id },
  });
  await patch(api, `/v1/store/orders/${second.json<Order>().id}`, { status: 'cancelled' });
  await api.request({ method: 'DELETE', url: `/v1/pets/${tom.id}`, headers: api.auth });

  const expected = [
    'pet.created',
    'pet.updated',
    'pet.updated',
    'order.placed',
    'pet.updated',
    'order.completed',
    'pet.created',
    'pet.updated',
    'order.placed',
    'pet.updated',
    'order.cancelled',
    'pet.deleted',
  ];
  await receiver.waitFor(expected.length);
  const payloads = receiver.received.map((received) => verified(endpoint.secret, received));
  t.same(payloads.map((payload) => payload.type).sort(), [...expected].sort(), 'one event per change, none else');
  for (const payload of payloads)
    t.ok(payloadConforms(payload.type, payload), `${payload.type} conforms to the contract`);
  const ids = receiver.received.map((received) => received.headers['webhook-id']);
  t.equal(new Set(ids).size, ids.length, 'each event has an id of its own');
  t.match(receiver.received[0]?.headers, { 'webhook-timestamp': /^[0-9]+$/, 'webhook-signature': /^v1,/ });
  const completed = payloads.find((payload) => payload.type === 'order.completed');
  t.match(completed?.data, { id: order.id, status: 'completed' }, 'data is the order after the change');
  const deleted = payloads.find((payload) => payload.type === 'pet.deleted');
  t.same(deleted?.data, { id: tom.id, name: 'Tom', categoryId: 2, status: 'available' }, 'the pet as it was removed');
});

t.test("a created pet's event is the JSON every other event is, byte for byte, whatever its name", async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await subscribed(api, receiver.url, ['pet.created']);
  const names = ['Rex', 'Quote " and \\ backslash', 'Ünïcødé 🐕 ☃', '</script>&amp;'];
  const pets: Pet[] = [];
  for (const name of names) pets.push(await api.createPet({ name, categoryId: 9_007_199_254_740_991 }));
  await receiver.waitFor(names.length);
  for (const received of receiver.received) {
    const payload = verified(endpoint.secret, received);
    const pet = pets.find((one) => one.id === (payload.data as { id: number }).id);
    t.equal(
      received.body,
      outboxEvent('pet.created', pet as Pet, Date.parse(payload.timestamp)).body,
      String(pet?.name),
    );
  }
});

t.test('an endpoint receives only the kinds it subscribed to; a refused change emits nothing', async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  await subscribed(api, receiver.url, ['pet.created']);
  const rex = await api.createPet({ name: 'Rex', categoryId: 1 });
  const refused = await patch(api, `/v1/pets/${rex.id}`, { status: 'sold' });
  t.equal(refused.statusCode, 200);
  const again = await patch(api, `/v1/pets/${rex.id}`, { status: 'available' });
  t.equal(again.statusCode, 409, 'sold is final');
  await receiver.waitFor(1);
  const probe = await probeDatabase(t, api.databaseUrl);
  const [events] = await probe.query<{ count: number | string }>('SELECT count(*) AS count FROM webhook_events');
  t.equal(Number(events?.count), 1, 'only the create, the one subscribed kind, was written to the outbox');
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(receiver.received.length, 1);
});

t.test('subscriptions belong to the account of the key', async (t) => {
  const api = await start(t);
  const endpoint = await subscribed(api, 'http://127.0.0.1:9/hook', ['pet.created']);
  const other = await api.storage.accounts.createAccount('other');
  const { key } = await issueKey(api.storage.accounts, other.id);
  const theirs = { authorization: `Bearer ${key}` };
  const url = `/v1/webhooks/${endpoint.id}`;
  const requests = [
    { method: 'GET', url },
    { method: 'DELETE', url },
    { method: 'POST', url: `${url}/test` },
    { method: 'POST', url: `${url}/secret` },
    { method: 'GET', url: `${url}/deliveries` },
  ];
  for (const request of requests) {
    const response = await api.request({ ...request, headers: theirs });
    t.equal(response.statusCode, 404, `${request.method} ${request.url} by another account`);
    t.same(response.json<ErrorBody>(), {
      code: 'not_found',
      message: `No webhook endpoint with id ${endpoint.id}`,
      status: 404,
    });
  }
  const patched = await api.request({
    method: 'PATCH',
    url,
    headers: { ...theirs, 'content-type': 'application/merge-patch+json' },
    payload: '{"enabled":false}',
  });
  t.equal(patched.statusCode, 404);
  t.same((await api.request({ method: 'GET', url: '/v1/webhooks', headers: theirs })).json(), []);
  const mine = await api.request({ method: 'GET', url: '/v1/webhooks', headers: api.auth });
  t.same(
    mine.json<WebhookEndpoint[]>().map((e) => e.id),
    [endpoint.id],
  );
  t.notOk('secret' in (mine.json<WebhookEndpoint[]>()[0] ?? {}), 'the secret is shown only once');
  t.equal((await api.request({ method: 'GET', url: '/v1/webhooks' })).statusCode, 401);

  const got = await api.request({ method: 'GET', url, headers: api.auth });
  t.same(got.json(), mine.json<WebhookEndpoint[]>()[0]);
  const changed = await patch(api, url, { events: ['pet.deleted', 'pet.created'] });
  t.same(changed.json<WebhookEndpoint>().events, ['pet.deleted', 'pet.created']);
  t.equal((await api.request({ method: 'DELETE', url, headers: api.auth })).statusCode, 204);
  t.equal((await api.request({ method: 'GET', url, headers: api.auth })).statusCode, 404);
  const invalid = await subscribe(api, 'http://127.0.0.1:9/', []);
  t.equal(invalid.statusCode, 400);
  t.equal(invalid.json<ErrorBody>().code, 'invalid_request');
});

t.test('the guard refuses what the server must not reach, without connecting', async (t) => {
  const api = await start(t, { webhooks: DEFAULT_WEBHOOKS });
  const refusals: [string, RegExp][] = [
    ['http://10.0.0.1/hook', /10\.0\.0\.1 is a private address/],
    ['http://127.0.0.1:9/hook', /127\.0\.0\.1 is a loopback address/],
    ['http://[::1]:9/hook', /::1 is a loopback address/],
    ['http://169.254.169.254/latest', /linklocal/],
    ['http://100.64.0.1/', /cgnat/],
    ['http://0.0.0.0/', /unspecified/],
    ['http://[::ffff:192.168.1.1]/', /private/],
    ['http://[::127.0.0.1]:9/hook', /embeds 127\.0\.0\.1 \(IPv4-compatible\): .* loopback address/],
    ['http://localhost:9/hook', /localhost resolves to .* loopback address/],
    ['ftp://127.0.0.1/hook', /only http and https/],
    ['http://127.0.0.1:99999/hook', /^url: port 99999 is out of range: a port is 1 to 65535$/],
    ['https://[::1]:0/', /^url: port 0 is out of range/],
  ];
  for (const [url, why] of refusals) {
    const response = await subscribe(api, url, ['pet.created']);
    t.equal(response.statusCode, 400, url);
    t.equal(response.json<ErrorBody>().code, 'webhook_url_refused');
    t.match(response.json<ErrorBody>().message, why);
  }
  t.same((await api.request({ method: 'GET', url: '/v1/webhooks', headers: api.auth })).json(), [], 'none was kept');
});

t.test('an address refused at delivery is never connected to, and the attempt says why', async (t) => {
  const receiver = await startReceiver(t);
  const first = await start(t);
  const endpoint = await subscribed(first, receiver.url, ['pet.created']);
  await first.app.close();
  // The same database served by an instance that does not allow loopback.
  const strict = await start(t, { databaseUrl: first.databaseUrl, webhooks: { ...FAST, allowedNetworks: [] } });
  await strict.createPet({ name: 'Rex', categoryId: 1 });
  let attempts: WebhookDelivery[] = [];
  for (let i = 0; i < 50 && attempts.length < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const listed = await strict.request({
      method: 'GET',
      url: `/v1/webhooks/${endpoint.id}/deliveries`,
      headers: first.auth,
    });
    attempts = listed.json<WebhookDelivery[]>();
  }
  t.equal(attempts.length, 3, 'every attempt of the schedule was made');
  t.match(attempts[0], { eventType: 'pet.created', attempt: 3, error: /refused: 127\.0\.0\.1 is a loopback address/ });
  t.notOk(attempts[0]?.nextAttemptAt, 'the last attempt has no next');
  t.equal(attempts[2]?.nextAttemptAt !== undefined, true, 'the first said when the next was due');
  t.equal(receiver.received.length, 0, 'nothing reached the receiver');
});

t.test('failures are retried with the same webhook-id; Retry-After is honoured', async (t) => {
  // Retry-After is waited up to the schedule's longest delay: the last one, never reached here.
  const api = await start(t, { webhooks: { ...FAST, retrySchedule: [0, 100, 100, 100, 5000] } });
  const receiver = await startReceiver(t, (_received, index) =>
    index === 0
      ? { status: 500 }
      : index === 1
        ? { status: 429, headers: { 'retry-after': '2' } }
        : index === 2
          ? { status: 302, headers: { location: 'http://127.0.0.1:9/' } }
          : { status: 200 },
  );
  const endpoint = await subscribed(api, receiver.url, ['pet.created']);
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await receiver.waitFor(4);
  const [a, b, c, d] = receiver.received;
  t.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 1, 'one event, four attempts');
  for (const received of [a, b, c, d]) if (received !== undefined) verified(endpoint.secret, received);
  let attempts: WebhookDelivery[] = [];
  await eventually('the fourth attempt is recorded', async () => {
    const listed = await api.request({
      method: 'GET',
      url: `/v1/webhooks/${endpoint.id}/deliveries`,
      headers: api.auth,
    });
    attempts = listed.json<WebhookDelivery[]>();
    return attempts.length === 4;
  });
  t.same(
    attempts.map((attempt) => [attempt.attempt, attempt.responseStatus]),
    [
      [4, 200],
      [3, 302],
      [2, 429],
      [1, 500],
    ],
    'a redirect is a failure, never followed',
  );
  // What the worker decided, read from its records: no bound on how fast this machine is.
  const [, , tooMany, failed] = attempts;
  const waited = (attempt: WebhookDelivery | undefined) =>
    Date.parse(attempt?.nextAttemptAt ?? '') - Date.parse(attempt?.attemptedAt ?? '');
  t.ok(waited(failed) >= 90 && waited(failed) <= 110, 'a 500 is retried on the schedule (100 ms, ±10% jitter)');
  t.ok(
    waited(tooMany) >= 2000,
    "a 429 is retried no sooner than its Retry-After's 2 s, though the schedule said 100 ms",
  );
  t.ok(
    (c?.at ?? 0) - Date.parse(tooMany?.attemptedAt ?? '') >= 2000,
    'and the attempt after it came at least 2 s after it',
  );
  t.equal(receiver.received.length, 4);
});

t.test('410 Gone disables the endpoint; a day of failures does too; enabling resumes', async (t) => {
  const api = await start(t, {
    webhooks: { ...FAST, retrySchedule: [0, 100, 100, 100, 100, 100], disableAfterMs: 250 },
  });
  const gone = await startReceiver(t, () => ({ status: 410 }));
  const failing = await startReceiver(t, () => ({ status: 503 }));
  const first = await subscribed(api, gone.url, ['pet.created']);
  const second = await subscribed(api, failing.url, ['pet.created']);
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await gone.waitFor(1);
  await failing.waitFor(3);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const disabled = await api.request({ method: 'GET', url: `/v1/webhooks/${first.id}`, headers: api.auth });
  t.match(disabled.json(), { enabled: false, disabledReason: 'the endpoint answered 410 Gone' });
  const tired = await api.request({ method: 'GET', url: `/v1/webhooks/${second.id}`, headers: api.auth });
  t.match(tired.json(), { enabled: false, disabledReason: /^every attempt failed for/ });
  t.equal(gone.received.length, 1, 'nothing more is sent to a disabled endpoint');
  const test = await api.request({ method: 'POST', url: `/v1/webhooks/${first.id}/test`, headers: api.auth });
  t.equal(test.statusCode, 409);
  t.equal(test.json<ErrorBody>().code, 'webhook_disabled');

  gone.answer(() => ({ status: 200 }));
  const enabled = await patch(api, `/v1/webhooks/${first.id}`, { enabled: true });
  t.same(enabled.json<WebhookEndpoint>().enabled, true);
  t.notOk(enabled.json<WebhookEndpoint>().disabledReason);
  const queued = await api.request({ method: 'POST', url: `/v1/webhooks/${first.id}/test`, headers: api.auth });
  t.equal(queued.statusCode, 202);
  await gone.waitFor(2);
  const test2 = verified(first.secret, gone.received[1] as Received);
  t.same(test2.data, { webhookId: first.id });
  t.ok(payloadConforms('webhook.test', test2));
  t.equal(gone.received[1]?.headers['webhook-id'], queued.json<{ eventId: string }>().eventId);
});

t.test('a rotated secret signs alongside the new one during its grace period', async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  const endpoint = await subscribed(api, receiver.url, ['pet.created']);
  const rotated = await api.request({ method: 'POST', url: `/v1/webhooks/${endpoint.id}/secret`, headers: api.auth });
  t.equal(rotated.statusCode, 200);
  const { secret, previousSecretExpiresAt } = rotated.json<WithSecret>();
  t.not(secret, endpoint.secret);
  t.ok(previousSecretExpiresAt);
  await api.createPet({ name: 'Rex', categoryId: 1 });
  await receiver.waitFor(1);
  const delivered = receiver.received[0] as Received;
  t.equal(String(delivered.headers['webhook-signature']).split(' ').length, 2, 'two signatures');
  t.ok(verified(secret, delivered), 'the new secret verifies');
  t.ok(verified(endpoint.secret, delivered), 'so does the previous one, during the grace');
});

t.test('events committed with their change survive the process that wrote them', async (t) => {
  const receiver = await startReceiver(t);
  const first = await start(t);
  const endpoint = await subscribed(first, receiver.url, ['pet.created', 'pet.updated']);
  await first.app.close();
  // A writer whose worker never runs (a process killed right after answering is no different).
  const writer = await openDatabase(first.databaseUrl);
  const rex = await writer.pets.create({ name: 'Rex', categoryId: 1, status: 'available' });
  const refused = writer.pets.update(1, () => {
    throw new ApiError(409, 'invalid_transition', 'refused');
  });
  await t.rejects(refused, 'an aborted change...');
  await writer.close();
  const probe = await probeDatabase(t, first.databaseUrl);
  const rows = await probe.query<{ type: string }>('SELECT type FROM webhook_events');
  t.same(
    rows.map((row) => row.type),
    ['pet.created'],
    '...writes no event',
  );
  // Its worker starts with the server (ready, as listen makes it).
  await (await start(t, { databaseUrl: first.databaseUrl })).app.ready();
  await receiver.waitFor(1);
  const created = rex.outcome === 'created' ? rex.created.pet : undefined;
  // The endpoint was made through v1: the pet as v1 has it, without v2's createdAt and updatedAt.
  const { id, name, categoryId, status } = created ?? {};
  const payload = verified(endpoint.secret, receiver.received[0] as Received);
  t.match(payload, { type: 'pet.created' });
  t.same(payload.data, { id, name, categoryId, status });
});

t.test('a dead instance’s claim comes due again when its lease ends', async (t) => {
  const receiver = await startReceiver(t);
  const first = await start(t);
  const endpoint = await subscribed(first, receiver.url, ['pet.created']);
  await first.app.close();
  const dead = await openDatabase(first.databaseUrl);
  t.teardown(() => dead.close());
  await dead.pets.create({ name: 'Rex', categoryId: 1, status: 'available' });
  const claimedAt = Date.now();
  t.equal(
    (await dead.deliveries.claim(10, 1000, { perEndpoint: 10, perAccount: 10 })).length,
    1,
    'the instance that dies claimed the message',
  );
  // Its worker starts with the server (ready, as listen makes it).
  await (await start(t, { databaseUrl: first.databaseUrl })).app.ready();
  await receiver.waitFor(1);
  const attempt = receiver.received[0] as Received;
  t.ok(attempt.at - claimedAt >= 1000, 'another instance sent it only once the lease ended');
  t.match(verified(endpoint.secret, attempt), { type: 'pet.created' });
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(receiver.received.length, 1);
});

t.test(`two instances on one database never send the same attempt (${backend})`, async (t) => {
  const receiver = await startReceiver(t);
  const one = await start(t);
  const two = await start(t, { databaseUrl: one.databaseUrl });
  const endpoint = await subscribed(one, receiver.url, ['pet.created']);
  const count = 60;
  await Promise.all(
    Array.from({ length: count }, (_, i) => (i % 2 ? one : two).createPet({ name: `Pet ${i}`, categoryId: 1 })),
  );
  await receiver.waitFor(count);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const ids = receiver.received.map((received) => received.headers['webhook-id']);
  t.equal(ids.length, count, 'every event once');
  t.equal(new Set(ids).size, count, 'none twice');
  for (const received of receiver.received) verified(endpoint.secret, received);
});

t.test('a subscription change applies to the next change, on this instance and on another', async (t) => {
  const receiver = await startReceiver(t);
  const one = await start(t);
  const two = await start(t, { databaseUrl: one.databaseUrl });
  const create = (api: typeof one, name: string) => api.createPet({ name, categoryId: 1 });
  // Before anyone subscribes, both write a change: each has looked for subscribers and found none.
  await create(two, 'Unheard');
  await create(one, 'Unseen');
  const endpoint = await subscribed(one, receiver.url, ['pet.created']);
  await create(one, 'Rex');
  await create(two, 'Max');
  await receiver.waitFor(2);
  t.equal((await patch(one, `/v1/webhooks/${endpoint.id}`, { events: ['pet.deleted'] })).statusCode, 200);
  await create(one, 'Tom');
  await create(two, 'Tim');
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.same(
    receiver.received.map((received) => (verified(endpoint.secret, received).data as { name: string }).name).sort(),
    ['Max', 'Rex'],
    'the creates made while subscribed, whichever instance made them, and none after',
  );
});

// PostgreSQL checks the subscriptions' version in each create's own statement. SQLite's cache looks
// for other processes' commits at most once a millisecond (table-cache.ts): a create on one process
// within that millisecond of another's subscription change misses it, and this fails there.
if (backend === 'postgres') {
  t.test(
    'an instance that found no subscriber hears of every later change to who subscribes, whoever makes it',
    async (t) => {
      const receiver = await startReceiver(t);
      const one = await start(t);
      const two = await start(t, { databaseUrl: one.databaseUrl });
      const operator = await probeDatabase(t, one.databaseUrl, { writable: true });
      const create = (name: string) => two.createPet({ name, categoryId: 1 });
      // Each create on `two` follows a change acknowledged by `one` or committed by an operator's SQL.
      await create('Before');
      const endpoint = await subscribed(one, receiver.url, ['pet.created']);
      await create('Subscribed');
      await create('Subscribed again');
      t.equal((await patch(one, `/v1/webhooks/${endpoint.id}`, { enabled: false })).statusCode, 200);
      await create('Disabled');
      await create('Disabled again');
      t.equal((await patch(one, `/v1/webhooks/${endpoint.id}`, { enabled: true })).statusCode, 200);
      await create('Enabled');
      await operator.query(`UPDATE webhook_endpoints SET events = '["pet.deleted"]' WHERE id = ${endpoint.id}`);
      await create('Unsubscribed by SQL');
      await create('Unsubscribed by SQL again');
      await operator.query(`UPDATE webhook_endpoints SET events = '["pet.created"]' WHERE id = ${endpoint.id}`);
      await create('Subscribed by SQL');
      await receiver.waitFor(4);
      await new Promise((resolve) => setTimeout(resolve, 300));
      t.same(
        receiver.received.map((received) => (verified(endpoint.secret, received).data as { name: string }).name).sort(),
        ['Enabled', 'Subscribed', 'Subscribed again', 'Subscribed by SQL'],
        'the creates made while subscribed and enabled, and none else',
      );
    },
  );

  t.test('an endpoint removed after a change committed gets nothing of it; the others still do', async (t) => {
    const [kept, removed] = [await startReceiver(t), await startReceiver(t)];
    const first = await start(t);
    const endpoint = await subscribed(first, kept.url, ['pet.created']);
    const gone = await subscribed(first, removed.url, ['pet.created']);
    const account = await first.storage.accounts.findAccount('tests');
    await first.app.close();
    // A writer whose worker never runs: the change and its event wait in the outbox.
    const writer = await openDatabase(first.databaseUrl);
    await writer.pets.create({ name: 'Rex', categoryId: 1, status: 'available' });
    t.ok(await writer.webhooks.remove(account?.id ?? NaN, gone.id), 'one endpoint is removed meanwhile');
    await writer.close();
    await (await start(t, { databaseUrl: first.databaseUrl })).app.ready();
    await kept.waitFor(1);
    t.match(verified(endpoint.secret, kept.received[0] as Received), { type: 'pet.created', data: { name: 'Rex' } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.equal(removed.received.length, 0, 'the removed endpoint is sent nothing');
  });
}

if (backend === 'sqlite') {
  t.test('a database upgraded with messages waiting delivers each of them once, and then new ones', async (t) => {
    const receiver = await startReceiver(t);
    const databaseUrl = await newDatabase(t);
    // The schema as release 005 left it, with an event whose delivery was made at its commit.
    const before = temporaryDirectory(t);
    for (const file of readdirSync(migrationsDir('sqlite')).filter((name) => name < '006')) {
      copyFileSync(join(migrationsDir('sqlite'), file), join(before, file));
    }
    const db = new Database(databaseUrl);
    t.equal(migrate(db, before), 5);
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    db.exec(`INSERT INTO accounts (name) VALUES ('tests');
      INSERT INTO webhook_endpoints (account_id, url, events, secret, created_at, updated_at)
        VALUES (1, '${receiver.url}', '["pet.created"]', '${secret}', 0, 0);
      INSERT INTO webhook_events (type, body, created_at) VALUES ('pet.created',
        '{"type":"pet.created","timestamp":"2026-11-26T00:00:00.000Z","data":{"id":1,"name":"Old","categoryId":1,"status":"available"}}', 0);
      INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at) VALUES (1, 1, 0);`);
    db.close();
    const api = await start(t, { databaseUrl });
    await api.app.ready();
    await api.createPet({ name: 'New', categoryId: 1 });
    await receiver.waitFor(2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.same(
      receiver.received.map((received) => (verified(secret, received).data as { name: string }).name).sort(),
      ['New', 'Old'],
      'the waiting one and the new one, once each',
    );
  });
}

t.test('changes committed in quick succession are each delivered at once, not at the next poll', async (t) => {
  const receiver = await startReceiver(t);
  // PostgreSQL announces an instance's events to the others at most every 100 ms: the instance that
  // wrote them wakes its own worker as each transaction commits.
  const api = await start(t, { webhooks: { ...FAST, pollMs: 60_000 } });
  await api.app.ready();
  await subscribed(api, receiver.url, ['pet.created']);
  // Each change after the last was delivered, so the worker is idle, and likely within 100 ms.
  for (const [index, name] of ['Rex', 'Max', 'Tom', 'Tim'].entries()) {
    await api.createPet({ name, categoryId: 1 });
    await receiver.waitFor(index + 1, 5000);
  }
  t.equal(receiver.received.length, 4, 'each within seconds, with a poll a minute away');
});

if (backend === 'postgres') {
  t.test('every transaction that wrote an event wakes its own worker, however close together', async (t) => {
    const api = await start(t);
    await subscribed(api, 'http://127.0.0.1:9/hook', ['pet.created']);
    const storage = await openDatabase(api.databaseUrl);
    t.teardown(() => storage.close());
    let wakes = 0;
    const stop = storage.deliveries.onCommit(() => (wakes += 1));
    t.teardown(stop);
    // Most likely within 100 ms of each other, so PostgreSQL is notified of the first alone.
    for (let i = 0; i < 5; i += 1) await storage.pets.create({ name: `Pet ${i}`, categoryId: 1, status: 'available' });
    t.ok(wakes >= 5, `woken ${wakes} times for 5 commits`);
  });
}

t.test("an event's timestamp is Date#toISOString's for any millisecond, in any order", async (t) => {
  // The formatter keeps the last second it formatted: a new second, an earlier one, the same one.
  // Every instant a Date holds (±8.64e15 ms), kept a step from either end.
  const instants = fc.integer({ min: -8.64e15 + 2500, max: 8.64e15 - 2500 });
  const nearby = fc.tuple(instants, fc.integer({ min: -2500, max: 2500 }));
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          instants,
          nearby.map(([at, step]) => at + step),
        ),
        { minLength: 1 },
      ),
      (ats) => ats.every((at) => isoTimestamp(at) === new Date(at).toISOString()),
    ),
  );
  const second = Date.UTC(2026, 10, 28, 5, 27, 59);
  t.same([second, second + 7, second + 999, second + 1000, second - 1].map(isoTimestamp), [
    '2026-11-28T05:27:59.000Z',
    '2026-11-28T05:27:59.007Z',
    '2026-11-28T05:27:59.999Z',
    '2026-11-28T05:28:00.000Z',
    '2026-11-28T05:27:58.999Z',
  ]);
});
