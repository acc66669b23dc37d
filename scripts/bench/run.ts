/**
 * `npm run bench`: the project against a hand-written baseline (see baseline.ts), same scenarios,
 * same store, both servers running and loaded in turn. Prints a report with PASS/FAIL per
 * target and writes it as JSON to bench-results/latest.json. Always exits 0 once measured: it is a
 * report, not a test. Settings: see settings.ts (BENCH_DURATION, BENCH_SOAK, BENCH_SCALE, ...).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeConnections } from './http.js';
import { measureInTurns, mixedLoad, type PreparedTable, prepareTable, warmUpInTurns, withServer } from './measure.js';
import {
  checkTargets,
  type BenchResults,
  formatReport,
  machine,
  type ScenarioRun,
  type ServerLife,
  type Soak,
  summarise,
} from './report.js';
import { probe, SCENARIOS, type Scenario, selectScenarios } from './scenarios.js';
import { type RunningServer, SERVER_KINDS, type ServerKind } from './server-process.js';
import { benchSettings, LARGE_TABLE, RESULTS_DIR, SMALL_TABLE } from './settings.js';

const settings = benchSettings();
/**
 * Starts of each server per round on the small table besides the round's own, for a steadier
 * median time to the first 200 (the rounds alone give five a table).
 */
const STARTS_PER_ROUND = 2;
const scenarios = selectScenarios(settings.scenarios);
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
const runs: ScenarioRun[] = [];
const lives: ServerLife[] = [];

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const label = (count: number) => (count >= 1_000_000 ? `${count / 1_000_000}M` : `${count / 1000}k`);

function recordLife(table: string, server: RunningServer): void {
  lives.push({ table, server: server.kind, startupMs: server.startupMs, peakRssMb: server.memory().peakRssMb });
}

/** Both servers must give every scenario the same status and body shape, or nothing is measured. */
async function verifyEquivalence(prepared: PreparedTable, chosen: Scenario[]): Promise<void> {
  const answers = new Map<ServerKind, string[]>();
  for (const kind of SERVER_KINDS) {
    answers.set(
      kind,
      await withServer(kind, prepared, dir, async (server) => {
        const shapes: string[] = [];
        for (const scenario of chosen) shapes.push(await probe(server.origin, scenario, prepared.context));
        return shapes;
      }),
    );
  }
  const mismatches = chosen.flatMap((scenario, index) => {
    const [project, baseline] = SERVER_KINDS.map((kind) => answers.get(kind)?.[index]);
    return project === baseline ? [] : [`${scenario.name}:\n  project  ${project}\n  baseline ${baseline}`];
  });
  if (mismatches.length > 0)
    throw new Error(`The servers answer differently, so they cannot be compared:\n${mismatches.join('\n')}`);
}

/**
 * Every round gets fresh server lives (a database copy each, start), both servers running at once.
 * Each is warmed up with the table's reads mixed (`warmupMix`: the same whichever scenarios are
 * chosen), then every chosen read is measured on both, loaded in turn a second at a time, so they
 * see the same background load; the ratio is taken within each round (report.ts). A scenario that
 * writes gets a warm-up of its own and comes after the reads, so they see the table as seeded.
 * `extraStarts` more starts of each server per round feed the start-up median.
 */
async function benchTable(
  count: number,
  chosen: Scenario[],
  warmupMix: Scenario[],
  extraStarts: number,
): Promise<PreparedTable> {
  const table = label(count);
  log(`seeding ${count.toLocaleString('en-US')} pets`);
  const prepared = await prepareTable(dir, count);
  await verifyEquivalence(prepared, chosen);
  log(`${table}: both servers answer ${chosen.length} scenarios alike (status and body shape)`);
  for (const kind of SERVER_KINDS) mkdirSync(join(dir, kind), { recursive: true });
  const ordered = [...chosen.filter((scenario) => !scenario.writes), ...chosen.filter((scenario) => scenario.writes)];
  for (let round = 1; round <= settings.rounds; round += 1) {
    log(
      `${table} round ${round}/${settings.rounds}: ${settings.warmupSeconds} s of warm-up, ` +
        `then ${chosen.length} scenarios x ${settings.seconds} s, on each of 2 servers in turn`,
    );
    // Alternate which server goes first, so a slow drift of the machine favours neither.
    const [first, second] = round % 2 === 1 ? SERVER_KINDS : [...SERVER_KINDS].reverse();
    if (first === undefined || second === undefined) throw new Error('two servers are compared');
    await withServer(first, prepared, join(dir, first), (one) =>
      withServer(second, prepared, join(dir, second), async (other) => {
        const servers = [one, other];
        const readsWarmup = await warmUpInTurns(servers, warmupMix, prepared.context, settings);
        for (const scenario of ordered) {
          const warmups = scenario.writes
            ? await warmUpInTurns(servers, [scenario], prepared.context, settings)
            : readsWarmup;
          const results = await measureInTurns(servers, scenario, prepared.context, settings, warmups);
          for (const [index, server] of servers.entries()) {
            const result = results[index];
            if (result !== undefined)
              runs.push({ ...result, table, round, server: server.kind, scenario: scenario.name });
          }
        }
        for (const server of servers) recordLife(table, server);
      }),
    );
    for (let start = 0; start < extraStarts; start += 1) {
      for (const kind of [first, second]) {
        await withServer(kind, prepared, join(dir, kind), async (server) => recordLife(`${table} start`, server));
      }
    }
  }
  return prepared;
}

/**
 * RSS of the project server after warm-up, then after `soakSeconds` more of mixed load. SQLite's
 * page cache (16 MiB a connection, better-sqlite3's default) and V8's heap grow until they reach
 * their working size: on a table larger than the cache, which the warm-up's random reads fill,
 * and after a minute of load, by when V8 has sized its heap (BENCHMARKS.md), what grows is a leak.
 */
async function soak(prepared: PreparedTable, table: string, seconds: number): Promise<Soak> {
  const warmup = Math.max(settings.warmupSeconds, Math.min(60, seconds));
  log(`soak: project on the ${table} table, mixed load for ${warmup} + ${seconds} s`);
  return withServer('project', prepared, dir, async (server) => {
    await mixedLoad(server, scenarios, prepared.context, warmup, settings.connections);
    const afterWarmupMb = server.memory().rssMb;
    const samplesMb: number[] = [];
    const sampler = setInterval(() => samplesMb.push(server.memory().rssMb), 1000);
    await mixedLoad(server, scenarios, prepared.context, seconds, settings.connections);
    clearInterval(sampler);
    const afterSoakMb = server.memory().rssMb;
    recordLife(`${table} soak`, server);
    return { table, warmupSeconds: warmup, seconds, afterWarmupMb, afterSoakMb, samplesMb };
  });
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  log(`settings ${JSON.stringify(settings)}; working in ${dir}`);
  const reads = SCENARIOS.filter((scenario) => !scenario.writes);
  let largest = await benchTable(SMALL_TABLE, scenarios, reads, STARTS_PER_ROUND);
  let largestLabel = label(SMALL_TABLE);
  const atScale = scenarios.filter((scenario) => scenario.atScale);
  if (settings.scale && atScale.length > 0) {
    rmSync(largest.seeded.file);
    const readsAtScale = reads.filter((scenario) => scenario.atScale);
    largest = await benchTable(LARGE_TABLE, atScale, readsAtScale, 0);
    largestLabel = label(LARGE_TABLE);
  }
  const soaked = settings.soakSeconds > 0 ? await soak(largest, largestLabel, settings.soakSeconds) : undefined;

  const summary = summarise(runs);
  const targets = checkTargets(summary, lives, soaked);
  const results: BenchResults = {
    settings,
    machine: machine(),
    startedAt,
    runs,
    lives,
    soak: soaked,
    summary,
    targets,
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, 'latest.json');
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`\n${formatReport(summary, lives, soaked, targets)}\n\nWritten to ${file}\n`);
}

try {
  await main();
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
