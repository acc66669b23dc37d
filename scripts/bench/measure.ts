import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { applyLoad, combineLoads, type LoadOptions, type Measurement } from './load.js';
import { perResponse, type ProcCounters, procCounters } from './proc-counters.js';
import { findDeepPage, loadRequest, type Scenario, type TableContext } from './scenarios.js';
import { type RunningServer, type ServerKind, type StartOptions, startServer } from './server-process.js';
import type { BenchSettings } from './settings.js';
import { freshCopy, type SeededTable, seedTable } from './table.js';

export interface ScenarioMeasurement {
  scenario: Scenario;
  measurement: Measurement;
  /** Responses whose status is not the scenario's expected one. */
  unexpected: number;
  /** Server CPU time (user + system) per response, in microseconds: what a request costs. */
  cpuUsPerRequest: number;
  /** The same over the server's warm-up (its table's reads mixed, or a writing scenario's own). */
  warmupCpuUsPerRequest: number;
  /** Per response: CPU time by thread and kind, page faults, context switches (in the JSON only). */
  counters: ProcCounters;
}

/** Long enough for a server to finish what its last turn left (in-flight responses, closing sockets). */
const SETTLE_MS = 200;

export interface PreparedTable {
  seeded: SeededTable;
  context: TableContext;
}

/** Runs a server on a fresh copy of the seeded table (in `dir`) for as long as `use` takes. */
export async function withServer<T>(
  kind: ServerKind,
  { seeded }: Pick<PreparedTable, 'seeded'>,
  dir: string,
  use: (server: RunningServer) => Promise<T>,
  start: Omit<StartOptions, 'databaseFile' | 'key'> = {},
): Promise<T> {
  const databaseFile = freshCopy(seeded, join(dir, 'run.db'));
  const server = await startServer(kind, { databaseFile, key: seeded.key, ...start });
  try {
    return await use(server);
  } finally {
    await server.stop();
  }
}

/** Seeds a table of `count` pets and finds its deep page (through the project server). */
export async function prepareTable(dir: string, count: number): Promise<PreparedTable> {
  const seeded = await seedTable(join(dir, `seed-${count}.db`), count);
  const deepPath = await withServer('project', { seeded }, dir, (server) =>
    findDeepPage(server.origin, count, seeded.key),
  );
  return { seeded, context: { pets: count, key: seeded.key, deepPath } };
}

export interface CpuMeasurement {
  measurement: Measurement;
  /** Server CPU time (user + system) per response over the load, in microseconds. */
  cpuUsPerRequest: number;
  /** The same split by thread and kind, with page faults and context switches, per response. */
  counters: ProcCounters;
}

function scenarioMeasurement(
  scenario: Scenario,
  { measurement, cpuUsPerRequest, counters }: CpuMeasurement,
  warmup: CpuMeasurement | undefined,
): ScenarioMeasurement {
  return {
    scenario,
    measurement,
    unexpected: measurement.responses - (measurement.statuses[String(scenario.expect.status)] ?? 0),
    cpuUsPerRequest,
    warmupCpuUsPerRequest: warmup?.cpuUsPerRequest ?? Number.NaN,
    counters,
  };
}

/** A server's CPU time so far: the total, and split (procCounters). */
interface CpuReading {
  cpuMs: number;
  counters: ProcCounters;
}

function readCpu(server: RunningServer): CpuReading {
  return { cpuMs: server.cpuMs(), counters: procCounters(server.pid) };
}

/** What the server used since `before`, per response of `measurement`. */
function cpuSince(server: RunningServer, before: CpuReading, measurement: Measurement): CpuMeasurement {
  const now = readCpu(server);
  return {
    measurement,
    cpuUsPerRequest: ((now.cpuMs - before.cpuMs) * 1000) / measurement.responses,
    counters: perResponse(before.counters, now.counters, measurement.responses),
  };
}

/** Applies load to one server, and measures the server's CPU time per response meanwhile. */
export async function loadWithCpu(server: RunningServer, load: Omit<LoadOptions, 'origin'>): Promise<CpuMeasurement> {
  const before = readCpu(server);
  return cpuSince(server, before, await applyLoad({ origin: server.origin, ...load }));
}

/** Every scenario's request in turn on each connection: warm-up and soak load. */
export function mixedLoad(
  server: RunningServer,
  scenarios: readonly Scenario[],
  table: TableContext,
  seconds: number,
  connections: number,
): Promise<CpuMeasurement> {
  return loadWithCpu(server, {
    requests: scenarios.map((scenario) => loadRequest(scenario, table)),
    seconds,
    connections,
  });
}

/** Warms the server up (JIT, caches) with mixed load, then measures each scenario on its own. */
export async function measureScenarios(
  server: RunningServer,
  scenarios: readonly Scenario[],
  table: TableContext,
  settings: BenchSettings,
): Promise<ScenarioMeasurement[]> {
  const warmup =
    settings.warmupSeconds > 0
      ? await mixedLoad(server, scenarios, table, settings.warmupSeconds, settings.connections)
      : undefined;
  const results: ScenarioMeasurement[] = [];
  for (const scenario of scenarios) {
    const load = await loadWithCpu(server, {
      requests: [loadRequest(scenario, table)],
      seconds: settings.seconds,
      connections: settings.connections,
    });
    results.push(scenarioMeasurement(scenario, load, warmup));
  }
  return results;
}

/**
 * Loads several running servers in turn, `sliceSeconds` at a time, until each has had `seconds`: a
 * busy minute of this shared machine falls on all of them alike, where whole runs a few seconds
 * apart can differ by 20% (BENCHMARKS.md). A server waits idle while another is loaded. Each
 * connection sends `requests` in turn. Results are in the order of `servers`.
 */
async function loadInTurns(
  servers: readonly RunningServer[],
  requests: readonly autocannon.Request[],
  seconds: number,
  { sliceSeconds, connections }: BenchSettings,
): Promise<CpuMeasurement[]> {
  // CPU from before the first turn to SETTLE_MS after the last: a server's work left over when its
  // turn ends (closing connections, garbage collection) is its own, though it runs in the other's turn.
  const turns = servers.map((server) => ({
    server,
    before: readCpu(server),
    parts: [] as Measurement[],
    latencies: [] as number[],
  }));
  for (let done = 0; done < seconds; done += sliceSeconds) {
    const slice = Math.min(sliceSeconds, seconds - done);
    for (const turn of turns) {
      turn.parts.push(
        await applyLoad({
          origin: turn.server.origin,
          requests: [...requests],
          seconds: slice,
          connections,
          latencies: turn.latencies,
        }),
      );
    }
  }
  await sleep(SETTLE_MS);
  return turns.map(({ server, before, parts, latencies }) => cpuSince(server, before, combineLoads(parts, latencies)));
}

/**
 * Warms running servers up for `warmupSeconds` each, loaded in turn like a measurement (so they are
 * the same age when it starts), with the scenarios' requests mixed: the JIT and caches reach the
 * state a long-running server works in. Undefined for each where the warm-up is off.
 */
export async function warmUpInTurns(
  servers: readonly RunningServer[],
  scenarios: readonly Scenario[],
  table: TableContext,
  settings: BenchSettings,
): Promise<(CpuMeasurement | undefined)[]> {
  if (settings.warmupSeconds === 0 || scenarios.length === 0) return servers.map(() => undefined);
  const requests = scenarios.map((scenario) => loadRequest(scenario, table));
  return loadInTurns(servers, requests, settings.warmupSeconds, settings);
}

/** One scenario on several running servers, warmed up (`warmups`: see warmUpInTurns), loaded in turn. */
export async function measureInTurns(
  servers: readonly RunningServer[],
  scenario: Scenario,
  table: TableContext,
  settings: BenchSettings,
  warmups: readonly (CpuMeasurement | undefined)[],
): Promise<ScenarioMeasurement[]> {
  const loads = await loadInTurns(servers, [loadRequest(scenario, table)], settings.seconds, settings);
  return loads.map((load, index) => scenarioMeasurement(scenario, load, warmups[index]));
}
