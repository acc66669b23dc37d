/**
 * `npm run bench` (`npm run bench:quick`: BENCH_QUICK=1, a few minutes): the project against a
 * hand-written baseline (baseline.ts), same scenarios, same store, both servers running and loaded
 * in turn; then the cost of metrics (the project with and without them), load held at twice
 * capacity (overload.ts), and both servers again on PostgreSQL. Prints a report with PASS/FAIL per
 * target and writes it as JSON to bench-results/latest.json. Always exits 0 once measured: it is a
 * report, not a test. Settings: see settings.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeConnections } from './http.js';
import { measureInTurns, type PreparedTable, prepareTable, warmUpInTurns, withServer, loadWithCpu } from './measure.js';
import { overloadPart } from './overload.js';
import { postgresBackend } from './postgres.js';
import {
  comparisonChecks,
  type Limits,
  livesTable,
  machine,
  type Names,
  type Role,
  scenarioTable,
  type ScenarioRun,
  type ServerLife,
  type Soak,
  serverChecks,
  soakLine,
  summarise,
  TARGETS,
  type TargetCheck,
  verdicts,
} from './report.js';
import { loadRequest, probe, SCENARIOS, type Scenario, selectScenarios } from './scenarios.js';
import { BASELINE, PROJECT, type RunningServer, type ServerSpec } from './server-process.js';
import { benchSettings, LARGE_TABLE, RESULTS_DIR, SMALL_TABLE } from './settings.js';
import { type Backend, sqliteBackend } from './table.js';

const settings = benchSettings();
/** Starts of each server per round on the small table besides the round's own, for a steadier start-up median. */
const STARTS_PER_ROUND = 2;
/** Metrics may cost at most 3% of throughput (issue 16). */
const METRICS_LIMITS: Limits = { minRpsRatio: 0.97 };
const WITHOUT_METRICS: ServerSpec = { name: 'no metrics', kind: 'project', env: { METRICS_PORT: 'off' } };
const scenarios = selectScenarios(settings.scenarios);
const reads = SCENARIOS.filter((scenario) => !scenario.writes);
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
// A server life's database copy goes in the folder of its role, so both servers of a round can run at once.
for (const role of ['project', 'baseline']) mkdirSync(join(dir, role));

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const label = (count: number) => (count >= 1_000_000 ? `${count / 1_000_000}M` : `${count / 1000}k`);

/** Two servers compared scenario by scenario: what they are, and what was measured. */
class Comparison {
  readonly runs: ScenarioRun[] = [];
  readonly lives: ServerLife[] = [];
  readonly names: Names;
  constructor(
    readonly title: string,
    readonly specs: Record<Role, ServerSpec>,
  ) {
    this.names = { project: specs.project.name, baseline: specs.baseline.name };
  }

  record(table: string, role: Role, server: RunningServer): void {
    this.lives.push({ table, server: role, startupMs: server.startupMs, peakRssMb: server.memory().peakRssMb });
  }

  lines(): string[] {
    return [this.title, scenarioTable(summarise(this.runs), this.names), '', livesTable(this.lives, this.names)];
  }
}

/** Both servers must give every scenario the same status and body shape, or nothing is measured. */
async function verifyEquivalence(comparison: Comparison, prepared: PreparedTable, chosen: Scenario[]): Promise<void> {
  const [project, baseline] = await Promise.all(
    (['project', 'baseline'] as const).map((role) =>
      withServer(comparison.specs[role], prepared, join(dir, role), async (server) => {
        const shapes: string[] = [];
        for (const scenario of chosen) shapes.push(await probe(server.origin, scenario, prepared.context));
        return shapes;
      }),
    ),
  );
  const mismatches = chosen.flatMap((scenario, index) =>
    project?.[index] === baseline?.[index]
      ? []
      : [
          `${scenario.name}:\n  ${comparison.names.project}  ${project?.[index]}\n  ${comparison.names.baseline} ${baseline?.[index]}`,
        ],
  );
  if (mismatches.length > 0)
    throw new Error(`The servers answer differently, so they cannot be compared:\n${mismatches.join('\n')}`);
}

/**
 * Every round gets fresh server lives (a database copy each, start), both servers running at once.
 * Each is warmed up with the table's reads mixed, then every chosen scenario is measured on both,
 * loaded in turn a second at a time, so they see the same background load; the ratio is taken
 * within each round (report.ts). A scenario that writes comes after the reads, so they see the
 * table as seeded. `extraStarts` more starts of each server per round feed the start-up median.
 */
async function benchTable(
  comparison: Comparison,
  prepared: PreparedTable,
  chosen: Scenario[],
  extraStarts = 0,
): Promise<void> {
  const table = label(prepared.context.pets);
  await verifyEquivalence(comparison, prepared, chosen);
  const ordered = [...chosen.filter((scenario) => !scenario.writes), ...chosen.filter((scenario) => scenario.writes)];
  const warmupMix = reads.filter((scenario) => !chosen.some((one) => one.atScale) || scenario.atScale);
  for (let round = 1; round <= settings.rounds; round += 1) {
    log(`${comparison.title} ${table} round ${round}/${settings.rounds}: ${chosen.length} scenarios`);
    // Alternate which server goes first, so a slow drift of the machine favours neither.
    const roles: Role[] = round % 2 === 1 ? ['project', 'baseline'] : ['baseline', 'project'];
    const [first = 'project', second = 'baseline'] = roles;
    await withServer(comparison.specs[first], prepared, join(dir, first), (one) =>
      withServer(comparison.specs[second], prepared, join(dir, second), async (other) => {
        const servers = [one, other];
        await warmUpInTurns(servers, warmupMix, prepared.context, settings);
        for (const scenario of ordered) {
          const results = await measureInTurns(servers, scenario, prepared.context, settings);
          for (const [index, result] of results.entries())
            comparison.runs.push({ ...result, table, round, server: roles[index] ?? first, scenario: scenario.name });
        }
        comparison.record(table, first, one);
        comparison.record(table, second, other);
      }),
    );
    for (let start = 0; start < extraStarts; start += 1) {
      for (const role of roles) {
        await withServer(comparison.specs[role], prepared, join(dir, role), async (server) =>
          comparison.record(`${table} start`, role, server),
        );
      }
    }
  }
}

/**
 * RSS of the project server after warm-up, then after `seconds` more of mixed load: SQLite's page
 * cache and V8's heap grow to their working size during the warm-up; what grows after is a leak.
 */
async function soak(comparison: Comparison, prepared: PreparedTable, seconds: number): Promise<Soak> {
  const table = label(prepared.context.pets);
  const warmup = Math.max(settings.warmupSeconds, Math.min(60, seconds));
  log(`soak: project on the ${table} table, mixed load for ${warmup} + ${seconds} s`);
  const requests = scenarios.map((scenario) => loadRequest(scenario, prepared.context));
  return withServer(PROJECT, prepared, dir, async (server) => {
    await loadWithCpu(server, { requests, seconds: warmup, connections: settings.connections });
    const afterWarmupMb = server.memory().rssMb;
    await loadWithCpu(server, { requests, seconds, connections: settings.connections });
    comparison.record(`${table} soak`, 'project', server);
    return { table, warmupSeconds: warmup, seconds, afterWarmupMb, afterSoakMb: server.memory().rssMb };
  });
}

/** One backend, both tables: the small one with every chosen scenario, the large with those measured at scale. */
async function benchBackend(
  backend: Backend,
  comparison: Comparison,
  extraStarts: number,
  atSmall: (prepared: PreparedTable) => Promise<void> = async () => undefined,
): Promise<PreparedTable> {
  log(`${backend.name}: seeding ${SMALL_TABLE.toLocaleString('en-US')} pets`);
  let largest = await prepareTable(backend, dir, SMALL_TABLE);
  await benchTable(comparison, largest, scenarios, extraStarts);
  await atSmall(largest);
  const atScale = scenarios.filter((scenario) => scenario.atScale);
  if (settings.scale && atScale.length > 0) {
    await largest.seeded.drop();
    log(`${backend.name}: seeding ${LARGE_TABLE.toLocaleString('en-US')} pets`);
    largest = await prepareTable(backend, dir, LARGE_TABLE);
    await benchTable(comparison, largest, atScale);
  }
  return largest;
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  log(`settings ${JSON.stringify(settings)}; working in ${dir}`);
  const parts = new Set(settings.parts);
  const sections: string[][] = [];
  const checks: TargetCheck[] = [];
  const json: Record<string, unknown> = { settings, machine: machine(), startedAt };

  const sqlite = new Comparison('SQLite: project vs baseline', { project: PROJECT, baseline: BASELINE });
  const metrics = new Comparison('Metrics cost (SQLite): project vs the same with METRICS_PORT=off', {
    project: PROJECT,
    baseline: WITHOUT_METRICS,
  });
  if (parts.has('sqlite') || parts.has('metrics') || parts.has('overload')) {
    const atSmall = async (prepared: PreparedTable) => {
      if (parts.has('metrics')) {
        const chosen = selectScenarios(['get-one', 'no-key-401']);
        await benchTable(metrics, prepared, chosen);
        sections.push(metrics.lines());
        checks.push(...comparisonChecks(summarise(metrics.runs), METRICS_LIMITS, metrics.names));
        json.metrics = { runs: metrics.runs, summary: summarise(metrics.runs) };
      }
      if (parts.has('overload')) {
        log('load held: get-one at half and twice capacity, with and without overload protection');
        const held = await overloadPart(prepared, dir, settings);
        sections.push(held.lines);
        checks.push(...held.checks);
        json.overload = held.results;
      }
    };
    if (parts.has('sqlite')) {
      const largest = await benchBackend(sqliteBackend, sqlite, STARTS_PER_ROUND, atSmall);
      const soaked = settings.soakSeconds > 0 ? await soak(sqlite, largest, settings.soakSeconds) : undefined;
      await largest.seeded.drop();
      sections.unshift([...sqlite.lines(), '', soakLine(soaked)]);
      checks.unshift(
        ...comparisonChecks(summarise(sqlite.runs), TARGETS, sqlite.names),
        ...serverChecks(sqlite.lives, soaked),
      );
      json.sqlite = { runs: sqlite.runs, lives: sqlite.lives, soak: soaked, summary: summarise(sqlite.runs) };
    } else {
      const prepared = await prepareTable(sqliteBackend, dir, SMALL_TABLE);
      await atSmall(prepared);
    }
  }
  if (parts.has('postgres')) {
    const backend = await postgresBackend(settings.databaseUrl, log);
    try {
      const postgres = new Comparison(`PostgreSQL (${backend.name}): project vs baseline`, {
        project: PROJECT,
        baseline: BASELINE,
      });
      await benchBackend(backend, postgres, 0);
      const pgLimits: Limits = { minRpsRatio: TARGETS.minRpsRatio, maxScaleP99Ratio: TARGETS.maxScaleP99Ratio };
      sections.push(postgres.lines());
      checks.push(...comparisonChecks(summarise(postgres.runs), pgLimits, postgres.names));
      json.postgres = { runs: postgres.runs, lives: postgres.lives, summary: summarise(postgres.runs) };
    } finally {
      await backend.close();
    }
  }

  const legend = SCENARIOS.map(
    (scenario) => `  ${scenario.name.padEnd(16)} ${scenario.summary} -> ${scenario.expect.status}`,
  );
  const report = [
    'Scenarios:',
    ...legend,
    '',
    'Medians over rounds; x = first server / second, the median of the ratios within each round; rounds = the',
    'lowest and highest x req/s of one round; CPU us/req = server CPU time (all threads) per response.',
    ...sections.flatMap((lines) => ['', ...lines]),
    '',
    ...verdicts(checks),
  ].join('\n');
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, 'latest.json');
  writeFileSync(file, `${JSON.stringify({ ...json, targets: checks }, null, 2)}\n`);
  process.stdout.write(`\n${report}\n\nWritten to ${file}\n`);
}

try {
  await main();
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
