/**
 * `npm run dev`: the contract-first loop. Serves the API from the sources (src/server.ts with
 * PETSTORE_DEV=1: operations without a handler answered from the contract, every response checked
 * against it) and keeps it current:
 * - openapi.yaml (watched with chokidar): validated, generated/ regenerated, then a restart
 *   at once: generated/ holds types only, and with isolatedModules no emitted JavaScript depends on
 *   types, so the compiled code is the same (`tsc --watch` still checks the code against them);
 * - src/ (watched with chokidar; type-checked and compiled to dist/ by `tsc --watch`): a restart
 *   once tsc has compiled it without errors.
 * An invalid contract or a type error is printed with its file and line, and the server that was
 * running keeps running: the last good version, until the next good one. Lint findings are printed
 * as they arrive (lintContract).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { watch } from 'chokidar';
import { sha256, validateContract } from '../src/contract.js';
import { contractPath, projectRoot } from '../src/paths.js';
import { writeCompiledContract } from './build-contract.js';
import { checkLint } from './contract-check/lint.js';
import { generatedTypesFile, generateTypes } from './contract/generate-types.js';

/** Edits arrive as bursts of events (an editor's save is several writes): wait for quiet. */
const SETTLE_MS = 50;

const say = (line: string) => process.stdout.write(`[dev] ${line}\n`);

let contractGood = false;
/** A change to src/ waits for tsc's verdict before it is served. */
let codeChanged = false;
let server: ChildProcess | undefined;
let changeStarted: number | undefined;
/** Restarts run one at a time, in order. */
let restarting: Promise<void> = Promise.resolve();
let stopping = false;

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function stillServing(): string {
  return server === undefined ? 'nothing is served until it is fixed' : 'still serving the last good version';
}

async function stopServer(): Promise<void> {
  const running = server;
  if (running === undefined) return;
  server = undefined;
  if (running.exitCode !== null || running.signalCode !== null) return;
  const exited = new Promise((resolve) => running.once('exit', resolve));
  running.kill('SIGTERM');
  await exited;
}

function startServer(): void {
  const child = spawn(process.execPath, [join(projectRoot, 'dist', 'src', 'server.js')], {
    cwd: projectRoot,
    env: { ...process.env, PETSTORE_DEV: '1' },
    stdio: 'inherit',
  });
  server = child;
  child.once('exit', (code, signal) => {
    if (server !== child || stopping) return;
    server = undefined;
    say(`the server stopped (${signal ?? `exit ${String(code)}`}); it restarts on the next good change`);
  });
}

function restart(reason: string): void {
  if (!contractGood) return;
  const started = changeStarted;
  changeStarted = undefined;
  restarting = restarting.then(async () => {
    await stopServer();
    if (stopping) return;
    startServer();
    say(
      `${reason}: restarted${started === undefined ? '' : ` ${Math.round(performance.now() - started)} ms after the change`}`,
    );
  });
}

/**
 * Lints the contract with the committed ruleset (Redocly CLI, a process of its own: seconds on a
 * busy machine). Its findings are printed when they arrive: a valid contract with lint problems is
 * served meanwhile, and `npm test` (contract:check) holds it to zero problems.
 */
function lintContract(): void {
  checkLint(projectRoot).then(
    (drifts) => {
      for (const { what, where } of drifts) process.stdout.write(`${where}: ${what}\n`);
      say(drifts.length === 0 ? 'openapi.yaml lints clean' : `openapi.yaml: ${drifts.length} lint problem(s) above`);
    },
    (error: unknown) => say(`openapi.yaml: lint could not run: ${describeError(error)}`),
  );
}

/** Validates the contract and regenerates generated/; true when it is good. */
async function checkContract(): Promise<boolean> {
  const bytes = readFileSync(contractPath);
  lintContract();
  const [validated, types] = await Promise.allSettled([validateContract(contractPath), generateTypes(projectRoot)]);
  if (validated.status === 'rejected' || types.status === 'rejected') {
    contractGood = false;
    if (validated.status === 'rejected') {
      process.stdout.write(`openapi.yaml: not a valid OpenAPI document: ${describeError(validated.reason)}\n`);
    }
    if (types.status === 'rejected') {
      process.stdout.write(`openapi.yaml: types cannot be generated: ${describeError(types.reason)}\n`);
    }
    say(`the contract is invalid (above): ${stillServing()}`);
    changeStarted = undefined;
    return false;
  }
  writeCompiledContract({ sourceSha256: sha256(bytes), ...validated.value });
  contractGood = true;
  const generatedFile = join(projectRoot, generatedTypesFile);
  let current: string | undefined;
  try {
    current = readFileSync(generatedFile, 'utf8');
  } catch {
    current = undefined;
  }
  if (current !== types.value) {
    writeFileSync(generatedFile, types.value);
    say(`${generatedTypesFile} regenerated`);
  }
  return true;
}

function watchTypes(): ChildProcess {
  const tsc = spawn(
    process.execPath,
    [
      join(projectRoot, 'node_modules', 'typescript', 'bin', 'tsc'),
      ...['-p', 'tsconfig.json', '--watch', '--preserveWatchOutput', '--noEmitOnError', '--pretty', 'false'],
    ],
    { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  createInterface({ input: tsc.stdout }).on('line', (line) => {
    const found = /Found (\d+) errors?\./.exec(line);
    if (found === null) {
      if (/error TS\d+/.test(line) || (line.trim() !== '' && !/Starting|File change detected/.test(line))) {
        process.stdout.write(`${line}\n`);
      }
      return;
    }
    const errors = Number(found[1]);
    if (errors > 0)
      say(`${errors} type error(s) above: the code is not restarted until they are fixed; ${stillServing()}`);
    else if (!contractGood) say('compiled, but the contract has problems (above): not restarted');
    else if (codeChanged || server === undefined) {
      codeChanged = false;
      restart('src/ changed');
    }
  });
  return tsc;
}

async function main(): Promise<void> {
  // Serve at once what `npm run dev` compiled (tsc --noEmitOnError: the last good code); the
  // watching tsc's first verdict would otherwise hold the start for a whole type check.
  if ((await checkContract()) && existsSync(join(projectRoot, 'dist', 'src', 'server.js'))) restart('started');
  const tsc = watchTypes();
  let timer: NodeJS.Timeout | undefined;
  let checking: Promise<void> = Promise.resolve();
  const codeWatcher = watch(join(projectRoot, 'src'), { ignoreInitial: true }).on('all', () => {
    changeStarted ??= performance.now();
    codeChanged = true;
  });
  const contractWatcher = watch(contractPath, { ignoreInitial: true }).on('all', () => {
    changeStarted ??= performance.now();
    clearTimeout(timer);
    timer = setTimeout(() => {
      checking = checking.then(async () => {
        say('openapi.yaml changed: checking it');
        const good = await checkContract().catch((error: unknown) => {
          say(`the contract check failed: ${describeError(error)}`);
          return false;
        });
        if (good) restart('openapi.yaml changed');
      });
    }, SETTLE_MS);
  });
  const stop = () => {
    stopping = true;
    tsc.kill('SIGTERM');
    void contractWatcher.close();
    void codeWatcher.close();
    void stopServer().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  say('watching openapi.yaml and the TypeScript sources; Ctrl-C stops');
}

await main();
