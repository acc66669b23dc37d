import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { combineLoads, type Measurement, openLoop } from '../scripts/bench/load.js';

// The benchmark loads the two servers in turn, a second at a time, and reports each server's
// slices as one measurement: these tests hold that sum to what a single longer load would report.

function slice(seconds: number, latencies: number[], statuses: Record<string, number>): Measurement {
  return {
    rps: latencies.length / seconds,
    p50Ms: Number.NaN,
    p99Ms: Number.NaN,
    errors: 0,
    statuses,
    responses: latencies.length,
    seconds,
  };
}

t.test('slices combine into the rate, counts and percentiles of all their responses', async (t) => {
  const fast = Array.from({ length: 300 }, () => 1);
  const slow = [...Array.from({ length: 99 }, () => 2), 50];
  const combined = combineLoads(
    [slice(1, fast, { '200': 300 }), slice(2, slow, { '200': 98, '404': 2 })],
    [...fast, ...slow],
  );
  // 400 responses over 3 s, not the mean of 300/s and 50/s.
  t.equal(combined.rps, 400 / 3);
  t.equal(combined.responses, 400);
  t.equal(combined.seconds, 3);
  t.same(combined.statuses, { '200': 398, '404': 2 });
  t.equal(combined.p50Ms, 1, 'three quarters of the responses took 1 ms');
  t.equal(combined.p99Ms, 2, 'the 400th response is above the 99th percentile');
});

t.test('a load that got no response has no rate', async (t) => {
  const combined = combineLoads([slice(1, [], {})], []);
  t.equal(combined.rps, 0);
  t.equal(combined.responses, 0);
});

t.test('an open loop sends on schedule and counts each latency from when the request was due', async (t) => {
  // Each answer takes 20 ms and there is one connection: 50 answers a second at most, for 100 due.
  let answered = 0;
  const server = createServer((_request, response) => {
    answered += 1;
    setTimeout(() => response.writeHead(answered % 2 === 0 ? 503 : 200).end('{}'), 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const request = () => 'GET / HTTP/1.1\r\nhost: test\r\n\r\n';
  const m = await openLoop({ origin, request, rate: 100, seconds: 0.5, connections: 1 });
  t.equal(m.responses, 50, 'every request due is answered, once the connection is free');
  t.same(m.statuses, { '200': 25, '503': 25 });
  t.equal(m.errors, 0);
  // The 49th request was due at 490 ms and answered after 50 answers of 20 ms: it waited ~500 ms
  // for the connection. Counted from when it was sent, each would read ~20 ms.
  t.ok(m.p99Ms > 300, `the wait for a free connection counts: p99 ${m.p99Ms.toFixed(0)} ms`);
});
