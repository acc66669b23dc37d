import t from 'tap';
import type { Measurement } from '../scripts/bench/load.js';
import { held } from '../scripts/bench/overload.js';
import { benchSettings } from '../scripts/bench/settings.js';

// Load held is judged by what happened to each request: served, shed with a 503, or failed in any
// other way. These tests hold that sorting to what the report says; no load is applied here.

function measurement(statuses: Record<string, number>, errors = 0): Measurement {
  const responses = Object.values(statuses).reduce((sum, n) => sum + n, 0);
  return { rps: responses, p99Ms: 9, errors, statuses, responses, seconds: 1 };
}

t.test('503s count as shed, other statuses and socket errors as failed, 2xx as served', async (t) => {
  const result = held('protected', '2x load', 2000, measurement({ '200': 700, '503': 250, '500': 30, '404': 20 }, 5));
  t.equal(result.shedShare, 0.25);
  t.equal(result.failed, 55, 'a 500, a 404 and a socket error are each a failure, never a shed request');
  t.equal(result.servedP99Ms, 9);
  t.equal(held('unprotected', '2x load', 2000, measurement({ '200': 1000 })).failed, 0);
  t.equal(held('x', 'idle', 0, measurement({})).shedShare, 0, 'no responses: nothing shed, not NaN');
});

t.test(
  'quick mode shortens the defaults, an explicit BENCH_ROUNDS still wins, unknown parts are refused, scenarios can be picked',
  async (t) => {
    const quick = benchSettings({ BENCH_QUICK: '1', BENCH_ROUNDS: '4' });
    t.same([quick.seconds, quick.warmupSeconds, quick.rounds], [2, 5, 4]);
    t.throws(() => benchSettings({ BENCH_ROUNDS: 'five' }), /BENCH_ROUNDS must be a whole number/);
    t.same(benchSettings({}).parts, ['sqlite', 'postgres', 'versions', 'webhooks', 'overload', 'balancer']);
    t.same(benchSettings({ BENCH_PARTS: 'postgres' }).parts, ['postgres']);
    t.same(benchSettings({ BENCH_PARTS: 'features' }).parts, ['features'], 'the price list, when named');
    t.throws(() => benchSettings({ BENCH_PARTS: 'sqlite,redis' }), /BENCH_PARTS: unknown redis/);
    t.equal(benchSettings({}).scenarios, undefined, 'every scenario');
    t.same(benchSettings({ BENCH_SCENARIOS: 'get-one, create' }).scenarios, ['get-one', 'create']);
  },
);
