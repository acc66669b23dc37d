/**
 * The type checker of `npm run dev`, in-process and incremental (scripts/dev/typecheck-worker.ts):
 * in a worker thread, so that a check (the first loads the whole program: tens of seconds on a
 * busy machine) never holds up the contract's half of the loop or the server's output.
 */
import { Worker } from 'node:worker_threads';

export interface TypeCheck {
  /** Errors with their file and line, as tsc prints them; empty when the code compiled. */
  errors: string[];
  /** The JavaScript files this check wrote to dist/ with new content. */
  changedScripts: string[];
}

/** What the checker tells the loop. */
export type FromChecker = { kind: 'change' } | { kind: 'idle?'; id: number } | ({ kind: 'check' } & TypeCheck);
/** What the loop answers: the check that asked may run. */
export interface ToChecker {
  go: number;
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

/** Starts watching the sources of the project at `root`; the first check follows at once. */
export function watchTypes(
  root: string,
  { settleMs, whenIdle, onChange, onCheck }: TypeCheckOptions,
): { close: () => Promise<number> } {
  const worker = new Worker(new URL('./typecheck-worker.js', import.meta.url), { workerData: { root, settleMs } });
  worker.on('message', (message: FromChecker) => {
    if (message.kind === 'change') onChange();
    else if (message.kind === 'idle?')
      void whenIdle().then(() => worker.postMessage({ go: message.id } satisfies ToChecker));
    else onCheck(message);
  });
  return { close: () => worker.terminate() };
}
