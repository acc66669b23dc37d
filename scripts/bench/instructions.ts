/**
 * `node dist/scripts/bench/instructions.js [scenario]`: main-thread instructions per response of the
 * project and of INSTRUCTIONS_AGAINST, each under valgrind's callgrind, and the functions whose counts
 * differ most (docs/performance.md). A count, not a time: it does not move with the
 * machine's other tenants. JavaScript is named through `node --perf-basic-prof`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePerfMap, selfInstructions } from './callgrind.js';
import { applyLoad } from './load.js';
import { expectedResponses, loadRequests, SCENARIOS, type Scenario, scenarioNamed } from './scenarios.js';
import { BASELINE, NO_METRICS, PROJECT, type ServerSpec, withServer } from './servers.js';
import { wholeSetting } from './settings.js';
import { sqliteBackend, type Table } from './tables.js';

/**
 * Uncounted responses before counting. V8 optimises a function after enough calls, not after a
 * time, and under valgrind a server answers 10 to 100+ a second as the machine is loaded: 60 s of
 * warm-up left updatePet unoptimised at 10 a second (1.231x the baseline; 0.963x once warm).
 */
const warmupResponses = wholeSetting('INSTRUCTIONS_WARMUP', 3000);
/** Each warm-up load's length: the warm-up ends after the first that brings the total past the count. */
const WARMUP_STEP_SECONDS = 15;
const windowSeconds = Math.max(1, wholeSetting('INSTRUCTIONS_WINDOW', 20));
const SHOWN = 25;
const CONNECTIONS = 10;
/** Under valgrind the event loop runs ~50x slower: overload protection would shed what is counted. */
const UNDER_VALGRIND = { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' };

/**
 * What one server is counted doing: the requests of `scenario`, answered with `status`. When that
 * is a refusal, answers as the scenario's own are let through (a limit's first request of each
 * minute, the requests a shed run serves) and accounted for.
 */
interface Subject {
  name: string;
  spec: ServerSpec;
  /** On top of the spec's own. */
  env: Record<string, string>;
  scenario: Scenario;
  status: number;
}

function subjectOf(name: string, spec: ServerSpec, scenario: string, status?: number, env = {}): Subject {
  const found = scenarioNamed(scenario);
  return { name, spec, env, scenario: found, status: status ?? found.expect.status };
}

/**
 * The smallest budget: a request read over 1 ms into a turn that follows another as long is shed,
 * with no burst allowance first.
 */
const SHED_ALL = {
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '1',
  OVERLOAD_SAMPLE_INTERVAL_MS: '1',
  OVERLOAD_BURST_CPU_MS: '0',
};
/**
 * Refusals the table's scenarios never see: the project set to refuse a scenario's requests. The
 * 429s on GET /v1/pets, as no-key-401: getPet's deprecation headers cost any answer of it more.
 */
const REFUSALS: Record<string, Subject> = {
  'per-key-429': subjectOf('per-key-429', PROJECT, 'list-20', 429, { RATE_LIMIT_PER_MINUTE: '1' }),
  'failed-auth-429': subjectOf('failed-auth-429', PROJECT, 'no-key-401', 429, { AUTH_FAILURES_PER_MINUTE: '1' }),
  'shed-503': subjectOf('shed-503', PROJECT, 'get-one', 503, SHED_ALL),
};

const asked = process.argv[2] ?? 'get-one';
const names = [...SCENARIOS.map((scenario) => scenario.name), ...Object.keys(REFUSALS)];
if (!names.includes(asked)) throw new Error(`No scenario ${asked}; known: ${names.join(', ')}`);
const refusal = REFUSALS[asked];
const subject = refusal ?? subjectOf(PROJECT.name, PROJECT, asked);
const AGAINST: Record<string, Subject> = {
  baseline: subjectOf(BASELINE.name, BASELINE, subject.scenario.name),
  'no-metrics': { ...subject, name: NO_METRICS.name, spec: NO_METRICS },
  'get-one': subjectOf('get-one', PROJECT, 'get-one'),
  'no-key-401': subjectOf('no-key-401', PROJECT, 'no-key-401'),
};
const against = AGAINST[process.env.INSTRUCTIONS_AGAINST ?? (refusal === undefined ? 'baseline' : 'get-one')];
if (against === undefined) throw new Error(`INSTRUCTIONS_AGAINST: one of ${Object.keys(AGAINST).join(', ')}`);
if (refusal !== undefined && against.spec === BASELINE) throw new Error(`the baseline cannot ${asked}`);
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
  /** Of them, answered as the scenario's own rather than with the subject's refusal. */
  letThrough: number;
  byFunction: Map<string, number>;
}

const answered = (statuses: Record<string, number>) => Object.values(statuses).reduce((sum, n) => sum + n, 0);

const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'));

async function count({ name, spec, env, scenario, status }: Subject, table: Table): Promise<Count> {
  const serverDir = join(dir, name.replace(/\W/g, '-'));
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
  const requests = loadRequests(scenario, table);
  const counted = await withServer(
    { ...spec, env: { ...UNDER_VALGRIND, ...env, ...spec.env } },
    table,
    serverDir,
    async ({ origin, pid }) => {
      const load = (seconds: number) => applyLoad({ origin, requests, seconds, connections: CONNECTIONS });
      for (let warmed = 0; warmed < warmupResponses;) {
        const { statuses } = await load(WARMUP_STEP_SECONDS);
        warmed += answered(statuses);
      }
      callgrindControl(pid, '-i', 'on');
      const { statuses, errors } = await load(windowSeconds);
      callgrindControl(pid, '-d');
      const own = expectedResponses(scenario, statuses);
      const refusing = status !== scenario.expect.status;
      const [refused, letThrough] = refusing ? [statuses[String(status)] ?? 0, own] : [own, 0];
      const responses = answered(statuses);
      // A few time out (autocannon's 10 s) when the machine is loaded: their work is spread over the rest.
      if (refused === 0 || refused + letThrough !== responses || errors > responses / 100)
        throw new Error(`${name}: expected ${status}, got ${JSON.stringify(statuses)} and ${errors} failed`);
      return { responses, letThrough, pid };
    },
    { launcher, nodeFlags: ['--perf-basic-prof'], startupLimitMs: 180_000 },
  );
  const perfMap = `/tmp/perf-${counted.pid}.map`;
  const jit = parsePerfMap(readFileSync(perfMap, 'utf8'));
  rmSync(perfMap, { force: true });
  // The first dump of the main thread (thread 1).
  return { ...counted, byFunction: selfInstructions(readFileSync(`${output}.1-01`, 'utf8'), jit) };
}

const perResponse = (counted: Count, fn: string) => (counted.byFunction.get(fn) ?? 0) / counted.responses;
const total = (counted: Count) => [...counted.byFunction.values()].reduce((sum, n) => sum + n, 0) / counted.responses;
const number = (value: number) => Math.round(value).toLocaleString('en-US').padStart(9);

/**
 * A refusal's own cost when some requests were let through: each of those taken to cost what a
 * response of `against` did, exact when it is the same answer (a shed run's 200s against get-one)
 * and, for a limit's one first answer a minute, a rounding.
 */
function perRefusal(mine: Count, theirs: Count): number {
  return (total(mine) * mine.responses - mine.letThrough * total(theirs)) / (mine.responses - mine.letThrough);
}

try {
  const table = await sqliteBackend.seed(dir, 10_000);
  const mine = await count(subject, table);
  const theirs = await count(against, table);
  const functions = [...new Set([...mine.byFunction.keys(), ...theirs.byFunction.keys()])];
  const differences = functions
    .map((fn) => ({ fn, a: perResponse(mine, fn), b: perResponse(theirs, fn) }))
    .sort((x, y) => Math.abs(y.a - y.b) - Math.abs(x.a - x.b))
    .slice(0, SHOWN)
    .map(({ fn, a, b }) => `  ${number(a)} ${number(b)} ${number(a - b)}  ${fn.slice(0, 110)}`);
  const ratio = (value: number) => `${number(value).trim()} (${(value / total(theirs)).toFixed(3)}x)`;
  const lines = [
    `${asked} on ${table.pets} pets, ${warmupResponses} responses of warm-up: main-thread instructions per response over ${windowSeconds} s`,
    `  ${subject.name} ${ratio(total(mine))} vs ${against.name} ${number(total(theirs)).trim()}`,
    `  over ${mine.responses} and ${theirs.responses} responses`,
    ...(mine.letThrough === 0
      ? []
      : [
          `  per ${subject.status} ${ratio(perRefusal(mine, theirs))}: ${mine.letThrough} let through at ${against.name}'s count`,
        ]),
    `functions that differ most (${subject.name}, ${against.name}, difference):`,
    ...differences,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
