import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { applyLoad, measure, newTally, openLoop } from '../scripts/bench/load.js';

// The benchmark loads the two servers in turn, a second at a time, and reports each server's
// turns as one measurement: these tests hold that sum to what a single longer load would report.

async function listen(handle: Parameters<typeof createServer>[1]) {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

t.test('a tally is measured as the rate, counts and p99 of all its responses', async (t) => {
  const latencies = [...Array.from({ length: 300 }, () => 1), ...Array.from({ length: 99 }, () => 2), 50];
  const m = measure({ seconds: 3, statuses: { '200': 398, '404': 2 }, errors: 1, latencies });
  // 400 responses over 3 s, whatever each second's share.
  t.same([m.rps, m.responses, m.errors], [400 / 3, 400, 1]);
  t.equal(m.p99Ms, 2, 'the 400th response is above the 99th percentile');
  t.equal(measure(newTally()).rps, 0, 'a load that got no response has no rate');
});

t.test("closed-loop turns add up in one tally, leaving out each connection's first response", async (t) => {
  let answered = 0;
  const { server, origin } = await listen((_request, response) => {
    answered += 1;
    response.end('{}');
  });
  t.teardown(() => server.close());
  const tally = newTally();
  const load = { origin, requests: [{ method: 'GET' as const, path: '/' }], seconds: 1, connections: 2 };
  await applyLoad(load, tally);
  const first = tally.statuses['200'] ?? 0;
  await applyLoad(load, tally);
  const responses = tally.statuses['200'] ?? 0;
  t.ok(first > 0 && responses > first, `the second turn adds to the first: ${first}, then ${responses}`);
  t.ok(Math.abs(tally.seconds - 2) < 0.5, `two turns of a second: ${tally.seconds} s`);
  t.equal(tally.latencies.length, responses - 2 * 2, 'two turns of two connections: four first responses');
  t.ok(responses <= answered && answered <= responses + 2 * 2, 'what the server answered, but for the last in flight');
});

t.test('an open loop sends on schedule and counts each latency from when the request was due', async (t) => {
  // Each answer takes 20 ms and there is one connection: 50 answers a second at most, for 100 due.
  let answered = 0;
  const { server, origin } = await listen((_request, response) => {
    answered += 1;
    setTimeout(() => response.writeHead(answered % 2 === 0 ? 503 : 200).end('{}'), 20);
  });
  t.teardown(() => server.close());
  const request = () => 'GET / HTTP/1.1\r\nhost: test\r\n\r\n';
  const m = await openLoop({ origin, request, rate: 100, seconds: 0.5, connections: 1 });
  t.equal(m.responses, 50, 'every request due is answered, once the connection is free');
  t.same(m.statuses, { '200': 25, '503': 25 });
  t.equal(m.errors, 0);
  // The 49th request was due at 490 ms and answered after 50 answers of 20 ms: it waited ~500 ms
  // for the connection. Counted from when it was sent, each would read ~20 ms.
  t.ok(m.p99Ms > 300, `the wait for a free connection counts: p99 ${m.p99Ms.toFixed(0)} ms`);
});

t.test('an open loop sends no request on a connection the server says it closes, and opens another', async (t) => {
  // As HAProxy's refusals did: each answer says `Connection: close`, and the server closes.
  const { server, origin } = await listen((_request, response) => {
    response.writeHead(503, { connection: 'close' }).end('{}');
  });
  t.teardown(() => server.close());
  const request = () => 'GET / HTTP/1.1\r\nhost: test\r\n\r\n';
  const m = await openLoop({ origin, request, rate: 200, seconds: 0.5, connections: 2 });
  t.same(m.statuses, { '503': 100 }, 'every request due is answered, each on a connection of its own');
  t.equal(m.errors, 0, 'none lost on a closing connection');
});
