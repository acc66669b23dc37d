/**
 * `node dist/scripts/bench/costs.js [get-one] [create]`: what each feature costs a request, in
 * main-thread instructions per response counted by valgrind's callgrind once the server is warm (a
 * count, not a time: it does not move with the machine's other tenants). The project runs with
 * every feature on, then once per feature with that one turned off: by its setting where it has
 * one, by a request that asks for it (a webhook subscription), or else by
 * feature-off.ts. The bare reference (bare.ts) is counted too. Needs valgrind.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ALL_ON, OPERATION_FEATURES, REQUEST_FEATURES } from './features.js';
import { applyLoad } from './load.js';
import { count, median, textTable } from './report.js';
import { loadRequests, type Scenario, scenarioNamed } from './scenarios.js';
import { BARE, PROJECT, type ServerSpec, withServer } from './servers.js';
import { projectRoot, wholeSetting } from './settings.js';
import { sqliteBackend, type Table } from './tables.js';
import { Receiver, subscribe } from './webhooks.js';

/** V8 optimises a function after enough calls, not after a time: warm-up is counted in responses. */
const WARMUP_RESPONSES = wholeSetting('COSTS_WARMUP', 1000);
const WINDOW_SECONDS = wholeSetting('COSTS_WINDOW', 40);
const PARALLEL = Math.max(1, wholeSetting('COSTS_PARALLEL', 2));
/**
 * Lives of each variant, whose median is taken: two lives of one server differ by tens of thousands
 * of instructions a response (V8's compilation and collection go their own way each time).
 */
const LIVES = Math.max(1, wholeSetting('COSTS_LIVES', 3));
const SETTLE_SECONDS = 20;
/** Few: under valgrind a request may take seconds. */
const CONNECTIONS = 2;

/** One server life counted: the project with a feature changed, or the bare reference. */
interface Variant {
  feature: string;
  /** +1: the feature is what this variant lacks; -1: what it adds (a request asking for more). */
  sign: 1 | -1;
  env?: Record<string, string>;
  scenario?: Scenario;
  subscribed?: boolean;
  /** Tracing on, exporting to the receiver, with this share of traces sampled. */
  tracedRatio?: string;
  spec?: ServerSpec;
}

/** Request-wide features are counted on get-one; create, what it does more or otherwise. */
const variants = (scenario: string): Variant[] => [
  { feature: 'everything on', sign: 1 },
  ...(scenario === 'get-one'
    ? REQUEST_FEATURES.map((feature) => ({ ...feature, sign: 1 as const }))
    : [
        { feature: 'outbox write and its delivery', sign: -1 as const, subscribed: true },
        // The worker claiming once an hour: what a subscribed create costs its own request.
        {
          feature: 'outbox write alone (delivery held back)',
          sign: -1 as const,
          subscribed: true,
          env: { WEBHOOK_POLL_INTERVAL: '1h', WEBHOOK_YIELD_AT_UTILIZATION: '0' },
        },
      ]),
  ...OPERATION_FEATURES.map((feature) => ({ ...feature, sign: 1 as const })),
  { feature: 'tracing on, every trace sampled', sign: -1, tracedRatio: '1' },
  { feature: 'tracing on, 1% sampled', sign: -1, tracedRatio: '0.01' },
  { feature: 'project above the bare reference', sign: 1, spec: BARE },
];

/** Tells callgrind in a server to start counting (`-i on`) or to write what it counted (`-d`). */
function callgrindControl(pid: number, ...command: string[]): void {
  // vgdb finds the process by a pipe named after $HOST, which the server was started with.
  const env = { ...process.env, HOST: '127.0.0.1' };
  const result = spawnSync('callgrind_control', [...command, String(pid)], { env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`callgrind_control ${command.join(' ')} failed: ${result.stderr}`);
}

/** Instructions in a callgrind output: its `totals:` or `summary:` line. */
export function totalInstructions(text: string): number {
  const total = /^(?:totals|summary): (\d+)/m.exec(text)?.[1];
  if (total === undefined) throw new Error('no totals in the callgrind output');
  return Number(total);
}

const answered = (statuses: Record<string, number>) => Object.values(statuses).reduce((sum, n) => sum + n, 0);

let starting = Promise.resolve();

/** Main-thread instructions per response of one variant on `scenario`. */
async function countOne(base: Scenario, variant: Variant, table: Table, dir: string, receiver: Receiver) {
  const scenario = variant.scenario ?? base;
  const output = join(dir, 'callgrind.out');
  const launcher = [
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${output}`,
    // V8 writes and rewrites machine code; valgrind must notice.
    '--smc-check=all-non-file',
    // One output per thread: the main thread's is the request path; V8's compiler threads are not.
    '--separate-threads=yes',
    // Only what runs from a socket's events (reading a request, the handler and the database calls
    // it makes, writing the answer, with the promises and ticks each callback runs before it
    // returns) and from the thread pool's answers (the log's writes): the process's timers (the
    // overload check's every 10 ms) are not any request's, and under valgrind's slow loop they
    // would be shared among few responses.
    '--collect-atstart=no',
    '--toggle-collect=uv__stream_io',
    '--toggle-collect=uv__work_done',
  ];
  const featureOff = join(projectRoot, 'dist/scripts/bench/feature-off.js');
  const tracing =
    variant.tracedRatio === undefined
      ? {}
      : {
          // The receiver answers every POST 204: an OTLP sink that takes every export.
          OTEL_EXPORTER_OTLP_ENDPOINT: new URL(receiver.url).origin,
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: variant.tracedRatio,
          // Small batches, often: under valgrind one default batch (512 spans) holds the loop for seconds.
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '64',
          OTEL_BSP_SCHEDULE_DELAY: '200',
        };
  const env = { ...ALL_ON, ...variant.env, ...tracing, NODE_OPTIONS: `--import=${featureOff}` };
  const spec = { ...(variant.spec ?? PROJECT), env: { ...env, WEBHOOK_ALLOWED_NETWORKS: 'loopback' } };
  const requests = loadRequests(scenario, table);
  // Lives start one at a time: each picks its free ports once the one before has bound its own.
  const before = starting;
  let started: () => void = () => undefined;
  starting = new Promise<void>((resolve) => (started = resolve));
  await before;
  const responses = await withServer(
    spec,
    table,
    dir,
    async ({ origin, pid }) => {
      started();
      if (variant.subscribed === true) await subscribe(origin, table.key, receiver.url);
      const load = (seconds: number) =>
        applyLoad({ origin, requests, seconds, connections: CONNECTIONS, timeoutSeconds: 120 });
      for (let warmed = 0; warmed < WARMUP_RESPONSES;) warmed += answered((await load(15)).statuses);
      // Counting on makes valgrind translate all code again: seconds in which little is answered.
      callgrindControl(pid, '-i', 'on');
      await load(SETTLE_SECONDS);
      callgrindControl(pid, '-z');
      const { statuses, errors } = await load(WINDOW_SECONDS);
      callgrindControl(pid, '-d');
      const own = statuses[scenario.expect.status] ?? 0;
      // A request not answered would leave its work spread over the others.
      if (own === 0 || own !== answered(statuses) || errors > 0)
        throw new Error(`${variant.feature}: expected ${scenario.expect.status}, got ${JSON.stringify(statuses)}`);
      return own;
    },
    { launcher, startupLimitMs: 300_000 },
  ).finally(started);
  // The main thread's (thread 1) dump.
  return totalInstructions(readFileSync(`${output}.1-01`, 'utf8')) / responses;
}

/** Runs `work` over `items`, at most PARALLEL at a time, keeping their order. */
async function inParallel<T, R>(items: T[], work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++)
      results[index] = await work(items[index] as T, index);
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return results;
}

const scenarios = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['get-one', 'create'];
if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('needs valgrind: apt-get install -y valgrind');
const dir = mkdtempSync(join(tmpdir(), 'petstore-costs-'));
const receiver = await Receiver.start();
try {
  const table = await sqliteBackend.seed(dir);
  const lines = [
    `Main-thread instructions per response, ${WARMUP_RESPONSES} responses of warm-up, ${WINDOW_SECONDS} s counted:`,
  ];
  for (const name of scenarios) {
    // COSTS_FEATURES: only these (separated by '|': names have commas), beside everything on.
    const only = process.env.COSTS_FEATURES?.split('|');
    const runs = variants(name).filter((v, index) => index === 0 || only === undefined || only.includes(v.feature));
    // Each variant's lives in turn with the others', so that a busy moment falls on all alike.
    const lives = Array.from({ length: LIVES }, () => runs).flat();
    const counted = await inParallel(lives, async (variant, index) => {
      const life = join(dir, `${name}-${index}`);
      mkdirSync(life);
      process.stderr.write(`[costs] ${name}: ${variant.feature}, life ${1 + Math.floor(index / runs.length)}\n`);
      // One life that fails (a loaded machine: nothing answered in the window) is left out.
      return countOne(scenarioNamed(name), variant, table, life, receiver).catch((error: unknown) => {
        process.stderr.write(`[costs] ${name}: ${variant.feature} failed: ${String(error)}\n`);
        return NaN;
      });
    });
    const countsOf = (run: number) => counted.filter((_, index) => index % runs.length === run);
    const known = (values: number[]) => values.filter((value) => !Number.isNaN(value));
    const all = median(known(countsOf(0)));
    const rows = runs.map(({ feature, sign }, run) => {
      const own = countsOf(run);
      const cost = run === 0 ? all : sign * (all - median(known(own)));
      const spread = Math.max(...own) - Math.min(...own);
      return [feature, count(cost), `${((100 * cost) / all).toFixed(1)}%`, count(spread)];
    });
    // Each scenario's table as soon as it is counted: a run takes tens of minutes.
    lines.push(
      '',
      textTable([`${name}: feature`, 'instructions', 'of the whole', `spread of its ${LIVES} lives`], rows, 1),
      '',
    );
    process.stdout.write(lines.join('\n'));
    lines.length = 0;
  }
} finally {
  receiver.stop();
  rmSync(dir, { recursive: true, force: true });
}
