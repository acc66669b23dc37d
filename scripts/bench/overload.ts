/**
 * Load held (issue 16): get-one at a fixed request rate (autocannon's `overallRate`, an open loop:
 * requests go out on schedule whether or not earlier ones were answered) at half and at twice the
 * project's closed-loop capacity, with overload protection on (the defaults) and off. Reported: the
 * p99 of the requests served (2xx), the share shed as 503, and anything else (other statuses, socket
 * errors, timeouts) as failed, which should be none.
 */
import { applyLoad, type Measurement } from './load.js';
import { ms, ratio, type TargetCheck, textTable } from './report.js';
import { loadRequest, type PreparedTable, selectScenarios } from './scenarios.js';
import { withServer } from './servers.js';

/** The target: served p99 at twice capacity within this many times the p99 at half load. */
export const MAX_OVERLOAD_P99_RATIO = 3;
/**
 * autocannon sends one request at a time per connection, so an open loop needs enough connections
 * to keep to its schedule while answers are slow: at 2x a capacity of ~5,000 req/s, 1,000
 * connections keep the rate until answers take 100 ms.
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
      const load = (time: number, rate?: number, open = false) =>
        applyLoad({
          origin,
          requests,
          seconds: time,
          connections: open ? OPEN_LOOP_CONNECTIONS : connections,
          servedOnly: true,
          ...(rate === undefined ? {} : { rate }),
        });
      if (warmupSeconds > 0) await load(warmupSeconds);
      const time = Math.max(5, seconds);
      const capacity = await load(time);
      const [half, twice] = [Math.round(capacity.rps / 2), Math.round(capacity.rps * 2)];
      results.push(
        held(spec.name, 'closed loop (capacity)', NaN, capacity),
        held(spec.name, 'half load', half, await load(time, half)),
        held(spec.name, '2x load', twice, await load(time, twice, true)),
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
      `Load held: get-one on the 10k table, open loop at half and 2x the closed-loop capacity (${OPEN_LOOP_CONNECTIONS}`,
      'connections at 2x); protected = the defaults, unprotected = OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0.',
      textTable(header, rows, 2),
    ],
    checks,
    results,
  };
}
