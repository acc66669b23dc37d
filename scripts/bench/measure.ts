import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { applyLoad, combineLoads, type LoadOptions, type Measurement } from './load.js';
import { findDeepPage, loadRequest, type Scenario, type TableContext } from './scenarios.js';
import { PROJECT, type RunningServer, type ServerSpec, type StartOptions, startServer } from './server-process.js';
import type { BenchSettings } from './settings.js';
import type { Backend, SeededTable } from './table.js';

export interface CpuMeasurement {
  measurement: Measurement;
  /** Server CPU time (user + system) per response, in microseconds: what a request costs. */
  cpuUsPerRequest: number;
}

export interface ScenarioMeasurement extends CpuMeasurement {
  scenario: Scenario;
  /** Responses whose status is not the scenario's expected one. */
  unexpected: number;
}

/** Long enough for a server to finish what its last turn left (in-flight responses, closing sockets). */
const SETTLE_MS = 200;

export interface PreparedTable {
  seeded: SeededTable;
  context: TableContext;
}

/** Runs a server on a fresh copy of the seeded table (in `dir`) for as long as `use` takes. */
export async function withServer<T>(
  spec: ServerSpec,
  { seeded }: Pick<PreparedTable, 'seeded'>,
  dir: string,
  use: (server: RunningServer) => Promise<T>,
  start: Omit<StartOptions, 'database' | 'key'> = {},
): Promise<T> {
  const database = await seeded.freshCopy(dir);
  const server = await startServer(spec, { database, key: seeded.key, ...start });
  try {
    return await use(server);
  } finally {
    await server.stop();
  }
}

/** Seeds a table of `count` pets and finds its deep page (through the project server). */
export async function prepareTable(backend: Backend, dir: string, count: number): Promise<PreparedTable> {
  const seeded = await backend.seed(dir, count);
  const deepPath = await withServer(PROJECT, { seeded }, dir, (server) =>
    findDeepPage(server.origin, count, seeded.key),
  );
  return { seeded, context: { pets: count, key: seeded.key, deepPath } };
}

/** What the server used since `beforeMs`, per response of `measurement`. */
function cpuSince(server: RunningServer, beforeMs: number, measurement: Measurement): CpuMeasurement {
  return { measurement, cpuUsPerRequest: ((server.cpuMs() - beforeMs) * 1000) / measurement.responses };
}

/** Applies load to one server, and measures the server's CPU time per response meanwhile. */
export async function loadWithCpu(server: RunningServer, load: Omit<LoadOptions, 'origin'>): Promise<CpuMeasurement> {
  const before = server.cpuMs();
  const measurement = await applyLoad({ origin: server.origin, ...load });
  await sleep(SETTLE_MS);
  return cpuSince(server, before, measurement);
}

/**
 * Loads several running servers in turn, `sliceSeconds` at a time, until each has had `seconds`: a
 * busy minute of this shared machine falls on all of them alike, where whole runs a few seconds
 * apart can differ by 20%. A server waits idle while another is loaded. Each connection sends
 * `requests` in turn. Results are in the order of `servers`.
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
    beforeMs: server.cpuMs(),
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
  return turns.map(({ server, beforeMs, parts, latencies }) =>
    cpuSince(server, beforeMs, combineLoads(parts, latencies)),
  );
}

/**
 * Warms running servers up for `warmupSeconds` each, loaded in turn like a measurement (so they are
 * the same age when it starts), with the scenarios' requests mixed: the JIT and caches reach the
 * state a long-running server works in.
 */
export async function warmUpInTurns(
  servers: readonly RunningServer[],
  scenarios: readonly Scenario[],
  table: TableContext,
  settings: BenchSettings,
): Promise<void> {
  if (settings.warmupSeconds === 0 || scenarios.length === 0) return;
  const requests = scenarios.map((scenario) => loadRequest(scenario, table));
  await loadInTurns(servers, requests, settings.warmupSeconds, settings);
}

/** One scenario on several running servers, loaded in turn. */
export async function measureInTurns(
  servers: readonly RunningServer[],
  scenario: Scenario,
  table: TableContext,
  settings: BenchSettings,
): Promise<ScenarioMeasurement[]> {
  const loads = await loadInTurns(servers, [loadRequest(scenario, table)], settings.seconds, settings);
  return loads.map((load) => ({
    ...load,
    scenario,
    unexpected: load.measurement.responses - (load.measurement.statuses[String(scenario.expect.status)] ?? 0),
  }));
}
