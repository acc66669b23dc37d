import t from 'tap';
import { commitToReceipt, percentile, Receiver, steadyRate } from '../scripts/bench/webhooks.js';

// The webhooks part of the benchmark reads delivery from what its receiver saw: these tests hold
// that reading (the steady rate, each event paired with its create's 201) to what the report says,
// and the receiver to answering and keeping what arrives. Nothing is timed here.

t.test('the steady rate leaves out the first and the last tenth of the arrivals', async (t) => {
  // 95 arrivals every 10 ms, then 5 stragglers 10 s later: a tail the rate must not average in.
  const arrivals = [...Array.from({ length: 95 }, (_, n) => n * 10), ...Array.from({ length: 5 }, () => 10_000)];
  const rate = steadyRate(arrivals.reverse());
  t.same(rate, { perSecond: 100, windowMs: 800, events: 80 }, 'the 10th to the 90th arrival: 80 in 800 ms');
  t.equal(percentile([5, 1, 4, 2, 3], 0.5), 3);
  t.equal(
    percentile(
      Array.from({ length: 100 }, (_, n) => n + 1),
      0.99,
    ),
    100,
    "as load.ts's p99 takes it",
  );
});

t.test('each event is paired with its pet 201 by id; repeats and other pets are counted, not measured', async (t) => {
  const acknowledged = new Map([
    [1, 1_000],
    [2, 2_000],
    [3, 3_000],
  ]);
  const event = (id: string, pet: number, at: number, committed: number) => ({
    id,
    at,
    body: JSON.stringify({ type: 'pet.created', timestamp: new Date(committed).toISOString(), data: { id: pet } }),
  });
  const paired = commitToReceipt(acknowledged, [
    event('evt_1', 1, 1_010, 999),
    event('evt_2', 2, 2_030, 1_990),
    event('evt_1', 1, 1_500, 999),
    event('evt_9', 99, 2_500, 2_400),
  ]);
  t.same(paired.fromAck, [10, 30], 'from the 201 at the client');
  t.same(paired.fromTimestamp, [11, 40], "from the payload's timestamp");
  t.equal(paired.strays, 2, 'a repeated webhook-id and a pet no create of the load made');
  t.equal(paired.missing, 1, 'pet 3 was never announced');
});

t.test('the receiver answers 204 at once and keeps each request until reset', async (t) => {
  const receiver = await Receiver.start();
  t.teardown(() => receiver.stop());
  t.match(receiver.url, /^http:\/\/127\.0\.0\.1:\d+\/hook$/);
  for (const id of ['evt_1', 'evt_2']) {
    const response = await fetch(receiver.url, {
      method: 'POST',
      headers: { 'webhook-id': id },
      body: `{"n":"${id}"}`,
    });
    t.equal(response.status, 204);
  }
  t.equal((await receiver.count()).count, 2);
  const { arrivals } = await receiver.report();
  t.same(
    arrivals.map(({ id, body }) => [id, body]),
    [
      ['evt_1', '{"n":"evt_1"}'],
      ['evt_2', '{"n":"evt_2"}'],
    ],
  );
  t.ok(
    arrivals.every(({ at }) => Math.abs(at - Date.now()) < 60_000),
    'arrival times on the wall clock',
  );
  receiver.reset();
  t.equal((await receiver.count()).count, 0, 'forgotten after a reset');
});
