import t from 'tap';
import type { WebhookDelivery } from '../src/domain/events.js';
import type { Pet } from '../src/storage/types.js';
import type { Teardown } from './helpers/api.js';
import { backend, newDatabase, probeDatabase } from './helpers/backend.js';
import { clientOf, databaseWithKey, type ServerProcess, startServerProcess } from './helpers/process.js';
import { samples, scrapeUrl } from './helpers/prometheus.js';
import { closedPort, startReceiver } from './helpers/receiver.js';
import { eventually, payloadConforms, verified, type WithSecret } from './helpers/webhooks.js';

/** A receiver's answer that never comes: the request stays open until the sender goes. */
const never = () => new Promise<never>(() => undefined);

/** A database with a key, and the environment a server process serves it with, delivering to loopback. */
async function deployment(t: Teardown, env: Record<string, string> = {}) {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  return {
    databaseUrl,
    key,
    env: { DATABASE_URL: databaseUrl, WEBHOOK_ALLOWED_NETWORKS: 'loopback', ...env },
  };
}

/** The delivery metrics of a server process, from the address its banner gives. */
async function deliveriesOf(server: ServerProcess): Promise<Map<string, number>> {
  const url = /^ {2}metrics: (http:\/\/\S+)$/m.exec(server.output())?.[1];
  if (url === undefined) throw new Error('no metrics address in the banner');
  return samples(await scrapeUrl(url), 'petstore_webhook_deliveries_total');
}

t.test('no log line carries a signing secret or an API key', async (t) => {
  const { key, env } = await deployment(t, { LOG_LEVEL: 'trace', WEBHOOK_RETRY_SCHEDULE: '0,100ms,100ms' });
  const server = await startServerProcess(t, env);
  const api = clientOf(server, key);
  const ok = await startReceiver(t);
  const failing = await startReceiver(t, () => ({ status: 500 }));
  const urls = [ok.url, failing.url, `http://127.0.0.1:${await closedPort()}/hook`];
  const endpoints: WithSecret[] = [];
  for (const url of urls)
    endpoints.push((await api<WithSecret>('POST', '/webhooks', { url, events: ['pet.created'] })).body);
  const [first] = endpoints as [WithSecret];
  const rotated = await api<WithSecret>('POST', `/webhooks/${first.id}/secret`);
  t.equal(rotated.status, 200);
  t.equal((await api('POST', `/webhooks/${first.id}/test`)).status, 202);
  t.equal((await api('POST', '/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  await ok.waitFor(2);
  t.same(
    ok.received.map((received) => verified(rotated.body.secret, received).type),
    ['webhook.test', 'pet.created'],
    'delivered, signed with the new secret',
  );
  for (const endpoint of endpoints.slice(1)) {
    await eventually(`every attempt to ${endpoint.url} is recorded`, async () => {
      const listed = await api<WebhookDelivery[]>('GET', `/webhooks/${endpoint.id}/deliveries`);
      return listed.body.length === 3;
    });
  }
  const refused = await fetch(`${server.baseUrl}/webhooks`, { headers: { authorization: `Bearer ${key}x` } });
  t.equal(refused.status, 401, 'a wrong key, refused');
  t.equal(await server.stop('SIGTERM'), 0);

  const logs = server.output();
  const lines = logs.split('\n').filter((line) => line.startsWith('{'));
  t.ok(lines.length >= 12, `the server logged (${lines.length} lines)`);
  t.ok(
    lines.some((line) => line.includes('"url":"/v1/webhooks"')),
    'the subscriptions among them',
  );
  t.ok(
    lines.some((line) => line.includes('/secret"')),
    'the rotation among them',
  );
  const secrets = [...endpoints.map((endpoint) => endpoint.secret), rotated.body.secret];
  for (const [i, secret] of secrets.entries()) {
    t.notOk(logs.includes(secret), `secret ${i + 1} is in no log line`);
    t.notOk(logs.includes(secret.slice('whsec_'.length)), `nor its base64 body`);
  }
  t.notOk(logs.includes('whsec_'), 'no secret of any kind');
  t.notOk(logs.includes(key.slice('psk_'.length)), 'nor the API key');
});

t.test('a change acknowledged just before a SIGKILL is delivered by the next server on the database', async (t) => {
  // A 1 s timeout: the dead instance's lease lasts 31 s (the timeout and 30 s).
  const { databaseUrl, key, env } = await deployment(t, { WEBHOOK_TIMEOUT: '1s' });
  let killed = false;
  const receiver = await startReceiver(t, () => (killed ? { status: 204 } : never()));
  const first = await startServerProcess(t, env);
  const api = clientOf(first, key);
  const endpoint = (await api<WithSecret>('POST', '/webhooks', { url: receiver.url, events: ['pet.created'] })).body;
  const before = Date.now();
  const created = await api<Pet>('POST', '/pets', { name: 'Rex', categoryId: 1 });
  t.equal(created.status, 201, 'the change is acknowledged');
  // Its attempt is in flight, held by the receiver, when the process is killed.
  await receiver.waitFor(1);
  await first.stop('SIGKILL');
  killed = true;
  const probe = await probeDatabase(t, databaseUrl);
  const state = async () => {
    const [row] = await probe.query<{ state: string; lease_until: number | string | null }>(
      'SELECT state, lease_until FROM webhook_deliveries',
    );
    return { state: row?.state, leaseUntil: Number(row?.lease_until) };
  };
  const { leaseUntil } = await state();
  t.ok(leaseUntil > Date.now(), 'the dead instance still holds its lease');

  await startServerProcess(t, env);
  await eventually(
    'the next server delivers the message',
    async () => (await state()).state === 'delivered',
    leaseUntil - Date.now() + 15_000,
  );
  const delivered = receiver.received.at(-1);
  if (delivered === undefined) throw new Error('nothing received');
  t.ok(delivered.at >= leaseUntil, 'not before the dead instance’s lease ended');
  t.equal(delivered.headers['webhook-id'], receiver.received[0]?.headers['webhook-id'], 'the same event');
  const payload = verified(endpoint.secret, delivered);
  t.same(payload, { type: 'pet.created', timestamp: payload.timestamp, data: created.body }, 'the pet as answered');
  const committed = Date.parse(payload.timestamp);
  t.ok(committed >= before - 1000 && committed <= delivered.at, 'timestamped when the change was made');
  t.ok(payloadConforms('pet.created', payload), 'the payload the contract declares');
});

// Instances hear of each other's commits on PostgreSQL only (LISTEN/NOTIFY); on SQLite one
// instance owns its database file.
if (backend === 'postgres') {
  t.test('an instance is woken by another’s commit (NOTIFY), not by its polling timer', async (t) => {
    // Attempts that outlast the test, and polls far apart.
    // 16 places, all of which one endpoint may hold.
    const places = 16;
    const { key, env } = await deployment(t, {
      WEBHOOK_TIMEOUT: '60s',
      WEBHOOK_POLL_INTERVAL: '60s',
      WEBHOOK_CONCURRENCY: String(places),
      WEBHOOK_ENDPOINT_CONCURRENCY: String(places),
    });
    const holding = await startReceiver(t, never);
    const writer = await startServerProcess(t, env);
    const api = clientOf(writer, key);
    await api('POST', '/webhooks', { url: holding.url, events: ['pet.created'] });
    // The writer's worker fills all its places with attempts the receiver holds: it can claim no more.
    const pets = await Promise.all(
      Array.from({ length: places }, (_, i) => api<Pet>('POST', '/pets', { name: `Pet ${i}`, categoryId: 1 })),
    );
    await holding.waitFor(places);

    const deliverer = await startServerProcess(t, env);
    const receiver = await startReceiver(t);
    const endpoint = (await api<WithSecret>('POST', '/webhooks', { url: receiver.url, events: ['pet.updated'] })).body;
    const [pet] = pets;
    const changed = Date.now();
    t.equal((await api('PATCH', `/pets/${pet?.body.id}`, { name: 'Rexy' })).status, 200, 'the writer takes the change');
    await receiver.waitFor(1, 10_000);
    t.ok(receiver.received[0] !== undefined && receiver.received[0].at - changed < 10_000, 'delivered within 10 s');
    t.match(verified(endpoint.secret, receiver.received[0] as never), { type: 'pet.updated', data: { name: 'Rexy' } });
    t.same(
      [...(await deliveriesOf(deliverer))],
      [['{event_type="pet.updated",outcome="delivered"}', 1]],
      'by the other instance',
    );
    t.same([...(await deliveriesOf(writer))], [], 'the writer, full, delivered nothing');
    t.equal(holding.received.length, places, 'and claimed nothing more');
  });
}
