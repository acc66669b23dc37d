import t from 'tap';
import { Receiver } from '../scripts/bench/webhooks.js';

// The webhooks part waits on its receiver to have every event a subscribed turn announced: these
// tests hold the receiver to answering at once and counting what arrives. Nothing is timed here.

t.test('the receiver answers 204 at once and counts each request until reset', async (t) => {
  const receiver = await Receiver.start();
  t.teardown(() => receiver.stop());
  t.match(receiver.url, /^http:\/\/127\.0\.0\.1:\d+\/hook$/);
  for (const id of ['evt_1', 'evt_2']) {
    const response = await fetch(receiver.url, { method: 'POST', headers: { 'webhook-id': id }, body: '{}' });
    t.equal(response.status, 204);
  }
  t.equal(await receiver.count(), 2);
  await receiver.waitFor(2);
  receiver.reset();
  t.equal(await receiver.count(), 0, 'forgotten after a reset');
});
