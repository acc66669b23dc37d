/**
 * The type checker of `npm run dev` (started by scripts/dev/typecheck.ts in a worker thread, so
 * that a long check never holds up the loop): TypeScript's watch API over tsconfig.json with a
 * builder program, so an edit re-checks the files it affects and emits only what changed to
 * dist/. Nothing is emitted while there is a type error (noEmitOnError): dist/ keeps the last good
 * code. The option is tsconfig.json's, as for every compile: set here alone, it would make each
 * `tsc` after `npm run dev` (and the loop's first check after it) check the whole program again.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import ts from 'typescript';
import type { FromChecker, ToChecker } from './typecheck.js';

interface Timer {
  timeout: NodeJS.Timeout;
  cancelled: boolean;
}

/** Writes a file unless it already holds this text; true when it wrote it. */
function writeIfChanged(file: string, text: string): boolean {
  try {
    if (readFileSync(file, 'utf8') === text) return false;
  } catch {
    mkdirSync(dirname(file), { recursive: true });
  }
  writeFileSync(file, text);
  return true;
}

const { root, settleMs } = workerData as { root: string; settleMs: number };
const port = parentPort;
if (port === null) throw new Error('scripts/dev/typecheck-worker.js runs as a worker thread');
const tell = (message: FromChecker) => port.postMessage(message);

/** Checks wait for the loop's word: it holds them back while a server starts. */
const waiting = new Map<number, () => void>();
let asked = 0;
port.on('message', ({ go }: ToChecker) => {
  waiting.get(go)?.();
  waiting.delete(go);
});
function whenIdle(): Promise<void> {
  const id = ++asked;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    tell({ kind: 'idle?', id });
  });
}

function watchTypes(): void {
  const formatHost: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (file) => file,
    getCurrentDirectory: () => root,
    getNewLine: () => '\n',
  };
  const host = ts.createWatchCompilerHost(
    join(root, 'tsconfig.json'),
    {},
    ts.sys,
    ts.createEmitAndSemanticDiagnosticsBuilderProgram,
    (diagnostic) => process.stdout.write(ts.formatDiagnostic(diagnostic, formatHost)),
    () => undefined, // "Starting compilation…", "Found 0 errors…": the loop says what it does itself
  );
  // Each event the watchers see tells the loop, which times the edit from it.
  const noticing =
    <A extends unknown[]>(callback: (...args: A) => void) =>
    (...args: A) => {
      tell({ kind: 'change' });
      callback(...args);
    };
  const watchFile = host.watchFile.bind(host);
  const watchDirectory = host.watchDirectory.bind(host);
  host.watchFile = (file, callback, ...rest) => watchFile(file, noticing(callback), ...rest);
  host.watchDirectory = (dir, callback, ...rest) => watchDirectory(dir, noticing(callback), ...rest);
  // TypeScript schedules each check on a timer (250 ms after the last event): shorter here, and
  // held back while the loop is busy starting a server, so the two do not share the cores.
  host.setTimeout = (callback: (...args: unknown[]) => void, ms: number, ...args: unknown[]): Timer => {
    const timer: Timer = { cancelled: false, timeout: undefined as unknown as NodeJS.Timeout };
    timer.timeout = setTimeout(
      () =>
        void whenIdle().then(() => {
          if (!timer.cancelled) callback(...args);
        }),
      Math.min(ms, settleMs),
    );
    return timer;
  };
  host.clearTimeout = (timer: Timer) => {
    timer.cancelled = true;
    clearTimeout(timer.timeout);
  };
  host.afterProgramCreate = (program) => {
    const diagnostics = [
      ...program.getConfigFileParsingDiagnostics(),
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...program.getSyntacticDiagnostics(),
      ...program.getSemanticDiagnostics(),
    ].filter(({ category }) => category === ts.DiagnosticCategory.Error);
    const changedScripts: string[] = [];
    if (diagnostics.length === 0) {
      // Emits only the files the edit affected (and the build info that remembers it).
      program.emit(undefined, (file, text) => {
        if (writeIfChanged(file, text) && file.endsWith('.js')) changedScripts.push(relative(root, file));
      });
    }
    tell({
      kind: 'check',
      errors: diagnostics.map((diagnostic) => ts.formatDiagnostic(diagnostic, formatHost).trimEnd()),
      changedScripts,
    });
  };
  ts.createWatchProgram(host);
}

watchTypes();
