import t from 'tap';
import { combineLoads, type Measurement } from '../scripts/bench/load.js';

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
