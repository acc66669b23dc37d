import t from 'tap';
import { startApi } from './helpers/api.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Saturates this process's event loop as a flood of work would: busy for `chunkMs` at a time,
 * yielding only briefly, for `totalMs`. The server shares the loop, so it sees the delay.
 */
async function saturate(totalMs: number, chunkMs: number): Promise<void> {
  const end = Date.now() + totalMs;
  while (Date.now() < end) {
    const chunkEnd = Date.now() + chunkMs;
    while (Date.now() < chunkEnd) {
      // busy
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

t.test('past its event-loop delay the server sheds with 503s, /readyz says so, then it recovers', async (t) => {
  const settings = { maxEventLoopDelayMs: 20, retryAfterSeconds: 3, sampleIntervalMs: 100 };
  const api = await startApi(t, { metrics: true, overload: settings });
  const get = () => api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  /** Whether requests are served again within a few seconds of quiet (this process's own start-up may lag). */
  const servedWhenQuiet = async () => {
    for (let i = 0; i < 50; i++) {
      if ((await get()).statusCode === 200) return true;
      await sleep(100);
    }
    return false;
  };
  t.ok(await servedWhenQuiet(), 'served before the load');

  // Three samples' worth of a loop busy for 60 ms at a time: a mean delay well over 20 ms.
  await saturate(400, 60);
  const shed = await get();
  t.equal(shed.statusCode, 503, 'shed while saturated');
  t.same(shed.json(), { code: 'service_unavailable', message: 'The server is overloaded; retry shortly', status: 503 });
  t.equal(shed.headers['retry-after'], '3');
  const unknown = await api.app.inject({ method: 'GET', url: '/nowhere' });
  t.equal(unknown.statusCode, 503, 'shed before anything else is decided');
  const ready = await api.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(ready.statusCode, 503, '/readyz tells the load balancer to send no more');
  t.equal(ready.json<{ code: string }>().code, 'service_unavailable');
  t.equal(ready.headers['retry-after'], '3');
  t.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, '/healthz: the process is up');

  // A few quiet samples later it serves again, by itself.
  t.ok(await servedWhenQuiet(), 'serves again once the loop is quiet');
  t.equal((await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  const text = await api.metrics?.registry.metrics();
  t.match(text, /petstore_http_rejections_total\{cause="overload"\} [1-9]/, 'shedding is counted');
});

t.test('OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0: never shed', async (t) => {
  const api = await startApi(t, { overload: { maxEventLoopDelayMs: 0, retryAfterSeconds: 1, sampleIntervalMs: 100 } });
  await saturate(400, 60);
  t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).statusCode, 200);
  t.equal((await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
});
