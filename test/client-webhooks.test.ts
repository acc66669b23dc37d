// The TypeScript client's unwrap: every kind of event the contract declares, delivered for real by
// the server to a loopback receiver, verified with Standard Webhooks (two secrets during a rotation),
// validated against the contract's schema and narrowed by its type.
import { createHmac, randomUUID } from 'node:crypto';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { unwrap as unwrapV2 } from '../clients/typescript/src/index.js';
import { createClient, PetstoreWebhookError, type ReceivedEvent, unwrap } from '../clients/typescript/src/v1.js';
import { conformingFetch, listen } from './helpers/api.js';
import { startReceiver } from './helpers/receiver.js';
import { declaredEvents, eventually, start } from './helpers/webhooks.js';
import { deliveredVersion } from './helpers/delivered-version.js';

/** The unwrap of the version whose payloads the server delivers to the suites' endpoints. */
const unwrapDelivered: typeof unwrap = deliveredVersion === 'v1' ? unwrap : unwrapV2;

/** What an event says, read through its narrowed type: each kind has its own `data`. */
function summary(event: ReceivedEvent): string {
  switch (event.type) {
    case 'pet.created':
    case 'pet.updated':
    case 'pet.deleted':
      return `${event.type} ${event.data.name}`;
    case 'order.placed':
    case 'order.completed':
    case 'order.cancelled':
      return `${event.type} ${event.data.status}`;
    case 'webhook.test':
      return `${event.type} ${event.data.webhookId}`;
  }
}

t.test('every event kind, delivered for real, is verified, validated and narrowed', async (t) => {
  const api = await start(t);
  const { baseUrl } = await listen(t, api);
  const client = createClient({ baseUrl, apiKey: api.key, fetch: conformingFetch });
  const receiver = await startReceiver(t);
  const kinds = Object.keys(declaredEvents) as ReceivedEvent['type'][];
  const endpoint = await client.createWebhook({ body: { url: receiver.url, events: kinds } });
  // From here on, every delivery is signed with both the rotated secret and the new one.
  const rotated = await client.rotateWebhookSecret({ path: { webhookId: endpoint.data.id } });

  const sold = await client.createPet({ body: { name: 'Sold', categoryId: 1 } });
  await client.updatePet({ path: { petId: sold.data.id }, body: { name: 'Sold soon' } });
  const order = await client.placeOrder({ body: { petId: sold.data.id } });
  await client.updateOrder({ path: { orderId: order.data.id }, body: { status: 'completed' } });
  const kept = await client.createPet({ body: { name: 'Kept', categoryId: 2 } });
  const cancelled = await client.placeOrder({ body: { petId: kept.data.id } });
  await client.updateOrder({ path: { orderId: cancelled.data.id }, body: { status: 'cancelled' } });
  await client.deletePet({ path: { petId: kept.data.id } });
  await client.testWebhook({ path: { webhookId: endpoint.data.id } });

  const secrets = [endpoint.data.secret, rotated.data.secret];
  const events = () => receiver.received.map(({ body, headers }) => unwrapDelivered(body, headers, secrets));
  await eventually('every kind delivered', async () => new Set(events().map(({ type }) => type)).size === kinds.length);
  const seen = new Map(events().map((event) => [event.id, summary(event)]));
  for (const expected of [
    'pet.created Sold',
    'pet.updated Sold soon',
    'order.placed placed',
    'order.completed completed',
    'order.cancelled cancelled',
    'pet.deleted Kept',
    `webhook.test ${endpoint.data.id}`,
  ]) {
    t.ok([...seen.values()].includes(expected), expected);
  }

  const [delivery] = receiver.received;
  if (delivery === undefined) throw new Error('nothing was delivered');
  for (const secret of secrets) {
    t.equal(
      unwrapDelivered(delivery.body, delivery.headers, [secret]).id,
      delivery.headers['webhook-id'],
      'either secret alone',
    );
  }
  const other = 'whsec_' + Buffer.alloc(24, 7).toString('base64');
  t.throws(() => unwrap(delivery.body, delivery.headers, [other]), PetstoreWebhookError, 'a secret not its own');
  t.throws(
    () => unwrap(delivery.body.replace('"data"', '"data" '), delivery.headers, secrets),
    PetstoreWebhookError,
    'a body changed after signing',
  );

  // Signed rightly, but not what the contract says a pet.created carries.
  const id = 'evt_forged';
  const timestamp = new Date();
  const body = JSON.stringify({ type: 'pet.created', timestamp: timestamp.toISOString(), data: { id: 1 } });
  const headers = {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(other).sign(id, timestamp, body),
  };
  t.throws(() => unwrap(body, headers, [other]), {
    name: 'PetstoreWebhookError',
    check: 'payload',
    message: /not the contract's/,
  });

  // The same delivery as bytes, exactly as they came.
  t.equal(
    unwrapDelivered(Buffer.from(delivery.body), delivery.headers, secrets).id,
    delivery.headers['webhook-id'],
    'as bytes',
  );
});

/** Headers signing `body` (a string, as UTF-8, or bytes) with `secret` at `at`, as Standard Webhooks says. */
function signed(body: string | Buffer, secret: string, at = new Date()) {
  const id = `evt_${randomUUID()}`;
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const mac = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64'))
    .update(`${id}.${timestamp}.`)
    .update(body)
    .digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${mac}` };
}

t.test('unwrap throws only PetstoreWebhookError, and says which check failed', async (t) => {
  const secret = 'whsec_' + Buffer.alloc(24, 9).toString('base64');
  const event = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { webhookId: 3 } });
  t.equal(unwrap(event, signed(event, secret), [secret]).type, 'webhook.test', 'a rightly signed event');

  const failures: [string, () => unknown, string][] = [
    ['an empty body, rightly signed', () => unwrap('', signed('', secret), [secret]), 'payload'],
    ['a JSON null, rightly signed', () => unwrap('null', signed('null', secret), [secret]), 'payload'],
    ['a JSON array, rightly signed', () => unwrap('[1]', signed('[1]', secret), [secret]), 'payload'],
    [
      'not UTF-8, rightly signed',
      () => unwrap(Buffer.from([0xff, 0xfe]), signed(Buffer.from([0xff, 0xfe]), secret), [secret]),
      'payload',
    ],
    ['no headers', () => unwrap(event, {}, [secret]), 'timestamp'],
    ['null headers', () => unwrap(event, null as never, [secret]), 'timestamp'],
    [
      'a timestamp ten minutes old',
      () => unwrap(event, signed(event, secret, new Date(Date.now() - 600_000)), [secret]),
      'timestamp',
    ],
    [
      'another secret',
      () => unwrap(event, signed(event, secret), ['whsec_' + Buffer.alloc(24, 1).toString('base64')]),
      'signature',
    ],
    ['no secrets', () => unwrap(event, signed(event, secret), []), 'signature'],
    ['a secret that is not base64', () => unwrap(event, signed(event, secret), ['whsec_!!']), 'secret'],
    ['an empty secret', () => unwrap(event, signed(event, secret), ['']), 'secret'],
    [
      'a body that is neither string nor bytes',
      () => unwrap(undefined as never, signed(event, secret), [secret]),
      'payload',
    ],
    [
      'a body over the limit, checked before the signature',
      () => unwrap(event, { ...signed(event, secret), 'webhook-signature': 'v1,AAAA' }, [secret], { maxBodyBytes: 64 }),
      'size',
    ],
  ];
  for (const [what, attempt, check] of failures) {
    t.throws(attempt, { name: 'PetstoreWebhookError', check }, `${what}: ${check}`);
    try {
      attempt();
    } catch (error) {
      t.ok(error instanceof PetstoreWebhookError, `${what}: nothing but a PetstoreWebhookError`);
    }
  }

  const big = JSON.stringify({
    type: 'webhook.test',
    timestamp: new Date().toISOString(),
    data: { webhookId: 3 },
    x: 'é'.repeat(600_000),
  });
  t.throws(
    () => unwrap(big, signed(big, secret), [secret]),
    { name: 'PetstoreWebhookError', check: 'size' },
    '1 MiB by default: 1.2 MB of bytes in 0.6 M characters',
  );
});

t.test('a rightly signed body that starts with a byte order mark verifies, as a string or as bytes', async (t) => {
  const secret = 'whsec_' + Buffer.alloc(24, 5).toString('base64');
  const json = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { webhookId: 8 } });
  const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]);
  const headers = signed(bytes, secret);
  t.equal(unwrap(bytes, headers, [secret]).type, 'webhook.test', 'the bytes as received');
  t.equal(unwrap(new Uint8Array(bytes), headers, [secret]).type, 'webhook.test', 'a Uint8Array');
  t.equal(unwrap(bytes.toString('utf8'), headers, [secret]).type, 'webhook.test', 'the string they decode to');
  t.throws(
    () => unwrap(json, headers, [secret]),
    { name: 'PetstoreWebhookError', check: 'signature' },
    'without the mark, it is not what was signed',
  );
});
