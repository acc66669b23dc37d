/**
 * `npm run bench`: the project against the hand-written baseline (baseline.ts) on SQLite and on
 * PostgreSQL, what metrics cost, load held (overload.ts) and behind HAProxy (balancer.ts).
 * docs/performance.md says what each part measures and how; the report ends with PASS/FAIL per
 * target and exits 0: a report, not a test.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { applyLoad, measure, newTally } from './load.js';
import { balancerPart } from './balancer.js';
import { overloadPart } from './overload.js';
import * as report from './report.js';
import type { Figures, Limits, Role, RoundRun, ServerLives, SummaryRow, TargetCheck } from './report.js';
import { expectedResponses, loadRequests, probe, SCENARIOS, type Scenario, scenarioNamed } from './scenarios.js';
import { BASELINE, NO_METRICS, PROJECT, type RunningServer, type ServerSpec, withServer } from './servers.js';
import { benchSettings } from './settings.js';
import { type Backend, postgresBackend, sqliteBackend, type Table } from './tables.js';
import { webhooksPart } from './webhooks.js';

const settings = benchSettings();
// An unknown name is an error before anything starts.
const measured = (settings.scenarios ?? []).map(scenarioNamed);
const isMeasured = (scenario: Scenario) => settings.scenarios === undefined || measured.includes(scenario);
const [SMALL, LARGE] = [10_000, 1_000_000];
/** Long enough for a server to finish what its turn left (in-flight responses, closing sockets). */
const SETTLE_MS = 200;
/** Metrics may cost at most 3% of throughput (issue 16). */
const METRICS_LIMITS: Limits = { minRpsRatio: 0.97 };
const POSTGRES_LIMITS: Limits = { minRpsRatio: report.TARGETS.minRpsRatio, maxScaleP99Ratio: 1.2 };
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
// Each role's database copy goes in a folder of its own: both servers of a round run at once.
for (const role of ['project', 'baseline']) mkdirSync(join(dir, role));

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const label = (pets: number) => (pets >= LARGE ? `${pets / LARGE}M` : `${pets / 1000}k`);

/** One part of the report: its lines, its rows of the results table and its target checks. */
interface Part {
  name: string;
  lines: string[];
  rows: SummaryRow[];
  checks: TargetCheck[];
}

/** A table and the scenarios measured on it. */
interface TableScenarios {
  table: Table;
  scenarios: readonly Scenario[];
}

/**
 * Loads both servers in turn, a second at a time (`order` says which goes first), until each has had
 * `seconds`: a busy moment of this shared machine falls on both alike. CPU is counted from before the
 * first turn to SETTLE_MS after the last: work left over when a server's turn ends is still its own.
 * `unexpected` counts the responses `scenario` should not have had, and socket errors.
 */
async function loadInTurns(
  servers: Record<Role, RunningServer>,
  order: Role[],
  requests: autocannon.Request[],
  seconds: number,
  scenario?: Scenario,
): Promise<Record<Role, Figures>> {
  const cpuMs = { project: servers.project.cpuMs(), baseline: servers.baseline.cpuMs() };
  const tallies = { project: newTally(), baseline: newTally() };
  for (let second = 0; second < seconds; second += 1) {
    for (const role of order) await applyLoad({ origin: servers[role].origin, requests, seconds: 1 }, tallies[role]);
  }
  await sleep(SETTLE_MS);
  const figures = (role: Role): Figures => {
    const { rps, p99Ms, responses, statuses, errors } = measure(tallies[role]);
    const cpuUs = ((servers[role].cpuMs() - cpuMs[role]) * 1000) / responses;
    const expected = scenario === undefined ? 0 : expectedResponses(scenario, statuses);
    return { rps, p99Ms, cpuUs, unexpected: responses - expected + errors };
  };
  return { project: figures('project'), baseline: figures('baseline') };
}

/**
 * One round on one table: both servers start on fresh copies of it, must answer every scenario
 * measured alike (checked in round 1), are warmed up with all the reads mixed, then each scenario
 * is measured on both in turn, reads first so they see the table as seeded. Which server goes
 * first alternates.
 */
async function benchRound(specs: Record<Role, ServerSpec>, { table, scenarios }: TableScenarios, round: number) {
  const tableName = label(table.pets);
  log(`${specs.project.name} vs ${specs.baseline.name}, ${tableName}, round ${round}/${settings.rounds}`);
  const reads = scenarios.filter((scenario) => scenario.writes !== true);
  const ordered = [...reads, ...scenarios.filter((scenario) => scenario.writes === true)].filter(isMeasured);
  const order: [Role, Role] = round % 2 === 1 ? ['project', 'baseline'] : ['baseline', 'project'];
  const [first, second] = order;
  return withServer(specs[first], table, join(dir, first), (one) =>
    withServer(specs[second], table, join(dir, second), async (other) => {
      const servers = first === 'project' ? { project: one, baseline: other } : { project: other, baseline: one };
      for (const scenario of round === 1 ? ordered : []) {
        const [a, b] = await Promise.all([one, other].map(({ origin }) => probe(origin, scenario, table)));
        if (a !== b) throw new Error(`The servers answer ${scenario.name} differently:\n  ${a}\n  ${b}`);
      }
      const mix = reads.flatMap((scenario) => loadRequests(scenario, table));
      await loadInTurns(servers, order, mix, settings.warmupSeconds);
      const runs: RoundRun[] = [];
      for (const scenario of ordered) {
        const requests = loadRequests(scenario, table);
        const figures = await loadInTurns(servers, order, requests, settings.seconds, scenario);
        runs.push({ table: tableName, scenario: scenario.name, ...figures });
      }
      const life = ({ startupMs, peakRssMb }: RunningServer) => ({ startupMs, peakRssMb: peakRssMb() });
      return { runs, lives: { project: life(servers.project), baseline: life(servers.baseline) } };
    }),
  );
}

/**
 * The project against `baseline` over all rounds. Tables take turns round by round, so the p99
 * growth from one to the next is read across minutes of the same machine, not the run's halves.
 */
async function compare(name: string, baseline: ServerSpec, tables: TableScenarios[], limits: Limits) {
  const specs = { project: PROJECT, baseline };
  const runs: RoundRun[] = [];
  const lives: ServerLives[] = [];
  for (let round = 1; round <= settings.rounds; round += 1) {
    for (const table of tables) {
      const measured = await benchRound(specs, table, round);
      runs.push(...measured.runs);
      lives.push(measured.lives);
    }
  }
  const names = { project: PROJECT.name, baseline: baseline.name };
  const rows = report.summarise(runs);
  const lines = [`${name}: ${names.project} vs ${names.baseline}`, report.livesLine(lives, names)];
  return { name, lines, rows, checks: report.comparisonChecks(rows, limits, names), lives };
}

async function seed(backend: Backend, pets: number): Promise<Table> {
  log(`${backend.name}: seeding ${pets.toLocaleString('en-US')} pets`);
  return backend.seed(dir, pets);
}

/** Every scenario on the 10k table, and the reads also on the 1M one (unless none is measured). */
async function tables(backend: Backend, small: Table): Promise<TableScenarios[]> {
  const atScale = SCENARIOS.filter((scenario) => scenario.atScale);
  const large = atScale.some(isMeasured) ? [{ table: await seed(backend, LARGE), scenarios: atScale }] : [];
  return [{ table: small, scenarios: SCENARIOS }, ...large];
}

async function main(): Promise<void> {
  log(`settings ${JSON.stringify(settings)}; working in ${dir}`);
  const parts = new Set(settings.parts);
  const results: Part[] = [];
  if (['sqlite', 'metrics', 'overload', 'balancer'].some((part) => parts.has(part))) {
    const small = await seed(sqliteBackend, SMALL);
    if (parts.has('sqlite')) {
      const sqlite = await compare('SQLite', BASELINE, await tables(sqliteBackend, small), report.TARGETS);
      results.push({ ...sqlite, checks: [...sqlite.checks, ...report.serverChecks(sqlite.lives)] });
    }
    if (parts.has('metrics')) {
      const scenarios = ['get-one', 'no-key-401'].map(scenarioNamed);
      results.push(await compare('metrics', NO_METRICS, [{ table: small, scenarios }], METRICS_LIMITS));
    }
    if (parts.has('overload')) {
      log('load held: get-one at half and twice capacity, with and without overload protection');
      results.push({ name: 'load held', rows: [], ...(await overloadPart(small, join(dir, 'project'), settings)) });
    }
    if (parts.has('balancer')) {
      log('behind the balancer: bursts, and get-one at half and twice capacity, through HAProxy');
      results.push({ name: 'balancer', rows: [], ...(await balancerPart(small, join(dir, 'balancer'), settings)) });
    }
  }
  if (parts.has('webhooks'))
    results.push({ name: 'webhooks', ...(await webhooksPart(join(dir, 'webhooks'), settings, log)) });
  if (parts.has('postgres')) {
    log('PostgreSQL: starting an embedded server');
    const backend = await postgresBackend();
    try {
      const small = await seed(backend, SMALL);
      results.push(await compare('PostgreSQL', BASELINE, await tables(backend, small), POSTGRES_LIMITS));
    } finally {
      await backend.close();
    }
  }
  const checks = results.flatMap(({ name, checks }) => checks.map((one) => ({ ...one, line: `${name}: ${one.line}` })));
  const lines = [
    `Machine: ${report.machine()}`,
    ...results.flatMap(({ lines }) => ['', ...lines]),
    '',
    'Medians over rounds (x = project / baseline, or / no metrics: the median of the ratios within each round):',
    report.resultsTable(results),
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
