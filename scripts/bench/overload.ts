/**
 * Overload (issues 16 and 28). Bursts: 500 requests at once (load.ts's burst) to a fresh, idle
 * server at the defaults, which should all be served. Load held: get-one in an open loop (load.ts's
 * openLoop) at half and at twice the project's closed-loop capacity, with overload protection on
 * (the defaults) and off. Reported: the p99 of the requests served (2xx) counted from when each was
 * due, the share shed as 503, anything else (other statuses, requests never answered) as failed,
 * which should be none, and what the load generator itself cost: its send lag and CPU per request.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { applyLoad, burst, type Measurement, measure, openLoop, type OpenLoopMeasurement } from './load.js';
import { check, median, ms, type Part, ratio, textTable } from './report.js';
import { loadRequests, scenarioNamed, wireRequest } from './scenarios.js';
import { PROJECT, withServer } from './servers.js';
import type { Table } from './tables.js';

/** The target: a burst of this many concurrent requests, of any operation, to an idle server gets no 503. */
const BURST_SIZE = 500;
/** Each on a fresh server: the most expensive operation, and the most common. */
const BURST_SCENARIOS = ['create', 'get-one'];
const BURST_RUNS = 3;
/** How long a fresh server is left alone after its first 200, so that it is idle when the burst comes. */
const IDLE_MS = 1_000;

/** The target: served p99 at twice capacity within this many times the p99 at half load. */
const MAX_P99_RATIO = 3;
/**
 * One request at a time per connection: at 2x a capacity of ~10,000 req/s, 1,000 connections keep
 * to the schedule until answers take 50 ms; after that requests wait for a connection, and that
 * wait counts in their latency.
 */
const OPEN_LOOP_CONNECTIONS = 1000;
const SERVERS = [
  { ...PROJECT, name: 'protected' },
  { ...PROJECT, name: 'unprotected', env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' } },
];

/** The 2xx answers among `statuses`: the requests served. */
const servedOf = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((n, [status, c]) => (status.startsWith('2') ? n + c : n), 0);

export function held(server: string, load: string, offeredRps: number, m: Measurement) {
  const shed = m.statuses['503'] ?? 0;
  const served = servedOf(m.statuses);
  const shedShare = m.responses > 0 ? shed / m.responses : 0;
  const failed = m.responses - served - shed + m.errors;
  return { server, load, offeredRps, answeredRps: m.rps, servedP99Ms: m.p99Ms, shedShare, failed };
}

/** A burst's raw answers sorted as load held sorts them: served (2xx), shed (503), failed otherwise. */
export function burstOutcome(answers: string[]) {
  const statuses = answers.map((answer) => (answer.startsWith('HTTP/1.1 ') ? answer.slice(9, 12) : 'none'));
  const served = statuses.filter((status) => status.startsWith('2')).length;
  const shed = statuses.filter((status) => status === '503').length;
  return { served, shed, failed: answers.length - served - shed };
}

/** Each scenario of BURST_SCENARIOS as BURST_SIZE requests at once, BURST_RUNS times, each to a fresh server. */
async function bursts(table: Table, dir: string) {
  const rows: string[][] = [];
  const shedCounts: number[] = [];
  for (const name of BURST_SCENARIOS) {
    const scenario = scenarioNamed(name);
    const outcomes: (ReturnType<typeof burstOutcome> & { lastAnswerMs: number })[] = [];
    for (let run = 0; run < BURST_RUNS; run += 1) {
      await withServer(PROJECT, table, dir, async ({ origin }) => {
        await sleep(IDLE_MS);
        const started = performance.now();
        const answers = await burst(origin, () => wireRequest(scenario, table, { close: true }), BURST_SIZE);
        outcomes.push({ ...burstOutcome(answers), lastAnswerMs: performance.now() - started });
      });
    }
    shedCounts.push(...outcomes.map((outcome) => outcome.shed));
    const each = (pick: (outcome: (typeof outcomes)[number]) => number) => outcomes.map(pick).join(', ');
    rows.push([
      name,
      each((o) => o.served),
      each((o) => o.shed),
      each((o) => o.failed),
      ms(median(outcomes.map((o) => o.lastAnswerMs))),
    ]);
  }
  const header = ['scenario', 'served, each run', 'shed 503', 'failed', 'all answered after, median ms'];
  return { table: textTable(header, rows, 1), shed: shedCounts.reduce((sum, n) => sum + n, 0) };
}

export async function overloadPart(
  table: Table,
  dir: string,
  { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number },
): Promise<Part> {
  const burstResults = await bursts(table, dir);
  const time = loadSeconds(seconds);
  const results: LoadHeld[] = [];
  for (const spec of SERVERS) {
    await withServer(spec, table, dir, async ({ origin }) => {
      results.push(...(await holdLoad(spec.name, origin, table, { seconds: time, warmupSeconds })));
    });
  }
  const [half, twice] = results; // the protected server's, measured first
  const halfP99 = half?.servedP99Ms ?? NaN;
  const sustainedP99 = twice?.secondHalfP99Ms ?? NaN;
  const subject = 'get-one, project with overload protection';
  const rows = loadHeldRows(results);
  return {
    name: 'load held',
    rows: [],
    lines: [
      `Bursts: ${BURST_SIZE} requests at once, each on a connection of its own, to a fresh server at the defaults`,
      `left idle ${IDLE_MS / 1000} s after its first 200; ${BURST_RUNS} runs each.`,
      burstResults.table,
      '',
      `Load held: get-one on the 10k table, open loop at half and 2x the closed-loop capacity (up to ${OPEN_LOOP_CONNECTIONS}`,
      `connections at 2x), each for ${time} s; protected = the defaults, unprotected = OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0.`,
      'Second half: the requests due after the first half of the run, past the onset. The generator shares the',
      "machine: its send lag (past each request's due time, when it had a free connection) counts in every latency.",
      rows,
    ],
    checks: [
      check(
        `a burst of ${BURST_SIZE} on an idle server: no 503`,
        'create and get-one, project at its defaults',
        `${burstResults.shed} shed over ${BURST_SCENARIOS.length * BURST_RUNS} bursts`,
        burstResults.shed === 0,
      ),
      sustainedCheck(subject, halfP99, sustainedP99),
      check(
        'under overload, every request served or shed as 503, nothing else',
        subject,
        `${twice?.failed ?? NaN} failed otherwise`,
        twice?.failed === 0,
      ),
    ],
  };
}

/** Long enough for a second half past the onset of overload: the burst allowance, and the queue the open loop built meanwhile. */
export const loadSeconds = (seconds: number) => Math.max(10, seconds);

export type LoadHeld = ReturnType<typeof held> & Omit<OpenLoopMeasurement, keyof Measurement>;

/**
 * get-one at `origin`: warmed up, its closed-loop capacity measured, then an open loop at half and
 * twice that capacity.
 */
export async function holdLoad(
  server: string,
  origin: string,
  table: Table,
  { seconds, warmupSeconds }: { seconds: number; warmupSeconds: number },
): Promise<LoadHeld[]> {
  const getOne = scenarioNamed('get-one');
  const requests = loadRequests(getOne, table);
  const request = () => wireRequest(getOne, table);
  await applyLoad({ origin, requests, seconds: warmupSeconds });
  // Served a second: behind the balancer a closed loop of more connections than it lets through
  // would have its quick 503s counted as capacity.
  const closed = measure(await applyLoad({ origin, requests, seconds }));
  const capacity = servedOf(closed.statuses) / closed.seconds;
  const results: LoadHeld[] = [];
  for (const [load, rate] of [
    ['half load', Math.round(capacity / 2)],
    ['2x load', Math.round(capacity * 2)],
  ] as const) {
    const measured = await openLoop({ origin, request, rate, seconds, connections: OPEN_LOOP_CONNECTIONS });
    const { sendLagP99Ms, generatorCpuUs, secondHalfP99Ms } = measured;
    results.push({ ...held(server, load, rate, measured), sendLagP99Ms, generatorCpuUs, secondHalfP99Ms });
  }
  return results;
}

/** The 2x load's served p99 past the onset (its second half, sustained) against half load's. */
export function sustainedCheck(subject: string, halfP99: number, sustainedP99: number) {
  return check(
    `served p99 at 2x load sustained (the second half) <= ${MAX_P99_RATIO}x p99 at half load`,
    subject,
    `${ms(sustainedP99)} vs ${ms(halfP99)} ms: ${ratio(sustainedP99 / halfP99)}`,
    sustainedP99 / halfP99 <= MAX_P99_RATIO,
  );
}

/** The load-held table: a row per server and load. */
export function loadHeldRows(results: LoadHeld[]): string {
  const rows = results.map((r) => [
    r.server,
    r.load,
    String(r.offeredRps),
    Math.round(r.answeredRps).toString(),
    ms(r.servedP99Ms),
    ms(r.secondHalfP99Ms),
    `${(r.shedShare * 100).toFixed(1)}%`,
    String(r.failed),
    ms(r.sendLagP99Ms),
    Math.round(r.generatorCpuUs).toString(),
  ]);
  const header = [
    'server',
    'load',
    'offered req/s',
    'answered req/s',
    'served p99 ms',
    'second half p99 ms',
    'shed 503',
    'failed',
    'generator send lag p99 ms',
    'generator CPU µs/req',
  ];
  return textTable(header, rows, 2);
}
