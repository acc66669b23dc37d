/**
 * Load held (issue 16): the project under a fixed request rate (autocannon's `overallRate`, an open
 * loop: requests are sent on schedule whether or not earlier ones were answered) at about twice what
 * it serves, with overload protection on (the server's defaults) and off
 * (OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0). What is reported: the p99 of the requests served (2xx), the
 * share shed as 503, and anything else (other statuses, socket errors, timeouts), which should be none.
 */
import { applyLoad, type Measurement } from './load.js';
import { type PreparedTable, withServer } from './measure.js';
import { ms, ratio, type TargetCheck, textTable } from './report.js';
import { loadRequest, SCENARIOS } from './scenarios.js';
import { PROJECT, type RunningServer, type ServerSpec } from './server-process.js';
import type { BenchSettings } from './settings.js';

/** The target: served p99 at twice capacity within this many times the p99 at half load. */
export const MAX_OVERLOAD_P99_RATIO = 3;
/** Offered load over measured capacity. */
const OVERLOAD = 2;
/**
 * autocannon sends one request at a time per connection, so an open loop needs enough connections
 * to keep sending on schedule while answers are slow: at 2x a capacity of ~5,000 req/s, 1,000
 * connections keep the rate until answers take 100 ms.
 */
const OPEN_LOOP_CONNECTIONS = 1000;

export interface HeldLoad {
  server: string;
  load: string;
  offeredRps: number;
  answeredRps: number;
  servedP99Ms: number;
  /** Responses that were 503, over all responses. */
  shedShare: number;
  /** Responses neither 2xx nor 503, socket errors and timeouts. */
  failed: number;
}

const SPECS: readonly ServerSpec[] = [
  { name: 'protected', kind: 'project' },
  { name: 'unprotected', kind: 'project', env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' } },
];

/** One load's outcome: served (2xx) p99, shed (503) share, and everything else as failed. */
export function held(server: string, load: string, offeredRps: number, m: Measurement): HeldLoad {
  const shed = m.statuses['503'] ?? 0;
  const served = Object.entries(m.statuses).reduce((n, [status, c]) => (status.startsWith('2') ? n + c : n), 0);
  return {
    server,
    load,
    offeredRps,
    answeredRps: m.rps,
    servedP99Ms: m.p99Ms,
    shedShare: m.responses > 0 ? shed / m.responses : 0,
    failed: m.responses - served - shed + m.errors,
  };
}

async function holdLoad(server: RunningServer, prepared: PreparedTable, settings: BenchSettings): Promise<HeldLoad[]> {
  const scenario = SCENARIOS.find((candidate) => candidate.name === 'get-one');
  if (scenario === undefined) throw new Error('get-one is a scenario');
  const requests = [loadRequest(scenario, prepared.context)];
  const seconds = Math.max(5, settings.seconds);
  const base = { origin: server.origin, requests, servedOnly: true };
  if (settings.warmupSeconds > 0)
    await applyLoad({ ...base, seconds: settings.warmupSeconds, connections: settings.connections });
  const capacity = await applyLoad({ ...base, seconds, connections: settings.connections });
  const half = Math.round(capacity.rps / 2);
  const twice = Math.round(capacity.rps * OVERLOAD);
  const name = server.spec.name;
  return [
    held(name, 'closed loop (capacity)', Number.NaN, capacity),
    held(name, 'half load', half, await applyLoad({ ...base, seconds, connections: settings.connections, rate: half })),
    held(
      name,
      `${OVERLOAD}x load`,
      twice,
      await applyLoad({ ...base, seconds, connections: OPEN_LOOP_CONNECTIONS, rate: twice }),
    ),
  ];
}

export async function overloadPart(
  prepared: PreparedTable,
  dir: string,
  settings: BenchSettings,
): Promise<{ lines: string[]; checks: TargetCheck[]; results: HeldLoad[] }> {
  const results: HeldLoad[] = [];
  for (const spec of SPECS) {
    results.push(...(await withServer(spec, prepared, dir, (server) => holdLoad(server, prepared, settings))));
  }
  const find = (server: string, load: string) =>
    results.find((result) => result.server === server && result.load.startsWith(load));
  const halfP99 = find('protected', 'half')?.servedP99Ms ?? Number.NaN;
  const overloaded = find('protected', `${OVERLOAD}x`);
  const growth = (overloaded?.servedP99Ms ?? Number.NaN) / halfP99;
  const checks: TargetCheck[] = [
    {
      target: `served p99 at ${OVERLOAD}x load <= ${MAX_OVERLOAD_P99_RATIO}x p99 at half load`,
      subject: `get-one, ${PROJECT.name} with overload protection`,
      value: `${ms(overloaded?.servedP99Ms ?? NaN)} vs ${ms(halfP99)} ms: ${ratio(growth)}`,
      pass: growth <= MAX_OVERLOAD_P99_RATIO,
    },
    {
      target: 'under overload, every request served or shed as 503, nothing else',
      subject: `get-one, ${PROJECT.name} with overload protection`,
      value: `${overloaded?.failed ?? NaN} failed otherwise`,
      pass: overloaded?.failed === 0,
    },
  ];
  const table = textTable(
    ['server', 'load', 'offered req/s', 'answered req/s', 'served p99 ms', 'shed 503', 'failed'],
    results.map((r) => [
      r.server,
      r.load,
      Number.isNaN(r.offeredRps) ? '-' : String(r.offeredRps),
      Math.round(r.answeredRps).toString(),
      ms(r.servedP99Ms),
      `${(r.shedShare * 100).toFixed(1)}%`,
      String(r.failed),
    ]),
    2,
  );
  return {
    lines: [
      `Load held: get-one on the 10k table, open loop (fixed rate) at half and ${OVERLOAD}x the closed-loop capacity,`,
      `${OPEN_LOOP_CONNECTIONS} connections at ${OVERLOAD}x; protected = the server's defaults, unprotected = OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0.`,
      table,
    ],
    checks,
    results,
  };
}
