/**
 * The type checker of `npm run dev`, in-process and incremental: TypeScript's watch API over
 * tsconfig.json with a builder program, so an edit re-checks the files it affects and emits only
 * what changed to dist/. Nothing is emitted while there is a type error (noEmitOnError): dist/
 * keeps the last good code.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

export interface TypeCheck {
  /** Errors with their file and line, as tsc prints them; empty when the code compiled. */
  errors: string[];
  /** The JavaScript files this check wrote to dist/ with new content. */
  changedScripts: string[];
}

export interface TypeCheckOptions {
  /** Edits arrive as bursts of events: how long to wait for quiet before checking. */
  settleMs: number;
  /** Resolves when a check may run: the loop holds checks back while a server starts. */
  whenIdle: () => Promise<void>;
  /** A watched file or folder changed: a check follows. */
  onChange: () => void;
  onCheck: (check: TypeCheck) => void;
}

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

/** Starts watching; the first check runs before this returns. */
export function watchTypes(
  root: string,
  { settleMs, whenIdle, onChange, onCheck }: TypeCheckOptions,
): { close: () => void } {
  const formatHost: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (file) => file,
    getCurrentDirectory: () => root,
    getNewLine: () => '\n',
  };
  const host = ts.createWatchCompilerHost(
    join(root, 'tsconfig.json'),
    { noEmitOnError: true },
    ts.sys,
    ts.createEmitAndSemanticDiagnosticsBuilderProgram,
    (diagnostic) => process.stdout.write(ts.formatDiagnostic(diagnostic, formatHost)),
    () => undefined, // "Starting compilation…", "Found 0 errors…": the loop says what it does itself
  );
  const watchFile = host.watchFile.bind(host);
  const watchDirectory = host.watchDirectory.bind(host);
  host.watchFile = (file, callback, ...rest) =>
    watchFile(
      file,
      (...args) => {
        onChange();
        callback(...args);
      },
      ...rest,
    );
  host.watchDirectory = (dir, callback, ...rest) =>
    watchDirectory(
      dir,
      (...args) => {
        onChange();
        callback(...args);
      },
      ...rest,
    );
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
    onCheck({
      errors: diagnostics.map((diagnostic) => ts.formatDiagnostic(diagnostic, formatHost).trimEnd()),
      changedScripts,
    });
  };
  const watch = ts.createWatchProgram(host);
  return { close: () => watch.close() };
}
