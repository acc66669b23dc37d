import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyLoad, combineLoads, type LoadOptions, type Measurement } from './load.js';
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
  /** The same over the warm-up, from the server's start: what a request costs before V8 has optimised. */
  warmupCpuUsPerRequest: number;
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
}

function scenarioMeasurement(
  scenario: Scenario,
  { measurement, cpuUsPerRequest }: CpuMeasurement,
  warmup: CpuMeasurement | undefined,
): ScenarioMeasurement {
  return {
    scenario,
    measurement,
    unexpected: measurement.responses - (measurement.statuses[String(scenario.expect.status)] ?? 0),
    cpuUsPerRequest,
    warmupCpuUsPerRequest: warmup?.cpuUsPerRequest ?? Number.NaN,
  };
}

/** Applies load to one server, and measures the server's CPU time per response meanwhile. */
export async function loadWithCpu(server: RunningServer, load: Omit<LoadOptions, 'origin'>): Promise<CpuMeasurement> {
  const cpuBefore = server.cpuMs();
  const measurement = await applyLoad({ origin: server.origin, ...load });
  return { measurement, cpuUsPerRequest: ((server.cpuMs() - cpuBefore) * 1000) / measurement.responses };
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

/**
 * Warms each server up in turn (the others idle) with every scenario's request mixed, so its JIT and
 * caches reach the state a long-running server works in before anything is measured. Results are in
 * the order of `servers`; undefined where the warm-up is off.
 */
export async function warmUp(
  servers: readonly RunningServer[],
  scenarios: readonly Scenario[],
  table: TableContext,
  { warmupSeconds, connections }: BenchSettings,
): Promise<(CpuMeasurement | undefined)[]> {
  const warmups: (CpuMeasurement | undefined)[] = [];
  for (const server of servers) {
    warmups.push(warmupSeconds > 0 ? await mixedLoad(server, scenarios, table, warmupSeconds, connections) : undefined);
  }
  return warmups;
}

/** Warms the server up (JIT, caches) with mixed load, then measures each scenario on its own. */
export async function measureScenarios(
  server: RunningServer,
  scenarios: readonly Scenario[],
  table: TableContext,
  settings: BenchSettings,
): Promise<ScenarioMeasurement[]> {
  const [warmup] = await warmUp([server], scenarios, table, settings);
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
 * One scenario on several running servers (warmed up: see warmUp, whose results `warmups` are),
 * loaded in turn for `sliceSeconds` at a time until each has had `seconds`: a busy minute of this
 * shared machine falls on all of them alike, where whole runs a few seconds apart can differ by 20%
 * (BENCHMARKS.md). A server waits idle while another is loaded. Results are in the order of `servers`.
 */
export async function measureInTurns(
  servers: readonly RunningServer[],
  scenario: Scenario,
  table: TableContext,
  { seconds, sliceSeconds, connections }: BenchSettings,
  warmups: readonly (CpuMeasurement | undefined)[],
): Promise<ScenarioMeasurement[]> {
  const turns = servers.map(() => ({ parts: [] as Measurement[], latencies: [] as number[] }));
  // CPU from before the first turn to after the last: a server's work left over when its turn ends
  // (closing connections, garbage collection) is its own, though it runs in the other's turn.
  const cpuBefore = servers.map((server) => server.cpuMs());
  for (let done = 0; done < seconds; done += sliceSeconds) {
    const slice = Math.min(sliceSeconds, seconds - done);
    for (const [index, server] of servers.entries()) {
      const turn = turns[index];
      if (turn === undefined) continue;
      const requests = [loadRequest(scenario, table)];
      turn.parts.push(
        await applyLoad({ origin: server.origin, requests, seconds: slice, connections, latencies: turn.latencies }),
      );
    }
  }
  await sleep(SETTLE_MS);
  const cpuMs = servers.map((server, index) => server.cpuMs() - (cpuBefore[index] ?? 0));
  return turns.map((turn, index) => {
    const measurement = combineLoads(turn.parts, turn.latencies);
    const load = { measurement, cpuUsPerRequest: ((cpuMs[index] ?? 0) * 1000) / measurement.responses };
    return scenarioMeasurement(scenario, load, warmups[index]);
  });
}
