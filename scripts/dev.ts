/**
 * `npm run dev`: the contract-first loop. Serves the API from the sources (src/server.ts with
 * PETSTORE_DEV=1: operations without a handler answered from the contract, every response checked
 * against it) and keeps it current, in this one process but for the server itself:
 * - openapi.yaml (watched with chokidar): validated, generated/ regenerated, and the server
 *   restarted at once (scripts/dev/contract.ts); then linted, as again whenever the linter's
 *   ruleset (redocly.yaml, .redocly.lint-ignore.yaml) changes. generated/ holds types only, and with
 *   isolatedModules no emitted JavaScript depends on types, so the compiled code stays valid; the
 *   type checker then checks the code against the new types;
 * - the TypeScript sources (watched by TypeScript's own watch API, scripts/dev/typecheck.ts):
 *   re-checked incrementally, the changed files emitted to dist/, and the server restarted when
 *   its code changed; other files under src/ (SQL migrations, watched with chokidar) restart it.
 * The server restarts into a process that has already loaded its packages (scripts/dev/server.ts).
 * An invalid contract or a type error is printed with its file and line, and the server that was
 * running keeps running: the last good version, until the next good one.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { watch } from 'chokidar';
import { contractPath, projectRoot } from '../src/contract/paths.js';
import { checkContract, lintContract } from './dev/contract.js';
import { DevServer } from './dev/server.js';
import { type TypeCheck, watchTypes } from './dev/typecheck.js';

/** The contract linter's ruleset and its exemptions: an edit lints the contract again. */
const LINT_CONFIG = ['redocly.yaml', '.redocly.lint-ignore.yaml'];

/** Edits arrive as bursts of events (an editor's save is several writes): wait for quiet. */
const SETTLE_MS = 50;

const say = (line: string) => process.stdout.write(`[dev] ${line}\n`);

const server = new DevServer((how) => say(`the server stopped (${how}); it restarts on the next good change`));
let contractGood = false;
/** When the edit being handled was seen: each restart says how long it took to serve it. */
let changeSeen: number | undefined;
/** Contract checks and restarts run one at a time, in order; type checks wait for them. */
let busy: Promise<void> = Promise.resolve();
let typesChecked = false;
let types: { close: () => Promise<number> } | undefined;

const noteChange = () => (changeSeen ??= performance.now());

function stillServing(): string {
  return server.serving ? 'still serving the last good version' : 'nothing is served until it is fixed';
}

/** Calls `then` once events stop arriving for SETTLE_MS. */
function settled(then: () => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  return () => {
    noteChange();
    clearTimeout(timer);
    timer = setTimeout(then, SETTLE_MS);
  };
}

function runInTurn(step: () => Promise<void>): Promise<void> {
  busy = busy.then(step).catch((error: unknown) => {
    say(`failed: ${error instanceof Error ? error.stack : String(error)}`);
  });
  return busy;
}

async function restartNow(reason: string): Promise<void> {
  const seen = changeSeen;
  changeSeen = undefined;
  if (await server.restart()) {
    say(
      `${reason}: serving${seen === undefined ? '' : `, ${Math.round(performance.now() - seen)} ms after the change`}`,
    );
  } else {
    say(`${reason}: the server did not start (above)`);
  }
}

async function onContractChange(reason: string): Promise<void> {
  contractGood = await checkContract();
  if (contractGood && existsSync(join(projectRoot, 'dist', 'src', 'server.js'))) await restartNow(reason);
  if (!contractGood) {
    changeSeen = undefined;
    say(`the contract is invalid (above): ${stillServing()}`);
  }
  await lintContract();
}

function onTypeCheck({ errors, changedScripts }: TypeCheck): void {
  for (const error of errors) process.stdout.write(`${error}\n`);
  if (!typesChecked && errors.length === 0) say('the sources type-check');
  typesChecked = true;
  if (errors.length > 0) {
    changeSeen = undefined;
    say(`${errors.length} type error(s) above: the code is not restarted until they are fixed; ${stillServing()}`);
    return;
  }
  const serverChanged = changedScripts.some((file) => file.startsWith(join('dist', 'src')));
  if (!serverChanged && server.serving) {
    changeSeen = undefined;
    return;
  }
  if (!contractGood) say('compiled, but the contract has problems (above): not restarted');
  else void runInTurn(() => restartNow('src/ changed'));
}

async function main(): Promise<void> {
  // Serves at once what `npm run dev` compiled (tsconfig.json's noEmitOnError: the last good code); the
  // type checker's first pass, which loads the whole program, comes after.
  const contractWatcher = watch(contractPath, { ignoreInitial: true }).on(
    'all',
    settled(() => {
      say('openapi.yaml changed: checking it');
      void runInTurn(() => onContractChange('openapi.yaml changed'));
    }),
  );
  const lintConfigWatcher = watch(
    LINT_CONFIG.map((file) => join(projectRoot, file)),
    { ignoreInitial: true },
  ).on(
    'all',
    settled(() => {
      changeSeen = undefined;
      say("the linter's ruleset changed: linting openapi.yaml again");
      void runInTurn(lintContract);
    }),
  );
  // What the type checker does not see: SQL migrations, read by the server as it starts.
  const otherWatcher = watch(join(projectRoot, 'src'), {
    ignoreInitial: true,
    ignored: (path, stats) => stats?.isFile() === true && path.endsWith('.ts'),
  }).on(
    'all',
    settled(() => {
      if (contractGood) void runInTurn(() => restartNow('src/ changed'));
    }),
  );
  const stop = () => {
    void types?.close();
    void contractWatcher.close();
    void lintConfigWatcher.close();
    void otherWatcher.close();
    void server.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Watching before anything is read, so that no edit made meanwhile is missed.
  await Promise.all(
    [contractWatcher, lintConfigWatcher, otherWatcher].map(
      (watcher) => new Promise<void>((ready) => watcher.once('ready', () => ready())),
    ),
  );
  await runInTurn(() => onContractChange('started'));
  types = watchTypes(projectRoot, {
    settleMs: SETTLE_MS,
    whenIdle: () => busy,
    onChange: noteChange,
    onCheck: onTypeCheck,
  });
  say('watching openapi.yaml, its lint rules and the sources (their first type check runs meanwhile); Ctrl-C stops');
}

await main();
