import t from 'tap';
import { eventScopesOf, eventsWithoutScope } from '../src/contract/document.js';
import type { ErrorBody } from '../src/domain/errors.js';
import type { EventType, WebhookDelivery, WebhookEndpoint } from '../src/domain/events.js';
import { DEFAULT_WEBHOOKS, webhookSettingsFrom } from '../src/events/settings.js';
import { issueKey } from '../src/auth/api-keys.js';
import type { Storage } from '../src/storage/types.js';
import type { TapTest, TestApi } from './helpers/api.js';
import { newDatabase, openDatabase } from './helpers/backend.js';
import { contract } from './helpers/contract.js';
import { startReceiver } from './helpers/receiver.js';
import {
  eventually,
  FAST,
  patch,
  start,
  subscribe,
  subscribed,
  verified,
  type WithSecret,
} from './helpers/webhooks.js';

/** A receiver's answer that never comes: the request stays open until the sender gives up. */
const never = () => new Promise<never>(() => undefined);

/** A key of a new account of `api`'s database, holding `scopes` (all when undefined). */
async function keyOf(api: TestApi, account: string, scopes?: string[]) {
  const found = await api.storage.accounts.findAccount(account);
  const { id } = found ?? (await api.storage.accounts.createAccount(account));
  const { key } = await issueKey(api.storage.accounts, id, scopes === undefined ? {} : { scopes });
  return { authorization: `Bearer ${key}` };
}

function endpoints(api: TestApi, auth: { authorization: string }) {
  return api.request({ method: 'GET', url: '/v1/webhooks', headers: auth }).then((r) => r.json<WebhookEndpoint[]>());
}

t.test('subscribing to a kind needs the scope its data needs, as the contract names it', async (t) => {
  const api = await start(t);
  const manageOnly = await keyOf(api, 'tests', ['webhooks:manage']);
  const readsPets = await keyOf(api, 'tests', ['webhooks:manage', 'pets:read']);
  const url = 'http://127.0.0.1:9/hook';
  t.ok(contract.eventScopes.size > 0, 'the contract names a scope for its kinds');
  for (const [kind, scope] of contract.eventScopes) {
    const response = await subscribe(api, url, [kind as EventType], manageOnly);
    if (scope === 'webhooks:manage') {
      t.equal(response.statusCode, 201, `${kind} needs only ${scope}`);
      continue;
    }
    t.equal(response.statusCode, 403, `${kind} without ${scope}`);
    t.same(response.json<ErrorBody>(), {
      code: 'insufficient_scope',
      message: `This API key lacks the scope ${scope}, which ${kind} events need`,
      status: 403,
    });
  }
  const mixed = await subscribe(api, url, ['pet.created', 'order.placed'], readsPets);
  t.match(mixed.json<ErrorBody>(), { code: 'insufficient_scope', message: /lacks the scope orders:read/ });
  const pets = await subscribe(api, url, ['pet.created'], readsPets);
  t.equal(pets.statusCode, 201, 'a key that reads pets subscribes to pet events');
  const endpoint = (await endpoints(api, readsPets)).find((e) => e.id === pets.json<WebhookEndpoint>().id);
  if (endpoint === undefined) throw new Error('the endpoint is not listed');

  // A change could send the endpoint's data elsewhere (url), again (enabled) or add kinds (events).
  const change = (body: object, auth: { authorization: string }) =>
    api.request({
      method: 'PATCH',
      url: `/v1/webhooks/${endpoint.id}`,
      headers: { ...auth, 'content-type': 'application/merge-patch+json' },
      payload: JSON.stringify(body),
    });
  for (const body of [{ url: 'http://127.0.0.1:10/theirs' }, { enabled: false }, { events: ['pet.deleted'] }]) {
    const refused = await change(body, manageOnly);
    t.equal(refused.statusCode, 403, `${JSON.stringify(body)} by a key that cannot read pets`);
    t.match(refused.json<ErrorBody>().message, /lacks the scope pets:read, which pet\.\w+ events need/);
  }
  t.equal((await change({ events: ['order.placed'] }, readsPets)).statusCode, 403, 'nor add kinds it cannot read');
  t.same(
    (await endpoints(api, api.auth)).find((e) => e.id === endpoint.id),
    endpoint,
    'none of the refused changes changed anything',
  );
  t.equal((await change({ events: ['pet.deleted'] }, readsPets)).statusCode, 200, 'a key with the scope changes it');
  t.equal((await change({ enabled: false }, api.auth)).statusCode, 200, 'a key with every scope too');
});

t.test('a contract whose event kind names no scope a key can be given is refused', async (t) => {
  t.same(eventsWithoutScope(contract.dereferenced), [], 'this one names one for each');
  const document = structuredClone(contract.dereferenced);
  const hooks = document.webhooks as Record<string, { post: { 'x-scope'?: string } }>;
  delete hooks['pet.created']?.post['x-scope'];
  if (hooks['order.placed'] !== undefined) hooks['order.placed'].post['x-scope'] = 'orders:everything';
  t.same(
    eventsWithoutScope(document).map((message) => message.split(':')[0]),
    ['event pet.created names no scope that reads its data', 'event order.placed names no scope that reads its data'],
  );
  t.notOk(eventScopesOf(document).has('pet.created'), 'nor may it be subscribed to by a key with scopes');
});

t.test('a URL with credentials is refused, on create and on change', async (t) => {
  const api = await start(t);
  for (const url of [
    'http://user:secret@127.0.0.1:9/hook',
    'http://user@127.0.0.1:9/hook',
    'http://:secret@127.0.0.1:9/',
  ]) {
    const response = await subscribe(api, url, ['pet.created']);
    t.equal(response.statusCode, 400, url);
    t.equal(response.json<ErrorBody>().code, 'webhook_url_refused');
    t.match(response.json<ErrorBody>().message, /^url: credentials \(user:password@\) are not taken in a URL/);
    t.notMatch(response.body, /secret/, 'the message does not repeat them');
  }
  const endpoint = await subscribed(api, 'http://127.0.0.1:9/hook', ['pet.created']);
  const changed = await patch(api, `/v1/webhooks/${endpoint.id}`, { url: 'http://user:secret@127.0.0.1:9/hook' });
  t.equal(changed.statusCode, 400);
  t.equal(changed.json<ErrorBody>().code, 'webhook_url_refused');
  t.same(
    (await endpoints(api, api.auth)).map((e) => e.url),
    ['http://127.0.0.1:9/hook'],
    'nothing was kept',
  );
});

t.test('an account has at most WEBHOOK_MAX_ENDPOINTS endpoints, however fast it asks', async (t) => {
  const api = await start(t, { webhooks: { ...FAST, maxEndpoints: 3 } });
  const url = 'http://127.0.0.1:9/hook';
  const answers = await Promise.all(Array.from({ length: 8 }, () => subscribe(api, url, ['pet.created'])));
  t.same(
    answers.map((a) => a.statusCode).sort(),
    [201, 201, 201, 409, 409, 409, 409, 409],
    'eight at once: three made',
  );
  t.same(answers.find((a) => a.statusCode === 409)?.json(), {
    code: 'webhook_limit_reached',
    message: 'This account has the most webhook endpoints it may have (3): remove one first',
    status: 409,
  });
  const mine = await endpoints(api, api.auth);
  t.equal(mine.length, 3);
  const other = await keyOf(api, 'other');
  t.equal((await subscribe(api, url, ['pet.created'], other)).statusCode, 201, 'another account has its own');
  await api.request({ method: 'DELETE', url: `/v1/webhooks/${mine[0]?.id}`, headers: api.auth });
  t.equal((await subscribe(api, url, ['pet.created'])).statusCode, 201, 'one removed, one more may be made');
  t.equal((await subscribe(api, url, ['pet.created'])).statusCode, 409);
});

/** A storage of its own, no worker: the claims the test makes are the only ones. */
async function queueOnly(t: TapTest): Promise<Storage> {
  const storage = await openDatabase(await newDatabase(t));
  t.teardown(() => storage.close());
  return storage;
}

async function endpointOf(storage: Storage, account: string, kinds: EventType[]): Promise<number> {
  const { id } = await storage.accounts.createAccount(account);
  const endpoint = await storage.webhooks.create(id, { url: 'http://127.0.0.1:9/', events: kinds }, 'whsec_x', 20);
  if (endpoint === 'limit_reached') throw new Error('no endpoint made');
  return endpoint.id;
}

t.test('a claim takes accounts in turn, and no more of an endpoint or an account than its cap in flight', async (t) => {
  const storage = await queueOnly(t);
  const busy = await endpointOf(storage, 'busy', ['pet.created']);
  const quiet = await endpointOf(storage, 'quiet', ['pet.updated']);
  let last;
  for (let n = 0; n < 11; n++)
    last = await storage.pets.create({ name: `Pet ${n}`, categoryId: 1, status: 'available' });
  if (last?.outcome !== 'created') throw new Error('no pet made');
  // Its pet.updated is the newest message of all, to the quiet account's endpoint.
  await storage.pets.update(last.created.pet.id, () => ({ name: 'Changed' }));
  const lease = 60_000;
  const caps = { perEndpoint: 5, perAccount: 100 };

  const first = await storage.deliveries.claim(2, lease, caps);
  t.same(
    first.map((d) => d.endpointId).sort(),
    [busy, quiet].sort(),
    "two places: each account's first message, though the busy one's ten are older",
  );
  const second = await storage.deliveries.claim(100, lease, caps);
  t.same(
    second.map((d) => d.endpointId),
    [busy, busy, busy, busy],
    'the busy endpoint up to its cap of 5 in flight, not all of its 11',
  );
  t.same(await storage.deliveries.claim(100, lease, caps), [], 'nothing more while they are in flight');
  const due = await storage.deliveries.nextDueAt(caps);
  t.ok(due !== undefined && due > Date.now() + lease / 2, 'and nothing due before their leases end');

  const [finished] = second;
  if (finished === undefined) throw new Error('nothing claimed');
  await storage.deliveries.settle([
    { delivery: finished, attemptedAt: Date.now(), durationMs: 1, responseStatus: 204, next: 'delivered' },
  ]);
  t.ok(((await storage.deliveries.nextDueAt(caps)) ?? Infinity) <= Date.now(), 'one settled: the next is due now');
  t.same(
    (await storage.deliveries.claim(100, lease, caps)).map((d) => d.endpointId),
    [busy],
    'and one more may go',
  );
  const accountCap = { perEndpoint: 100, perAccount: 7 };
  t.same(
    (await storage.deliveries.claim(100, lease, accountCap)).map((d) => d.endpointId),
    [busy, busy],
    'an account with 5 in flight and a cap of 7: two more, though its endpoint may have more',
  );
  t.same(await storage.deliveries.claim(100, lease, accountCap), [], 'then none');
  const accountDue = await storage.deliveries.nextDueAt(accountCap);
  t.ok(accountDue !== undefined && accountDue > Date.now() + lease / 2, 'nor any due before a lease ends');
});

t.test("another account's 30 endpoints that never answer hold up no other account's events", async (t) => {
  // Attempts that hang for the whole test: their places stay taken until it ends.
  const webhooks = { ...FAST, timeoutMs: 120_000, maxEndpoints: 30 };
  const api = await start(t, { webhooks });
  const theirs = await keyOf(api, 'hanging');
  const hanging = await Promise.all(Array.from({ length: 30 }, () => startReceiver(t, never)));
  const secrets = new Map<(typeof hanging)[number], string>();
  for (const receiver of hanging) {
    const response = await subscribe(api, receiver.url, ['pet.created'], theirs);
    secrets.set(receiver, response.json<WithSecret>().secret);
  }
  // Signed for its endpoint: another test process's late retry to a port reused here is not counted.
  const held = (receiver: (typeof hanging)[number]) =>
    receiver.received.filter((received) => {
      try {
        return verified(secrets.get(receiver) ?? '', received).type === 'pet.created';
      } catch {
        return false;
      }
    }).length;
  const { accountConcurrency, endpointConcurrency } = webhooks;
  const pets = [];
  for (let n = 0; n < 5; n++) pets.push(await api.createPet({ name: `P${n}`, categoryId: 1 }));
  // 150 messages: their account holds its cap of attempts, spread over its endpoints in turn; the
  // rest of their messages wait.
  const holding = () => hanging.map(held).reduce((sum, count) => sum + count, 0);
  await eventually('their account holds its cap', async () => holding() >= accountConcurrency);

  const healthy = await startReceiver(t);
  const endpoint = await subscribed(api, healthy.url, ['pet.updated']);
  const latencies: number[] = [];
  for (const [n, pet] of pets.slice(0, 5).entries()) {
    const changed = Date.now();
    t.equal((await patch(api, `/v1/pets/${pet.id}`, { name: `Changed ${n}` })).statusCode, 200);
    await healthy.waitFor(n + 1);
    latencies.push((healthy.received[n]?.at ?? Infinity) - changed);
  }
  t.ok(Math.max(...latencies) < 1000, `each event arrived within 1 s (${latencies.join(', ')} ms)`);
  t.equal(holding(), accountConcurrency, 'while their account still held its cap of attempts, and no more');
  t.ok(
    hanging.every((receiver) => held(receiver) >= 1 && held(receiver) <= endpointConcurrency),
    `each of its endpoints some, in turn (${hanging.map(held).join(' ')})`,
  );
  const finished = [];
  for (const { id } of await endpoints(api, theirs)) {
    const attempts = await api.request({ method: 'GET', url: `/v1/webhooks/${id}/deliveries`, headers: theirs });
    finished.push(...attempts.json<WebhookDelivery[]>());
  }
  t.same(finished, [], 'none of their attempts had finished');
  await eventually('the healthy attempts are recorded', async () => {
    const listed = await api.request({
      method: 'GET',
      url: `/v1/webhooks/${endpoint.id}/deliveries`,
      headers: api.auth,
    });
    return listed.json<WebhookDelivery[]>().length === 5;
  });
  t.ok(DEFAULT_WEBHOOKS.concurrency > accountConcurrency, 'by default, no one account can hold every place');
});

t.test('the fairness settings are read from the environment, and nonsense is refused', async (t) => {
  const read = webhookSettingsFrom({
    WEBHOOK_CONCURRENCY: '32',
    WEBHOOK_ENDPOINT_CONCURRENCY: '2',
    WEBHOOK_ACCOUNT_CONCURRENCY: '3',
    WEBHOOK_MAX_ENDPOINTS: '5',
  });
  t.match(read, { concurrency: 32, endpointConcurrency: 2, accountConcurrency: 3, maxEndpoints: 5 });
  t.match(webhookSettingsFrom({}), {
    concurrency: DEFAULT_WEBHOOKS.concurrency,
    endpointConcurrency: DEFAULT_WEBHOOKS.endpointConcurrency,
    accountConcurrency: DEFAULT_WEBHOOKS.accountConcurrency,
    maxEndpoints: DEFAULT_WEBHOOKS.maxEndpoints,
  });
  for (const value of ['0', '-1', '1.5', 'many', '08']) {
    t.throws(
      () => webhookSettingsFrom({ WEBHOOK_MAX_ENDPOINTS: value }),
      /WEBHOOK_MAX_ENDPOINTS must be a whole number above 0/,
    );
  }
});
