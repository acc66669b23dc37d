/**
 * `npm run bench` (`npm run bench:quick`: BENCH_QUICK=1, a few minutes): the project against the
 * hand-written baseline (baseline.ts), same scenarios, same store, both servers running and loaded
 * in turn, on SQLite at 10,000 and 1,000,000 pets; what metrics cost (the project against itself
 * with METRICS_PORT=off); load held at twice capacity (overload.ts); then project and baseline on
 * one PostgreSQL (postgres.ts). BENCH_PARTS picks parts. Prints a report with PASS/FAIL per target
 * and exits 0 once measured: a report, not a test.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { applyLoad, combineLoads, type Measurement } from './load.js';
import { overloadPart } from './overload.js';
import { postgresBackend } from './postgres.js';
import * as report from './report.js';
import type { Limits, Role, ScenarioRun, ServerLife, SummaryRow, TargetCheck } from './report.js';
import { loadRequest, type PreparedTable, prepareTable, probe, SCENARIOS, type Scenario } from './scenarios.js';
import { selectScenarios, type TableContext } from './scenarios.js';
import { BASELINE, NO_METRICS, PROJECT, type RunningServer, type ServerSpec, withServer } from './servers.js';
import { benchSettings } from './settings.js';
import { type Backend, sqliteBackend } from './table.js';

const settings = benchSettings();
const scenarios = selectScenarios(undefined);
const [SMALL, LARGE] = [10_000, 1_000_000];
/** Long enough for a server to finish what its turn left (in-flight responses, closing sockets). */
const SETTLE_MS = 200;
/** Metrics may cost at most 3% of throughput (issue 16). */
const METRICS_LIMITS: Limits = { minRpsRatio: 0.97 };
const POSTGRES_LIMITS: Limits = { minRpsRatio: report.TARGETS.minRpsRatio, maxScaleP99Ratio: 1.2 };
const ROLES: Role[] = ['project', 'baseline'];
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
// Each role's database copy goes in a folder of its own: both servers of a round run at once.
for (const role of ROLES) mkdirSync(join(dir, role));

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const label = (pets: number) => (pets >= LARGE ? `${pets / LARGE}M` : `${pets / 1000}k`);

/** Two servers compared scenario by scenario, and what was measured. */
interface Comparison {
  title: string;
  specs: Record<Role, ServerSpec>;
  runs: ScenarioRun[];
  lives: ServerLife[];
}

const newComparison = (title: string, project: ServerSpec, baseline: ServerSpec): Comparison => ({
  title,
  specs: { project, baseline },
  runs: [],
  lives: [],
});

/**
 * Loads running servers in turn, a second at a time, until each has had `seconds`: a busy moment of
 * this shared machine falls on all alike. CPU is counted from before the first turn to SETTLE_MS
 * after the last: work left over when a server's turn ends is still its own.
 */
async function loadInTurns(servers: RunningServer[], requests: autocannon.Request[], seconds: number) {
  const turns = servers.map((server) => ({ server, cpuMs: server.cpuMs(), parts: [] as Measurement[], latencies: [] }));
  for (let second = 0; second < seconds; second += 1) {
    for (const { server, parts, latencies } of turns) {
      const { origin } = server;
      parts.push(await applyLoad({ origin, requests, seconds: 1, connections: settings.connections, latencies }));
    }
  }
  await sleep(SETTLE_MS);
  return turns.map(({ server, cpuMs, parts, latencies }) => {
    const measurement = combineLoads(parts, latencies);
    return { measurement, cpuUsPerRequest: ((server.cpuMs() - cpuMs) * 1000) / measurement.responses };
  });
}

/** Both servers must give every scenario the same status and body shape, or nothing is measured. */
async function verifyEquivalence(servers: RunningServer[], table: TableContext, chosen: Scenario[]): Promise<void> {
  for (const scenario of chosen) {
    const [a, b] = await Promise.all(servers.map(({ origin }) => probe(origin, scenario, table)));
    if (a !== b)
      throw new Error(`The servers answer ${scenario.name} differently:
  ${a}
  ${b}`);
  }
}

/**
 * One round on one table: both servers start on fresh copies of it, are warmed up with the chosen
 * reads mixed, then each scenario is measured on both in turn (reads first, so they see the table
 * as seeded). Which server goes first alternates by round, so a slow drift favours neither.
 */
async function benchRound(
  comparison: Comparison,
  { seeded, context }: PreparedTable,
  chosen: Scenario[],
  round: number,
) {
  const table = label(context.pets);
  log(`${comparison.title} ${table} round ${round}/${settings.rounds}: ${chosen.length} scenarios`);
  const reads = chosen.filter((scenario) => scenario.writes !== true);
  const ordered = [...reads, ...chosen.filter((scenario) => scenario.writes === true)];
  const mix = (reads.length > 0 ? reads : SCENARIOS.filter((scenario) => scenario.atScale)).map((scenario) =>
    loadRequest(scenario, context),
  );
  const roles: Role[] = round % 2 === 1 ? ['project', 'baseline'] : ['baseline', 'project'];
  const [first = 'project', second = 'baseline'] = roles;
  await withServer(comparison.specs[first], seeded, join(dir, first), (one) =>
    withServer(comparison.specs[second], seeded, join(dir, second), async (other) => {
      const servers = [one, other];
      if (round === 1) await verifyEquivalence(servers, context, chosen);
      if (settings.warmupSeconds > 0) await loadInTurns(servers, mix, settings.warmupSeconds);
      for (const scenario of ordered) {
        const results = await loadInTurns(servers, [loadRequest(scenario, context)], settings.seconds);
        for (const [i, { measurement, cpuUsPerRequest }] of results.entries()) {
          const unexpected = measurement.responses - (measurement.statuses[String(scenario.expect.status)] ?? 0);
          const run = { table, scenario: scenario.name, round, measurement, cpuUsPerRequest, unexpected };
          comparison.runs.push({ ...run, server: roles[i] ?? first });
        }
      }
      for (const [i, { startupMs, peakRssMb }] of servers.entries())
        comparison.lives.push({ server: roles[i] ?? first, startupMs, peakRssMb: peakRssMb() });
    }),
  );
}

/**
 * One backend: every chosen scenario on the 10k table, the reads measured at scale on the 1M table.
 * The two tables take turns round by round, so the p99 growth from one to the other is read across
 * minutes of the same machine, not across the run's two halves.
 */
async function benchBackend(
  backend: Backend,
  comparison: Comparison,
  atSmall?: (small: PreparedTable) => Promise<void>,
) {
  const atScale = scenarios.filter((scenario) => scenario.atScale);
  const sizes = settings.scale && atScale.length > 0 ? [SMALL, LARGE] : [SMALL];
  const tables: PreparedTable[] = [];
  for (const pets of sizes) {
    log(`${backend.name}: seeding ${pets.toLocaleString('en-US')} pets`);
    tables.push(await prepareTable(backend, dir, pets));
  }
  for (let round = 1; round <= settings.rounds; round += 1) {
    for (const table of tables)
      await benchRound(comparison, table, table.context.pets === SMALL ? scenarios : atScale, round);
  }
  if (tables[0] !== undefined) await atSmall?.(tables[0]);
}

async function main(): Promise<void> {
  log(`settings ${JSON.stringify(settings)}; working in ${dir}`);
  const parts = new Set(settings.parts);
  // Each part's lines and target checks, in the order measured.
  const results: { key: string; lines: string[]; checks: TargetCheck[] }[] = [];
  const summaries: Record<string, SummaryRow[]> = {};
  const conclude = (
    key: string,
    { title, specs, runs, lives }: Comparison,
    limits: Limits,
    more: TargetCheck[] = [],
  ) => {
    const names = { project: specs.project.name, baseline: specs.baseline.name };
    const summary = report.summarise(runs);
    const checks = [...report.comparisonChecks(summary, limits, names), ...more];
    results.push({ key, lines: [title, report.livesLine(lives, names)], checks });
    summaries[key] = summary;
  };

  const atSmall = async (prepared: PreparedTable) => {
    if (parts.has('metrics')) {
      const metrics = newComparison(
        'Metrics cost (SQLite): project vs the same with METRICS_PORT=off',
        PROJECT,
        NO_METRICS,
      );
      const chosen = selectScenarios(['get-one', 'no-key-401']);
      for (let round = 1; round <= settings.rounds; round += 1) await benchRound(metrics, prepared, chosen, round);
      conclude('metrics', metrics, METRICS_LIMITS);
    }
    if (parts.has('overload')) {
      log('load held: get-one at half and twice capacity, with and without overload protection');
      const held = await overloadPart(prepared, join(dir, 'project'), settings);
      results.push({ key: 'overload', ...held });
    }
  };
  if (parts.has('sqlite')) {
    const sqlite = newComparison('SQLite: project vs baseline', PROJECT, BASELINE);
    await benchBackend(sqliteBackend, sqlite, atSmall);
    conclude('sqlite', sqlite, report.TARGETS, report.serverChecks(sqlite.lives));
  } else if (parts.has('metrics') || parts.has('overload')) {
    await atSmall(await prepareTable(sqliteBackend, dir, SMALL));
  }
  if (parts.has('postgres')) {
    const backend = await postgresBackend(undefined, log);
    try {
      const postgres = newComparison('PostgreSQL (embedded): project vs baseline', PROJECT, BASELINE);
      await benchBackend(backend, postgres);
      conclude('postgres', postgres, POSTGRES_LIMITS);
    } finally {
      await backend.close();
    }
  }
  const checks = results.flatMap(({ key, checks }) =>
    checks.map((one) => ({ ...one, target: `${key}: ${one.target}` })),
  );

  const lines = [
    `Machine: ${report.machine()}`,
    ...results.flatMap(({ lines }) => ['', ...lines]),
    '',
    'Medians over rounds (x = project / baseline, or / no metrics: the median of the ratios within each',
    'round; rounds = the lowest and highest x req/s of one round; CPU = the server process, all threads):',
    ...report.markdownResults({
      SQLite: summaries.sqlite ?? [],
      PostgreSQL: summaries.postgres ?? [],
      metrics: summaries.metrics ?? [],
    }),
    '',
    ...report.verdicts(checks),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

try {
  await main();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
