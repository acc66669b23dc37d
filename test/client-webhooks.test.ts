// The TypeScript client's unwrap: every kind of event the contract declares, delivered for real by
// the server to a loopback receiver, verified with Standard Webhooks (two secrets during a rotation),
// validated against the contract's schema and narrowed by its type.
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { createClient, PetstoreWebhookError, type ReceivedEvent, unwrap } from '../clients/typescript/src/index.js';
import { conformingFetch, listen } from './helpers/api.js';
import { startReceiver } from './helpers/receiver.js';
import { declaredEvents, eventually, start } from './helpers/webhooks.js';

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
  const events = () => receiver.received.map(({ body, headers }) => unwrap(body, headers, secrets));
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
      unwrap(delivery.body, delivery.headers, [secret]).id,
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
  t.throws(() => unwrap(body, headers, [other]), { name: 'PetstoreWebhookError', message: /not the contract's/ });
});
