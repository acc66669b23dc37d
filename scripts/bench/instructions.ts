/**
 * `node dist/scripts/bench/instructions.js [scenario]`: machine instructions per response, counted
 * by valgrind's callgrind (`apt-get install -y valgrind`). A count, not a time: it does not move with
 * the machine's other tenants, so differences of 1% that the benchmark's rounds cannot resolve show,
 * and show by function. Compares the project with INSTRUCTIONS_AGAINST: `baseline` (the hand-written
 * server, the default) or `no-metrics` (the project with METRICS_PORT=off: what metrics cost).
 * Each server runs under callgrind with counting off through INSTRUCTIONS_WARMUP seconds of the
 * scenario (default get-one; 60 s), then counts over INSTRUCTIONS_WINDOW seconds more (20), on a
 * table of INSTRUCTIONS_PETS pets (10,000), and prints the main thread's instructions per response
 * (V8's compiler and GC threads are left out) and the INSTRUCTIONS_TOP functions (25) whose count
 * differs most, JavaScript named through `node --perf-basic-prof`. Under valgrind a server runs
 * about 50 times slower; its JIT settles at other moments than at full speed, so compare the named
 * functions before the total.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { callgrindPid, parsePerfMap, selfInstructions } from './callgrind.js';
import { closeConnections } from './http.js';
import { applyLoad } from './load.js';
import { type PreparedTable, prepareTable, withServer } from './measure.js';
import { loadRequest, selectScenarios } from './scenarios.js';
import { BASELINE, PROJECT, type ServerSpec } from './server-process.js';
import { SMALL_TABLE, wholeSetting } from './settings.js';
import { sqliteBackend } from './table.js';

const warmupSeconds = wholeSetting('INSTRUCTIONS_WARMUP', 60, 1);
const windowSeconds = wholeSetting('INSTRUCTIONS_WINDOW', 20, 1);
const shown = wholeSetting('INSTRUCTIONS_TOP', 25, 1);
const pets = wholeSetting('INSTRUCTIONS_PETS', SMALL_TABLE, 1);
const CONNECTIONS = 10;
/**
 * Under valgrind the event loop runs about 50 times slower, so overload protection would shed the
 * load it is counting: it is off (OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0) in every server counted.
 */
const UNDER_VALGRIND = { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' };
const AGAINST: Record<string, ServerSpec> = {
  baseline: BASELINE,
  'no-metrics': { name: 'no metrics', kind: 'project', env: { METRICS_PORT: 'off' } },
};
const against = AGAINST[process.env.INSTRUCTIONS_AGAINST ?? 'baseline'];
if (against === undefined) throw new Error(`INSTRUCTIONS_AGAINST: one of ${Object.keys(AGAINST).join(', ')}`);
const [chosen] = selectScenarios([process.argv[2] ?? 'get-one']);
if (chosen === undefined) throw new Error('no scenario');
const scenario = chosen;
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
  byFunction: Map<string, number>;
}

const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'));

async function count(spec: ServerSpec, prepared: PreparedTable): Promise<Count> {
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
  const load = (origin: string, seconds: number) => applyLoad({ origin, requests, seconds, connections: CONNECTIONS });
  const { responses, pid } = await withServer(
    { ...spec, env: { ...spec.env, ...UNDER_VALGRIND } },
    prepared,
    serverDir,
    async (server) => {
      await load(server.origin, warmupSeconds);
      callgrindControl(server.pid, '-i', 'on');
      const window = await load(server.origin, windowSeconds);
      callgrindControl(server.pid, '-d');
      const expected = window.statuses[String(scenario.expect.status)] ?? 0;
      if (expected !== window.responses || window.errors > 0)
        throw new Error(
          `${spec.name}: not every response was ${scenario.expect.status}: ${JSON.stringify(window.statuses)}`,
        );
      return { responses: window.responses, pid: server.pid };
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

try {
  const prepared = await prepareTable(sqliteBackend, dir, pets);
  const mine = await count(PROJECT, prepared);
  const theirs = await count(against, prepared);
  const names = new Set([...mine.byFunction.keys(), ...theirs.byFunction.keys()]);
  const differences = [...names]
    .map((name) => ({ name, a: perResponse(mine, name), b: perResponse(theirs, name) }))
    .sort((x, y) => Math.abs(y.a - y.b) - Math.abs(x.a - x.b))
    .slice(0, shown)
    .map(({ name, a, b }) => `  ${number(a)} ${number(b)} ${number(a - b)}  ${name.slice(0, 110)}`);
  const lines = [
    `${scenario.name} on ${pets} pets: main-thread instructions per response over ${windowSeconds} s, after ${warmupSeconds} s of warm-up`,
    `  ${PROJECT.name.padStart(9)} ${against.name.padStart(9)}`,
    `  ${number(total(mine))} ${number(total(theirs))}  total (${(total(mine) / total(theirs)).toFixed(3)}x; ${mine.responses} and ${theirs.responses} responses)`,
    `functions that differ most (${PROJECT.name}, ${against.name}, difference):`,
    ...differences,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
