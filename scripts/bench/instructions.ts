/**
 * `node dist/scripts/bench/instructions.js [scenario]`: machine instructions per response, counted
 * by valgrind's callgrind (`apt-get install -y valgrind`). A count, not a time: it does not move with
 * the machine's other tenants, so differences of 1% that timing cannot resolve show, by function.
 * Compares the project with INSTRUCTIONS_AGAINST: `baseline` (the hand-written server, the default),
 * `no-metrics` (the project with METRICS_PORT=off) or `get-one` (the project serving get-one: a
 * refusal's ratio to a served getPet). Each server runs under callgrind, counting off through
 * INSTRUCTIONS_WARMUP seconds of the scenario (default get-one; 60 s), then on over
 * INSTRUCTIONS_WINDOW seconds (20), on a 10,000-pet table in SQLite, or in PostgreSQL with
 * INSTRUCTIONS_BACKEND=postgres (the database runs natively, only Node under valgrind). Prints the
 * main thread's instructions per response (V8's compiler and GC threads left out) and the 25
 * functions whose counts differ most, JavaScript named through `node --perf-basic-prof`. Under
 * valgrind a server runs ~50x slower and its JIT settles differently: compare functions first.
 *
 * Besides the table's scenarios, REFUSALS: the project set to refuse a scenario's requests (429,
 * shed 503), counted against get-one by default.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { callgrindPid, parsePerfMap, selfInstructions } from './callgrind.js';
import { applyLoad } from './load.js';
import { postgresBackend } from './postgres.js';
import { loadRequest, type PreparedTable, prepareTable, type Scenario, selectScenarios } from './scenarios.js';
import { BASELINE, NO_METRICS, PROJECT, type ServerSpec, withServer } from './servers.js';
import { wholeSetting } from './settings.js';
import { sqliteBackend } from './table.js';

const warmupSeconds = wholeSetting('INSTRUCTIONS_WARMUP', 60);
const windowSeconds = Math.max(1, wholeSetting('INSTRUCTIONS_WINDOW', 20));
const SHOWN = 25;
const PETS = 10_000;
const CONNECTIONS = 10;
/**
 * Under valgrind the event loop runs ~50x slower: overload protection would shed what is counted,
 * and a PostgreSQL query could outlast the 3 s timeout while its answer waits to be read.
 */
const UNDER_VALGRIND = { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', DATABASE_TIMEOUT_MS: '60000' };

/** What one server is counted doing: the requests of `scenario`, answered with `status`. */
interface Subject {
  name: string;
  spec: ServerSpec;
  scenario: Scenario;
  status: number;
  /**
   * The other answers allowed, as the scenario's own: a limit's first request of each window
   * (`first-of-window`, at most one a minute begun), or any number (`any`: shedding under valgrind
   * sheds most requests, not all).
   */
  letThrough?: 'first-of-window' | 'any';
}

const scenarioNamed = (name: string) => selectScenarios([name])[0] as Scenario;
const served = (spec: ServerSpec, scenario: Scenario): Subject => ({
  name: spec.name,
  spec,
  scenario,
  status: scenario.expect.status,
});

/** Refusals the table's scenarios never see: the project set to refuse a scenario's requests. */
const REFUSALS: Record<string, Subject> = {
  'per-key-429': {
    name: 'per-key 429',
    spec: { ...PROJECT, env: { RATE_LIMIT_PER_MINUTE: '1' } },
    // GET /v1/pets, as no-key-401 and failed-auth-429 send it: getPet is deprecated, and its
    // Deprecation, Sunset and Link headers would make its refusals cost more.
    scenario: scenarioNamed('list-20'),
    status: 429,
    letThrough: 'first-of-window',
  },
  'failed-auth-429': {
    name: 'failed-auth 429',
    spec: { ...PROJECT, env: { AUTH_FAILURES_PER_MINUTE: '1' } },
    scenario: scenarioNamed('no-key-401'),
    status: 429,
    letThrough: 'first-of-window',
  },
  // The smallest budget: a request read over 1 ms into a turn that follows another as long is shed.
  'shed-503': {
    name: 'shed 503',
    spec: { ...PROJECT, env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '1', OVERLOAD_SAMPLE_INTERVAL_MS: '1' } },
    scenario: scenarioNamed('get-one'),
    status: 503,
    letThrough: 'any',
  },
};

const asked = process.argv[2] ?? 'get-one';
const refusal = REFUSALS[asked];
const names = [...selectScenarios(undefined).map((scenario) => scenario.name), ...Object.keys(REFUSALS)];
if (!names.includes(asked)) throw new Error(`No scenario ${asked}; known: ${names.join(', ')}`);
const subject = refusal ?? served(PROJECT, scenarioNamed(asked));
const AGAINST: Record<string, Subject> = {
  baseline: served(BASELINE, subject.scenario),
  'no-metrics': {
    ...subject,
    name: NO_METRICS.name,
    spec: { ...NO_METRICS, env: { ...subject.spec.env, ...NO_METRICS.env } },
  },
  'get-one': { ...served(PROJECT, scenarioNamed('get-one')), name: 'get-one' },
};
const against = AGAINST[process.env.INSTRUCTIONS_AGAINST ?? (refusal === undefined ? 'baseline' : 'get-one')];
if (against === undefined) throw new Error(`INSTRUCTIONS_AGAINST: one of ${Object.keys(AGAINST).join(', ')}`);
if (refusal !== undefined && against.spec.kind === 'baseline') throw new Error(`the baseline cannot ${asked}`);
if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('needs valgrind: apt-get install -y valgrind');

/**
 * Tells callgrind in a server to start counting (`-i on`) or to write what it counted (`-d`). vgdb
 * finds the process by a pipe named after $HOST, which the server was started with as 127.0.0.1.
 */
function callgrindControl(pid: number, ...command: string[]): void {
  const env = { ...process.env, HOST: '127.0.0.1' };
  const result = spawnSync('callgrind_control', [...command, String(pid)], { env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`callgrind_control ${command.join(' ')} failed: ${result.stderr}`);
}

interface Count {
  responses: number;
  /** Of them, answered otherwise than the subject's status (let through). */
  letThrough: number;
  /** Requests that failed (timed out): their work is in the count, spread over the responses. */
  errors: number;
  byFunction: Map<string, number>;
}

const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'));

/** Throws unless the window's answers are the subject's, but for what it may let through. */
function checkAnswers({ name, status, scenario, letThrough }: Subject, statuses: Record<string, number>): number {
  const others = Object.entries(statuses).filter(([answer]) => answer !== String(status));
  const through = others.reduce((sum, [, n]) => sum + n, 0);
  const allowed =
    letThrough === 'any' ? Infinity : letThrough === 'first-of-window' ? 1 + Math.ceil(windowSeconds / 60) : 0;
  const wrong = others.some(([answer]) => answer !== String(scenario.expect.status));
  if (wrong || through > allowed || statuses[String(status)] === undefined)
    throw new Error(
      `${name}: expected ${status}${letThrough ? ` and ${letThrough} ${scenario.expect.status}` : ''}: ${JSON.stringify(statuses)}`,
    );
  return through;
}

async function count(subject: Subject, prepared: PreparedTable): Promise<Count> {
  const serverDir = join(dir, subject.name.replace(/\W/g, '-'));
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
  ];
  const requests = [loadRequest(subject.scenario, prepared.context)];
  const { spec } = subject;
  const counted = await withServer(
    { ...spec, env: { ...UNDER_VALGRIND, ...spec.env } },
    prepared.seeded,
    serverDir,
    async ({ origin, pid }) => {
      await applyLoad({ origin, requests, seconds: warmupSeconds, connections: CONNECTIONS });
      callgrindControl(pid, '-i', 'on');
      const window = await applyLoad({ origin, requests, seconds: windowSeconds, connections: CONNECTIONS });
      callgrindControl(pid, '-d');
      // A few time out (autocannon's 10 s) when the machine is loaded: reported, and over 1% an error.
      if (window.errors > window.responses / 100)
        throw new Error(`${subject.name}: ${window.errors} requests failed of ${window.responses}`);
      const { responses, errors } = window;
      return { responses, errors, letThrough: checkAnswers(subject, window.statuses), pid };
    },
    { launcher, nodeFlags: ['--perf-basic-prof'], startupLimitMs: 180_000 },
  );
  const { pid } = counted;
  // The first dump of the main thread (thread 1) is <file>.1-01.
  const text = readFileSync(`${output}.1-01`, 'utf8');
  if (callgrindPid(text) !== pid) throw new Error(`${output}.1-01 is not from the server's process ${pid}`);
  const perfMap = `/tmp/perf-${pid}.map`;
  const jit = parsePerfMap(readFileSync(perfMap, 'utf8'));
  rmSync(perfMap, { force: true });
  return { ...counted, byFunction: selfInstructions(text, jit) };
}

const perResponse = (counted: Count, name: string) => (counted.byFunction.get(name) ?? 0) / counted.responses;
const total = (counted: Count) => [...counted.byFunction.values()].reduce((sum, n) => sum + n, 0) / counted.responses;
const number = (value: number) => Math.round(value).toLocaleString('en-US').padStart(9);

/**
 * A refusal's own cost when some requests were let through (served or, once a window, not yet
 * limited): each of those taken to cost what a response of `against` did, exact when it is the
 * same answer (a shed run's 200s against get-one) and, for a limit's one first answer, a rounding.
 */
function perRefusal(mine: Count, theirs: Count): number {
  const all = total(mine) * mine.responses;
  return (all - mine.letThrough * total(theirs)) / (mine.responses - mine.letThrough);
}

const postgres = process.env.INSTRUCTIONS_BACKEND === 'postgres';
const backend = postgres ? await postgresBackend(undefined, () => undefined) : sqliteBackend;
try {
  const prepared = await prepareTable(backend, dir, PETS);
  const mine = await count(subject, prepared);
  const theirs = await count(against, prepared);
  const functions = new Set([...mine.byFunction.keys(), ...theirs.byFunction.keys()]);
  const differences = [...functions]
    .map((name) => ({ name, a: perResponse(mine, name), b: perResponse(theirs, name) }))
    .sort((x, y) => Math.abs(y.a - y.b) - Math.abs(x.a - x.b))
    .slice(0, SHOWN)
    .map(({ name, a, b }) => `  ${number(a)} ${number(b)} ${number(a - b)}  ${name.slice(0, 110)}`);
  const [a, b] = [subject.name.slice(0, 9), against.name.slice(0, 9)];
  const lines = [
    `${asked} on ${PETS} pets (${postgres ? 'PostgreSQL' : 'SQLite'}): main-thread instructions per response over ${windowSeconds} s, after ${warmupSeconds} s of warm-up`,
    `  ${a.padStart(9)} ${b.padStart(9)}`,
    `  ${number(total(mine))} ${number(total(theirs))}  total (${(total(mine) / total(theirs)).toFixed(3)}x; ${mine.responses} and ${theirs.responses} responses, ${mine.errors} and ${theirs.errors} failed)`,
    ...(mine.letThrough === 0
      ? []
      : [
          `  ${number(perRefusal(mine, theirs))} per ${subject.status} (${(perRefusal(mine, theirs) / total(theirs)).toFixed(3)}x), ${mine.letThrough} of ${mine.responses} let through taken at ${b}'s count`,
        ]),
    `functions that differ most (${a}, ${b}, difference):`,
    ...differences,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await backend.close();
  rmSync(dir, { recursive: true, force: true });
}
