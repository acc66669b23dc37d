/**
 * `node dist/scripts/bench/instructions.js [scenario]`: machine instructions per response, counted
 * by valgrind's callgrind (`apt-get install -y valgrind`). A count, not a time: it does not move with
 * the machine's other tenants, so differences of 1% that timing cannot resolve show, by function.
 * Compares the project with INSTRUCTIONS_AGAINST: `baseline` (the hand-written server, the default)
 * or `no-metrics` (the project with METRICS_PORT=off). Each server runs under callgrind, counting
 * off through INSTRUCTIONS_WARMUP seconds of the scenario (default get-one; 60 s), then on over
 * INSTRUCTIONS_WINDOW seconds (20), on a 10,000-pet table in SQLite, or in PostgreSQL with
 * INSTRUCTIONS_BACKEND=postgres (the database runs natively, only Node under valgrind). Prints the
 * main thread's instructions per response (V8's compiler and GC threads left out) and the 25
 * functions whose counts differ most, JavaScript named through `node --perf-basic-prof`. Under
 * valgrind a server runs ~50x slower and its JIT settles differently: compare functions first.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { callgrindPid, parsePerfMap, selfInstructions } from './callgrind.js';
import { applyLoad } from './load.js';
import { postgresBackend } from './postgres.js';
import { loadRequest, type PreparedTable, prepareTable, selectScenarios } from './scenarios.js';
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
const AGAINST: Record<string, ServerSpec> = { baseline: BASELINE, 'no-metrics': NO_METRICS };
const against = AGAINST[process.env.INSTRUCTIONS_AGAINST ?? 'baseline'];
if (against === undefined) throw new Error(`INSTRUCTIONS_AGAINST: one of ${Object.keys(AGAINST).join(', ')}`);
const [chosen] = selectScenarios([process.argv[2] ?? 'get-one']);
if (chosen === undefined) throw new Error('no scenario');
const scenario = chosen;
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
  byFunction: Map<string, number>;
}

const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'));

async function count(spec: ServerSpec, prepared: PreparedTable, expected: number): Promise<Count> {
  const serverDir = join(dir, spec.name.replace(/\W/g, '-'));
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
  const requests = [loadRequest(scenario, prepared.context)];
  const { responses, pid } = await withServer(
    { ...spec, env: { ...spec.env, ...UNDER_VALGRIND } },
    prepared.seeded,
    serverDir,
    async ({ origin, pid }) => {
      await applyLoad({ origin, requests, seconds: warmupSeconds, connections: CONNECTIONS });
      callgrindControl(pid, '-i', 'on');
      const window = await applyLoad({ origin, requests, seconds: windowSeconds, connections: CONNECTIONS });
      callgrindControl(pid, '-d');
      if (window.statuses[String(expected)] !== window.responses || window.errors > 0)
        throw new Error(`${spec.name}: not every response was ${expected}: ${JSON.stringify(window.statuses)}`);
      return { responses: window.responses, pid };
    },
    { launcher, nodeFlags: ['--perf-basic-prof'], startupLimitMs: 180_000 },
  );
  // The first dump of the main thread (thread 1) is <file>.1-01.
  const text = readFileSync(`${output}.1-01`, 'utf8');
  if (callgrindPid(text) !== pid) throw new Error(`${output}.1-01 is not from the server's process ${pid}`);
  const perfMap = `/tmp/perf-${pid}.map`;
  const jit = parsePerfMap(readFileSync(perfMap, 'utf8'));
  rmSync(perfMap, { force: true });
  return { responses, byFunction: selfInstructions(text, jit) };
}

const perResponse = (counted: Count, name: string) => (counted.byFunction.get(name) ?? 0) / counted.responses;
const total = (counted: Count) => [...counted.byFunction.values()].reduce((sum, n) => sum + n, 0) / counted.responses;
const number = (value: number) => Math.round(value).toLocaleString('en-US').padStart(9);

const postgres = process.env.INSTRUCTIONS_BACKEND === 'postgres';
const backend = postgres ? await postgresBackend(undefined, () => undefined) : sqliteBackend;
try {
  const prepared = await prepareTable(backend, dir, PETS);
  const mine = await count(PROJECT, prepared, scenario.expect.status);
  const theirs = await count(against, prepared, scenario.expect.status);
  const names = new Set([...mine.byFunction.keys(), ...theirs.byFunction.keys()]);
  const differences = [...names]
    .map((name) => ({ name, a: perResponse(mine, name), b: perResponse(theirs, name) }))
    .sort((x, y) => Math.abs(y.a - y.b) - Math.abs(x.a - x.b))
    .slice(0, SHOWN)
    .map(({ name, a, b }) => `  ${number(a)} ${number(b)} ${number(a - b)}  ${name.slice(0, 110)}`);
  const lines = [
    `${scenario.name} on ${PETS} pets (${postgres ? 'PostgreSQL' : 'SQLite'}): main-thread instructions per response over ${windowSeconds} s, after ${warmupSeconds} s of warm-up`,
    `  ${PROJECT.name.padStart(9)} ${against.name.padStart(9)}`,
    `  ${number(total(mine))} ${number(total(theirs))}  total (${(total(mine) / total(theirs)).toFixed(3)}x; ${mine.responses} and ${theirs.responses} responses)`,
    `functions that differ most (${PROJECT.name}, ${against.name}, difference):`,
    ...differences,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await backend.close();
  rmSync(dir, { recursive: true, force: true });
}
