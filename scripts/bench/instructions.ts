/**
 * `node dist/scripts/bench/instructions.js [scenario]`: machine instructions per response of each
 * server, counted by valgrind's callgrind (`apt-get install -y valgrind`). A count, not a time: it
 * does not move with the machine's other tenants, so differences of 1% that the benchmark's rounds
 * cannot resolve show, and show by function. Each server runs under callgrind with counting off
 * through INSTRUCTIONS_WARMUP seconds of the scenario (60), then counts over INSTRUCTIONS_WINDOW
 * seconds more (20), on a table of INSTRUCTIONS_PETS pets (10,000). Prints the main thread's
 * instructions per response (V8's compiler and GC helper threads are counted apart and left out)
 * and the functions whose count differs most between the servers (JavaScript named through
 * `node --perf-basic-prof`).
 *
 * Under valgrind a server runs about 50 times slower, and V8's background compilation and its inline
 * caches settle at other moments than at full speed: compare the named functions, and read the
 * `V8 runtime` line before the total (BENCHMARKS.md, "Instructions per response").
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { callgrindPid, eventByFunction, parsePerfMap, selfCosts } from './callgrind.js';
import { closeConnections } from './http.js';
import { applyLoad } from './load.js';
import { type PreparedTable, prepareTable, withServer } from './measure.js';
import { loadRequest, type Scenario, selectScenarios } from './scenarios.js';
import type { ServerKind } from './server-process.js';
import { SMALL_TABLE, wholeSetting } from './settings.js';

const warmupSeconds = wholeSetting('INSTRUCTIONS_WARMUP', 60, 1);
const windowSeconds = wholeSetting('INSTRUCTIONS_WINDOW', 20, 1);
const shown = wholeSetting('INSTRUCTIONS_TOP', 25, 1);
const pets = wholeSetting('INSTRUCTIONS_PETS', SMALL_TABLE, 1);
/**
 * What else callgrind simulates and counts: `cache` (last-level cache misses, instruction and data),
 * `branch` (mispredicted conditional and indirect branches), or both (`cache,branch`). Costs in time
 * that the same number of instructions can hide; each slows the count several times over.
 */
const SIMULATIONS = {
  cache: { option: '--cache-sim=yes', events: ['ILmr', 'DLmr', 'DLmw'], what: 'last-level cache misses' },
  branch: { option: '--branch-sim=yes', events: ['Bcm', 'Bim'], what: 'mispredicted branches' },
} as const;
type Simulation = keyof typeof SIMULATIONS;
const simulated = (process.env.INSTRUCTIONS_SIMULATE ?? '')
  .split(',')
  .filter((name) => name !== '')
  .map((name) => {
    if (!Object.hasOwn(SIMULATIONS, name)) throw new Error(`INSTRUCTIONS_SIMULATE: unknown ${name}`);
    return name as Simulation;
  });
const CONNECTIONS = 10;
/**
 * V8 adding properties in its runtime instead of in optimised code: where Node's own
 * `process.nextTick` can be left for a process's life (BENCHMARKS.md, "Instructions per response").
 */
const V8_RUNTIME =
  /Runtime_DefineKeyedOwnPropertyInLiteral|JSObject::MigrateToMap|TransitionToDataProperty|TransitionAndWriteDataProperty|FeedbackNexus::|UpdateDescriptorForValue|Object::AddDataProperty|DefineOwnPropertyIgnoreAttributes/;

const [chosen] = selectScenarios([process.argv[2] ?? 'get-one']);
if (chosen === undefined) throw new Error('no scenario');
const scenario: Scenario = chosen;
if (spawnSync('valgrind', ['--version']).status !== 0) {
  throw new Error('instructions.js needs valgrind: apt-get install -y valgrind');
}

/**
 * Tells callgrind in a server to start counting (`-i on`) or to write what it counted (`-d`). vgdb
 * finds the process by a pipe named after $HOST, which startServer sets to 127.0.0.1 for the server.
 */
function callgrindControl(pid: number, ...command: string[]): void {
  const result = spawnSync('callgrind_control', [...command, String(pid)], {
    env: { ...process.env, HOST: '127.0.0.1' },
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`callgrind_control ${command.join(' ')} failed: ${result.stderr}`);
}

interface Count {
  responses: number;
  /** Instructions by function. */
  instructionsByFunction: Map<string, number>;
  /** Each simulated event group (INSTRUCTIONS_SIMULATE) by function. */
  simulatedByFunction: Map<Simulation, Map<string, number>>;
}

const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'));

async function count(kind: ServerKind, prepared: PreparedTable): Promise<Count> {
  const serverDir = join(dir, kind);
  mkdirSync(serverDir);
  const output = join(serverDir, 'callgrind.out');
  const launcher = [
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${output}`,
    // V8 writes and rewrites machine code; valgrind must notice.
    '--smc-check=all-non-file',
    // One output per thread: the main thread's is the request path; V8's compiler threads are not.
    '--separate-threads=yes',
    ...simulated.map((simulation) => SIMULATIONS[simulation].option),
  ];
  const requests = [loadRequest(scenario, prepared.context)];
  const { responses, pid } = await withServer(
    kind,
    prepared,
    serverDir,
    async (server) => {
      await applyLoad({ origin: server.origin, requests, seconds: warmupSeconds, connections: CONNECTIONS });
      callgrindControl(server.pid, '-i', 'on');
      const window = await applyLoad({
        origin: server.origin,
        requests,
        seconds: windowSeconds,
        connections: CONNECTIONS,
      });
      callgrindControl(server.pid, '-d');
      return { responses: window.responses, pid: server.pid };
    },
    { launcher, nodeFlags: ['--perf-basic-prof'], startupLimitMs: 180_000 },
  );
  // The first dump of the main thread (thread 1) is <file>.1-01; <file>-01 is what came after it.
  const mainThread = `${output}.1-01`;
  const text = readFileSync(mainThread, 'utf8');
  if (callgrindPid(text) !== pid) throw new Error(`${mainThread} is not from the server's process ${pid}`);
  const perfMap = `/tmp/perf-${pid}.map`;
  const jit = parsePerfMap(readFileSync(perfMap, 'utf8'));
  rmSync(perfMap, { force: true });
  const costs = selfCosts(text, jit);
  return {
    responses,
    instructionsByFunction: eventByFunction(costs, ['Ir']),
    simulatedByFunction: new Map(
      simulated.map((simulation) => [simulation, eventByFunction(costs, SIMULATIONS[simulation].events)]),
    ),
  };
}

type ByFunction = (counted: Count) => Map<string, number>;
const instructions: ByFunction = (counted) => counted.instructionsByFunction;
const simulation =
  (which: Simulation): ByFunction =>
  (counted) =>
    counted.simulatedByFunction.get(which) ?? new Map();
const perResponseOf = (counted: Count, of: ByFunction, name: string) =>
  (of(counted).get(name) ?? 0) / counted.responses;
const sum = (values: Iterable<number>) => [...values].reduce((total, n) => total + n, 0);
const total = (counted: Count, of: ByFunction = instructions) => sum(of(counted).values()) / counted.responses;
const runtime = (counted: Count) =>
  sum([...counted.instructionsByFunction].filter(([name]) => V8_RUNTIME.test(name)).map(([, n]) => n)) /
  counted.responses;
const number = (value: number) => Math.round(value).toLocaleString('en-US').padStart(9);

/** The functions whose count differs most between the servers: project, baseline, difference. */
function differences(project: Count, baseline: Count, of: ByFunction): string[] {
  const names = new Set([...of(project).keys(), ...of(baseline).keys()]);
  return [...names]
    .map((name) => ({ name, mine: perResponseOf(project, of, name), theirs: perResponseOf(baseline, of, name) }))
    .sort((a, b) => Math.abs(b.mine - b.theirs) - Math.abs(a.mine - a.theirs))
    .slice(0, shown)
    .map(
      ({ name, mine, theirs }) => `  ${number(mine)} ${number(theirs)} ${number(mine - theirs)}  ${name.slice(0, 110)}`,
    );
}

try {
  const prepared = await prepareTable(dir, pets);
  const project = await count('project', prepared);
  const baseline = await count('baseline', prepared);
  const ratio = (mine: number, theirs: number) => `${(mine / theirs).toFixed(3)}x`;
  const lines = [
    `${scenario.name} on ${pets} pets: main-thread instructions per response over ${windowSeconds} s, after ${warmupSeconds} s of warm-up`,
    `  ${'project'.padStart(9)} ${'baseline'.padStart(9)}`,
    `  ${number(total(project))} ${number(total(baseline))}  total (${ratio(total(project), total(baseline))}; ${project.responses} and ${baseline.responses} responses)`,
    `  ${number(runtime(project))} ${number(runtime(baseline))}  of which V8 runtime object-literal slow path`,
    `  ${number(total(project) - runtime(project))} ${number(total(baseline) - runtime(baseline))}  total without it (${ratio(total(project) - runtime(project), total(baseline) - runtime(baseline))})`,
    `functions that differ most (project, baseline, difference):`,
    ...differences(project, baseline, instructions),
  ];
  for (const which of simulated) {
    const { events, what } = SIMULATIONS[which];
    const of = simulation(which);
    lines.push(
      `${what} per response (${events.join(' + ')}):`,
      `  ${number(total(project, of))} ${number(total(baseline, of))}  total (${ratio(total(project, of), total(baseline, of))})`,
      `functions whose ${what} differ most (project, baseline, difference):`,
      ...differences(project, baseline, of),
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
