/**
 * `npm run bench`: the project's newest version (/v2) against the bare reference (bare.ts) on SQLite
 * and PostgreSQL, v1 answered through the version changes against v2 (`versions`), createPet with a webhook subscriber against none (webhooks.ts), load held (overload.ts) and
 * behind HAProxy (balancer.ts); when BENCH_PARTS names it, the price list of features (features.ts).
 * Every server is a child process spoken to over HTTP. The report
 * ends with PASS/FAIL per target and exits 0: a report, not a test. BENCHMARKS.md says how to read it.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { balancerPart } from './balancer.js';
import { applyLoad, measure, newTally } from './load.js';
import { overloadPart } from './overload.js';
import * as report from './report.js';
import type { Figures, Part, Role, RoundRun } from './report.js';
import {
  loadRequests,
  probe,
  SCENARIOS,
  type Scenario,
  scenarioNamed,
  VERSION_PAIRS,
  versionPairNamed,
} from './scenarios.js';
import { OPERATION_FEATURES, projectWithout, REQUEST_FEATURES } from './features.js';
import { BARE, PROJECT, type RunningServer, type ServerSpec, withServer } from './servers.js';
import { benchSettings } from './settings.js';
import { type Backend, postgresBackend, sqliteBackend, type Table } from './tables.js';
import { webhooksPart } from './webhooks.js';

const settings = benchSettings();
// An unknown name is an error before anything starts.
const measured = (settings.scenarios ?? SCENARIOS.map((scenario) => scenario.name)).map(scenarioNamed);
const pairNames = new Set(VERSION_PAIRS.map(({ name }) => name));
const measuredPairs = (settings.scenarios?.filter((name) => pairNames.has(name)) ?? [...pairNames]).map(
  versionPairNamed,
);
/** The project within 0.8x of the bare reference's throughput in every scenario (issue 38). */
const MIN_RPS_RATIO = 0.8;
/** A v1 request answered through the version changes costs at most 1.1x the CPU of the same v2 request (issue 51). */
const MAX_VERSION_CPU_RATIO = 1.1;
/** Long enough for a server to finish what its turn left (in-flight responses, closing sockets). */
const SETTLE_MS = 200;
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/**
 * What a round measures: one scenario as each server is asked it (the same one, or the same
 * operation in each version: the versions part).
 */
type Sides = Record<Role, Scenario>;

const same = (scenario: Scenario): Sides => ({ project: scenario, reference: scenario });

/**
 * Loads both servers in turn, a second at a time (`order` says which goes first), until each has had
 * `seconds`: a busy moment of this shared machine falls on both alike. CPU is counted from before the
 * first turn to SETTLE_MS after the last. `unexpected` counts the answers of another status than
 * `expectedStatus` (when given), and socket errors.
 */
async function loadInTurns(
  servers: Record<Role, RunningServer>,
  order: Role[],
  requests: Record<Role, autocannon.Request[]>,
  seconds: number,
  expectedStatus?: Record<Role, number>,
): Promise<Record<Role, Figures>> {
  const cpuMs = { project: servers.project.cpuMs(), reference: servers.reference.cpuMs() };
  const tallies = { project: newTally(), reference: newTally() };
  for (let second = 0; second < seconds; second += 1) {
    for (const role of order)
      await applyLoad({ origin: servers[role].origin, requests: requests[role], seconds: 1 }, tallies[role]);
  }
  await sleep(SETTLE_MS);
  const figures = (role: Role): Figures => {
    const { rps, p99Ms, responses, statuses, errors } = measure(tallies[role]);
    const cpuUs = ((servers[role].cpuMs() - cpuMs[role]) * 1000) / responses;
    const expected = expectedStatus === undefined ? responses : (statuses[expectedStatus[role]] ?? 0);
    return { rps, p99Ms, cpuUs, unexpected: responses - expected + errors };
  };
  return { project: figures('project'), reference: figures('reference') };
}

/** Both sides' requests: what autocannon sends each server. */
const requestsOf = (sides: Sides[], table: Table) => ({
  project: sides.flatMap((side) => loadRequests(side.project, table)),
  reference: sides.flatMap((side) => loadRequests(side.reference, table)),
});

/**
 * One round: both servers start on fresh copies of the table, must answer every scenario as
 * expected, and alike where they are asked the same (checked in round 1), are warmed up with the
 * reads mixed, then each scenario is measured on both in turn, reads first so they see the table as
 * seeded. Which server goes first alternates.
 */
async function round(
  backend: string,
  table: Table,
  number: number,
  [projectSpec, referenceSpec]: [ServerSpec, ServerSpec],
  chosen: Sides[],
) {
  log(`${backend}: ${projectSpec.name} vs ${referenceSpec.name}, round ${number}/${settings.rounds}`);
  const writes = (sides: Sides) => sides.project.writes === true;
  const scenarios = [...chosen.filter((s) => !writes(s)), ...chosen.filter(writes)];
  const order: Role[] = number % 2 === 1 ? ['project', 'reference'] : ['reference', 'project'];
  return withServer(projectSpec, table, join(dir, 'project'), (project) =>
    withServer(referenceSpec, table, join(dir, 'reference'), async (reference) => {
      const servers = { project, reference };
      for (const sides of number === 1 ? scenarios : []) {
        const [a, b] = await Promise.all([
          probe(project.origin, sides.project, table),
          probe(reference.origin, sides.reference, table),
        ]);
        if (sides.project === sides.reference && a !== b)
          throw new Error(`The servers answer ${sides.project.name} differently:\n  ${a}\n  ${b}`);
      }
      const mix = requestsOf(
        scenarios.filter((sides) => !writes(sides)),
        table,
      );
      // autocannon fails on an empty list (BENCH_SCENARIOS=create).
      if (mix.project.length > 0) await loadInTurns(servers, order, mix, settings.warmupSeconds);
      const runs: RoundRun[] = [];
      for (const sides of scenarios) {
        const expected = { project: sides.project.expect.status, reference: sides.reference.expect.status };
        const figures = await loadInTurns(servers, order, requestsOf([sides], table), settings.seconds, expected);
        runs.push({ scenario: sides.project.name, ...figures });
      }
      return runs;
    }),
  );
}

/** Every round of two servers on `table`: the summary row of each scenario. */
async function rounds(
  backend: string,
  table: Table,
  servers: [ServerSpec, ServerSpec],
  scenarios: Sides[] = measured.map(same),
) {
  const runs: RoundRun[] = [];
  for (let number = 1; number <= settings.rounds; number += 1)
    runs.push(...(await round(backend, table, number, servers, scenarios)));
  return report.summarise(runs);
}

/**
 * The project as issue 38 compared it with the bare reference: request logs and rate limits off
 * (servers.ts turns the limits off); the price list counts both.
 */
const AS_ISSUE_38_MEASURED: ServerSpec = { ...PROJECT, env: { LOG_LEVEL: 'warn' } };

/** The project against the bare reference on `backend`'s table over all rounds. */
async function compare(backend: Backend): Promise<Part> {
  log(`${backend.name}: seeding`);
  const rows = await rounds(backend.name, await backend.seed(dir), [AS_ISSUE_38_MEASURED, BARE]);
  return {
    name: `bare ${backend.name}`,
    lines: [],
    rows,
    checks: report.comparisonChecks(rows, MIN_RPS_RATIO, 'bare'),
  };
}

/**
 * The price list: the project with every feature on against itself without one, feature by
 * feature, on SQLite (BENCH_SCENARIOS, get-one and create unless it names others). A feature's
 * price is the CPU a response it saves: all on, less all on divided by the median CPU ratio.
 */
async function pricePart(): Promise<Part> {
  const table = await sqliteBackend.seed(join(dir, 'features'));
  const scenarios = (settings.scenarios ?? ['get-one', 'create']).map(scenarioNamed).map(same);
  const lines: string[] = [];
  const rows: string[][] = [];
  for (const feature of [...REQUEST_FEATURES, ...OPERATION_FEATURES]) {
    for (const row of await rounds('SQLite', table, [projectWithout(), projectWithout(feature)], scenarios)) {
      const price = row.project.cpuUs - row.project.cpuUs / row.x.cpu;
      rows.push([
        row.scenario,
        feature.feature,
        report.count(row.project.cpuUs),
        price.toFixed(1),
        `${((100 * price) / row.project.cpuUs).toFixed(1)}%`,
        report.ratio(row.x.rps),
      ]);
      if (row.project.unexpected + row.reference.unexpected > 0)
        lines.push(
          `${feature.feature}, ${row.scenario}: ${row.project.unexpected + row.reference.unexpected} unexpected`,
        );
    }
  }
  lines.push(
    report.textTable(
      ['scenario', 'feature', 'all on: CPU µs/resp', 'its price: µs', 'of all', 'req/s, with/without'],
      rows,
    ),
  );
  return { name: 'price list', lines, rows: [], checks: [] };
}

/**
 * v1 answered through the version changes against v2 (issue 51): two lives of the project on SQLite,
 * one asked each operation as v1 asks it, the other as v2 does, in turns as against the bare
 * reference. The migrations are CPU in the server's process, the same on either backend.
 */
async function versionsPart(): Promise<Part> {
  const table = await sqliteBackend.seed(join(dir, 'versions'));
  const sides = measuredPairs.map(({ v1, v2 }) => ({ project: v1, reference: v2 }));
  const v1: ServerSpec = { ...AS_ISSUE_38_MEASURED, name: 'v1 through the changes' };
  const v2: ServerSpec = { ...AS_ISSUE_38_MEASURED, name: 'v2' };
  const rows = await rounds('SQLite', table, [v1, v2], sides);
  return {
    name: 'v1 vs v2 SQLite',
    lines: [],
    rows,
    checks: report.versionChecks(rows, MAX_VERSION_CPU_RATIO),
  };
}

async function main(): Promise<void> {
  log(`settings ${JSON.stringify(settings)}; working in ${dir}`);
  for (const role of ['project', 'reference', 'features', 'overload', 'balancer', 'webhooks', 'versions'])
    mkdirSync(join(dir, role));
  const parts = new Set(settings.parts);
  const results: Part[] = [];
  if (parts.has('sqlite')) results.push(await compare(sqliteBackend));
  if (parts.has('postgres')) {
    const backend = await postgresBackend();
    try {
      results.push(await compare(backend));
    } finally {
      await backend.close();
    }
  }
  if (parts.has('versions') && measuredPairs.length > 0) results.push(await versionsPart());
  if (parts.has('features')) results.push(await pricePart());
  if (parts.has('webhooks')) results.push(await webhooksPart(join(dir, 'webhooks'), settings, log));
  if (parts.has('overload') || parts.has('balancer')) {
    const table = await sqliteBackend.seed(join(dir, 'overload'));
    if (parts.has('overload')) {
      log('load held: bursts, and get-one at half and twice capacity, with and without overload protection');
      results.push(await overloadPart(table, join(dir, 'overload'), settings));
    }
    if (parts.has('balancer')) {
      log('behind the balancer: the same, through HAProxy in front of two instances');
      results.push(await balancerPart(table, join(dir, 'balancer'), settings));
    }
  }
  const checks = results.flatMap(({ name, checks }) => checks.map((one) => ({ ...one, line: `${name}: ${one.line}` })));
  const compared = results.filter(({ rows }) => rows.length > 0);
  const lines = [
    `Machine: ${report.machine()}`,
    ...results.flatMap(({ name, lines }) => (lines.length === 0 ? [] : ['', `${name}:`, ...lines])),
    ...(compared.length === 0
      ? []
      : [
          '',
          'Medians over rounds (x = project / the server it is compared with: the median of the ratios within each round):',
          report.resultsTable(compared),
        ]),
    ...(checks.length === 0 ? [] : ['', ...report.verdicts(checks)]),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

try {
  await main();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
