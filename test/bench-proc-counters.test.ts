import { pbkdf2 } from 'node:crypto';
import { statSync } from 'node:fs';
import t from 'tap';
import {
  COUNTERS,
  perResponse,
  type ProcCounters,
  processCpuMs,
  procCounters,
  zeroCounters,
} from '../scripts/bench/proc-counters.js';

// paired.js and the benchmark split a server's time by thread from /proc; these tests read this
// very process, doing each kind of work and checking that it lands in its own counter.

const growth = (work: () => void) => {
  const before = procCounters(process.pid);
  work();
  const after = procCounters(process.pid);
  return Object.fromEntries(COUNTERS.map((name) => [name, after[name] - before[name]])) as ProcCounters;
};

t.test("user time on the main thread is the main thread's", async (t) => {
  let sum = 0;
  const grown = growth(() => {
    const start = process.cpuUsage();
    // Checking the clock is a system call: compute for a while between checks.
    while (process.cpuUsage(start).user < 150_000) for (let i = 0; i < 1_000_000; i += 1) sum += Math.sqrt(i);
  });
  t.ok(sum > 0, 'the work was done');
  t.ok(grown['main thread user'] >= 100, `150 ms of computing: ${grown['main thread user']} ms of user time`);
  t.ok(grown['main thread user'] > grown['main thread system'], 'more user time than system time');
});

t.test("work on libuv's pool shows as the other threads' time, not the main thread's", async (t) => {
  const before = procCounters(process.pid);
  const hashes = Array.from(
    { length: 4 },
    () => new Promise((resolve) => pbkdf2('key', 'salt', 100_000, 64, 'sha512', resolve)),
  );
  await Promise.all(hashes);
  const after = procCounters(process.pid);
  const others = after['other threads user'] - before['other threads user'];
  const main = after['main thread user'] - before['main thread user'];
  t.ok(others >= 50, `four slow hashes on the pool: ${others} ms of the other threads' user time`);
  t.ok(main < others, `the main thread only waited: ${main} ms`);
});

t.test('system calls show as system time', async (t) => {
  const grown = growth(() => {
    const start = process.cpuUsage();
    while (process.cpuUsage(start).system < 150_000) statSync('/proc/self/stat');
  });
  t.ok(grown['main thread system'] >= 100, `150 ms of stat(2): ${grown['main thread system']} ms of system time`);
});

t.test('touching fresh memory shows as minor page faults', async (t) => {
  const grown = growth(() => void Buffer.alloc(64 * 1024 * 1024).fill(1));
  // At least one fault per 2 MB huge page (where the kernel gives those); with 4 KB pages, 16,384.
  t.ok(grown['minor page faults'] >= 32, `64 MB touched: ${grown['minor page faults']} faults`);
  t.equal(grown['major page faults'], 0, 'nothing read from disk');
});

t.test('waiting shows as voluntary context switches', async (t) => {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const grown = growth(() => {
    for (let i = 0; i < 20; i += 1) Atomics.wait(cell, 0, 0, 5);
  });
  t.ok(grown['voluntary switches'] >= 15, `20 waits of 5 ms: ${grown['voluntary switches']} switches`);
});

t.test("the process's CPU time is its threads' together", async (t) => {
  const counters = procCounters(process.pid);
  const threads =
    counters['main thread user'] +
    counters['main thread system'] +
    counters['other threads user'] +
    counters['other threads system'];
  t.ok(Math.abs(processCpuMs(process.pid) - threads) <= 20, 'the same to a tick or two');
  for (const name of COUNTERS) t.ok(counters[name] >= 0, `${name} is not negative`);
});

t.test('growth per response: CPU time from ms to us, counts as they are', async (t) => {
  const zero = zeroCounters();
  const grown = { ...zero, 'main thread user': 30, 'other threads system': 10, 'minor page faults': 500 };
  const rates = perResponse(zero, grown, 1000);
  t.equal(rates['main thread user'], 30, '30 ms over 1,000 responses: 30 us each');
  t.equal(rates['other threads system'], 10);
  t.equal(rates['minor page faults'], 0.5);
  t.equal(rates['involuntary switches'], 0);
});
