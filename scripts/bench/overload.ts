/**
 * Load held (issue 16): get-one in an open loop (load.ts's openLoop: requests go out on schedule
 * whether or not earlier ones were answered) at half and at twice the project's closed-loop
 * capacity, with overload protection on (the defaults) and off. Reported: the p99 of the requests
 * served (2xx) counted from when each was due, the share shed as 503, and anything else (other
 * statuses, requests never answered) as failed, which should be none.
 */
import { applyLoad, type Measurement, openLoop } from './load.js';
import { ms, ratio, type TargetCheck, textTable } from './report.js';
import { loadRequest, type PreparedTable, type Scenario, selectScenarios, type TableContext } from './scenarios.js';
import { withServer } from './servers.js';

/** The target: served p99 at twice capacity within this many times the p99 at half load. */
export const MAX_OVERLOAD_P99_RATIO = 3;
/**
 * One request at a time per connection: at 2x a capacity of ~10,000 req/s, 1,000 connections keep
 * to the schedule until answers take 50 ms; after that requests wait for a connection, and that
 * wait counts in their latency.
 */
const OPEN_LOOP_CONNECTIONS = 1000;
const SERVERS = [
  { name: 'protected', kind: 'project' as const },
  { name: 'unprotected', kind: 'project' as const, env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' } },
];

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

/** One load's outcome: served (2xx) p99, shed (503) share, and everything else as failed. */
export function held(server: string, load: string, offeredRps: number, m: Measurement): HeldLoad {
  const shed = m.statuses['503'] ?? 0;
  const served = Object.entries(m.statuses).reduce((n, [status, c]) => (status.startsWith('2') ? n + c : n), 0);
  const shedShare = m.responses > 0 ? shed / m.responses : 0;
  const failed = m.responses - served - shed + m.errors;
  return { server, load, offeredRps, answeredRps: m.rps, servedP99Ms: m.p99Ms, shedShare, failed };
}

/** A scenario's request as the bytes sent, its path drawn anew each time when the scenario asks. */
function requestText(scenario: Scenario | undefined, table: TableContext, host: string): () => string {
  if (scenario === undefined) throw new Error('no get-one scenario');
  const { method, path, headers } = scenario.request(table);
  const head = Object.entries({ host, ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return () => `${method} ${scenario.pathPerRequest?.(table) ?? path} HTTP/1.1\r\n${head}\r\n`;
}

export async function overloadPart(
  prepared: PreparedTable,
  dir: string,
  { seconds, warmupSeconds, connections }: { seconds: number; warmupSeconds: number; connections: number },
): Promise<{ lines: string[]; checks: TargetCheck[]; results: HeldLoad[] }> {
  const [getOne] = selectScenarios(['get-one']);
  const requests = getOne === undefined ? [] : [loadRequest(getOne, prepared.context)];
  const results: HeldLoad[] = [];
  for (const spec of SERVERS) {
    await withServer(spec, prepared.seeded, dir, async ({ origin }) => {
      const closedLoop = (time: number) =>
        applyLoad({ origin, requests, seconds: time, connections, servedOnly: true });
      const request = requestText(getOne, prepared.context, new URL(origin).host);
      const open = (rate: number) =>
        openLoop({ origin, request, rate, seconds: time, connections: OPEN_LOOP_CONNECTIONS });
      if (warmupSeconds > 0) await closedLoop(warmupSeconds);
      const time = Math.max(5, seconds);
      const capacity = await closedLoop(time);
      const [half, twice] = [Math.round(capacity.rps / 2), Math.round(capacity.rps * 2)];
      results.push(
        held(spec.name, 'closed loop (capacity)', NaN, capacity),
        held(spec.name, 'half load', half, await open(half)),
        held(spec.name, '2x load', twice, await open(twice)),
      );
    });
  }
  const find = (server: string, load: string) => results.find((r) => r.server === server && r.load === load);
  const [halfP99, overloaded] = [find('protected', 'half load')?.servedP99Ms ?? NaN, find('protected', '2x load')];
  const growth = (overloaded?.servedP99Ms ?? NaN) / halfP99;
  const subject = 'get-one, project with overload protection';
  const checks: TargetCheck[] = [
    {
      target: `served p99 at 2x load <= ${MAX_OVERLOAD_P99_RATIO}x p99 at half load`,
      subject,
      value: `${ms(overloaded?.servedP99Ms ?? NaN)} vs ${ms(halfP99)} ms: ${ratio(growth)}`,
      pass: growth <= MAX_OVERLOAD_P99_RATIO,
    },
    {
      target: 'under overload, every request served or shed as 503, nothing else',
      subject,
      value: `${overloaded?.failed ?? NaN} failed otherwise`,
      pass: overloaded?.failed === 0,
    },
  ];
  const rows = results.map((r) => [
    r.server,
    r.load,
    Number.isNaN(r.offeredRps) ? '-' : String(r.offeredRps),
    Math.round(r.answeredRps).toString(),
    ms(r.servedP99Ms),
    `${(r.shedShare * 100).toFixed(1)}%`,
    String(r.failed),
  ]);
  const header = ['server', 'load', 'offered req/s', 'answered req/s', 'served p99 ms', 'shed 503', 'failed'];
  return {
    lines: [
      `Load held: get-one on the 10k table, open loop at half and 2x the closed-loop capacity (up to ${OPEN_LOOP_CONNECTIONS}`,
      'connections at 2x); protected = the defaults, unprotected = OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0.',
      textTable(header, rows, 2),
    ],
    checks,
    results,
  };
}
