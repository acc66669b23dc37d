import t from 'tap';
import { COUNTERS, perResponse, procCounters } from '../scripts/bench/proc-counters.js';

// paired.js splits a server's time by thread from /proc; these tests read this very process.

t.test("a process's counters are read from /proc, and its main thread's work shows as its own", async (t) => {
  const before = procCounters(process.pid);
  t.same(Object.keys(before), [...COUNTERS]);
  const start = process.cpuUsage();
  while (process.cpuUsage(start).user < 100_000) Math.sqrt(Math.random()); // 100 ms of user time here
  const after = procCounters(process.pid);
  t.ok(after['main thread user'] - before['main thread user'] >= 50, 'busy main thread: its user time grew');
  for (const name of COUNTERS) t.ok(after[name] >= before[name], `${name} never goes down`);
});

t.test('growth per response: CPU time from ms to us, counts as they are', async (t) => {
  const zero = Object.fromEntries(COUNTERS.map((name) => [name, 0])) as Record<(typeof COUNTERS)[number], number>;
  const grown = { ...zero, 'main thread user': 30, 'other threads system': 10, 'minor page faults': 500 };
  const rates = perResponse(zero, grown, 1000);
  t.equal(rates['main thread user'], 30, '30 ms over 1,000 responses: 30 us each');
  t.equal(rates['other threads system'], 10);
  t.equal(rates['minor page faults'], 0.5);
  t.equal(rates['involuntary switches'], 0);
});
