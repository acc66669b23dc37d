/**
 * Runs the test files (and the other checks of `npm test`) a few at a time, each as its own
 * `node dist/test/x.test.js`, and collects each one's verdict and output.
 *
 * Not `tap`'s runner, whose process tracking every process a test starts would load too
 * (docs/decisions.md has the measurement). The files are still tap tests and print TAP; a file
 * passes when it exits 0.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/contract/paths.js';

export interface Job {
  /** What the report calls it: `pets.test.js on PostgreSQL`, `lint`. */
  name: string;
  program: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** Which goes first when no run has timed it (a fresh clone): the larger. */
  weight?: number;
}

export interface Outcome<J extends Job = Job> {
  job: J;
  passed: boolean;
  /** When it started, on performance.now()'s clock, and how long it ran. */
  started: number;
  seconds: number;
  /**
   * The CPU time it and every process it waited for used, in seconds (undefined where /proc is
   * not): what a job costs the others on a shared machine, which its wall time does not say.
   */
  cpuSeconds?: number;
  /** From a test file's last line, `# { total: 98, pass: 98 }`. */
  assertions?: { total: number; failed: number };
  /** Everything it printed, stdout and stderr in the order they came. */
  output: string;
}

/** A file that hangs past every test's own timeout is stopped (tap's per-test limit is TAP_TIMEOUT). */
const JOB_TIMEOUT_MS = 15 * 60_000;

/** What the last run took per job: the longest go first, so that no long one starts last. */
const TIMES_FILE = join(projectRoot, 'dist', 'test-times.json');

const running = new Set<number>();

/**
 * The CPU time of this process's children that have ended and been waited for (/proc/self/stat's
 * cutime and cstime, in clock ticks of 1/100 s), or undefined where there is no /proc.
 */
function childrenCpuSeconds(): number | undefined {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return undefined;
  }
}

/**
 * A job's CPU time is what the children's total grew by when it was waited for (read as it ends).
 * Two jobs waited for in the same turn of the event loop would share one reading: the first is
 * given both, the second none; rare, and the run's total stays right.
 */
let childrenCpuBefore = childrenCpuSeconds();
function cpuOfJobJustEnded(): number | undefined {
  const now = childrenCpuSeconds();
  const spent = now === undefined || childrenCpuBefore === undefined ? undefined : now - childrenCpuBefore;
  childrenCpuBefore = now;
  return spent;
}

/** Kills a job's process group: the file and every server it started. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Stops every job still running (and what it started): for an interrupted `npm test`. */
export function stopAll(): void {
  for (const pid of running) killGroup(pid);
}

function runJob<J extends Job>(job: J): Promise<Outcome<J>> {
  const started = performance.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    // Its own process group, so that a hung file is stopped with every server it started.
    const child = spawn(job.program, job.args, {
      cwd: projectRoot,
      env: { ...process.env, ...job.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const pid = child.pid;
    if (pid !== undefined) running.add(pid);
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    const timer = setTimeout(() => {
      chunks.push(Buffer.from(`\n[npm test] stopped after ${JOB_TIMEOUT_MS / 60_000} minutes\n`));
      if (pid !== undefined) killGroup(pid);
    }, JOB_TIMEOUT_MS);
    // Read as it is waited for ('exit'), before another job's end can add to the reading.
    let cpuSeconds: number | undefined;
    child.once('exit', () => (cpuSeconds = cpuOfJobJustEnded()));
    const finish = (passed: boolean, note = '') => {
      clearTimeout(timer);
      if (pid !== undefined) running.delete(pid);
      const output = Buffer.concat(chunks).toString() + note;
      const counted = assertionsIn(output);
      resolve({
        job,
        // A file that exits 0 while its own summary counts a failure has failed all the same.
        passed: passed && (counted.assertions?.failed ?? 0) === 0,
        started,
        seconds: (performance.now() - started) / 1000,
        ...(cpuSeconds === undefined ? {} : { cpuSeconds }),
        output,
        ...counted,
      });
    };
    child.on('error', (error) => finish(false, `\n${job.program}: ${error.message}\n`));
    child.on('close', (code) => finish(code === 0));
  });
}

function assertionsIn(output: string): Pick<Outcome, 'assertions'> {
  const summary = [...output.matchAll(/^# \{ total: (\d+).*\}$/gm)].at(-1);
  if (summary === undefined) return {};
  return { assertions: { total: Number(summary[1]), failed: Number(/\bfail: (\d+)/.exec(summary[0])?.[1] ?? 0) } };
}

function lastTimes(): Record<string, number> {
  try {
    return existsSync(TIMES_FILE) ? (JSON.parse(readFileSync(TIMES_FILE, 'utf8')) as Record<string, number>) : {};
  } catch {
    return {};
  }
}

/**
 * Runs the jobs, `parallel` at a time, the longest by the last run first (one it has not timed
 * before them, the heavier first); `onDone` hears of each as it ends. Records the times for the next run.
 */
export async function runPool<J extends Job>(
  jobs: J[],
  parallel: number,
  onDone: (outcome: Outcome<J>) => void,
): Promise<Outcome<J>[]> {
  const times = lastTimes();
  const queue = [...jobs].sort(
    (a, b) => (times[b.name] ?? Infinity) - (times[a.name] ?? Infinity) || (b.weight ?? 0) - (a.weight ?? 0),
  );
  const outcomes: Outcome<J>[] = [];
  const worker = async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
      const outcome = await runJob(job);
      outcomes.push(outcome);
      onDone(outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  // Read again: another pool of the run may have recorded its own meanwhile.
  writeFileSync(
    TIMES_FILE,
    JSON.stringify({ ...lastTimes(), ...Object.fromEntries(outcomes.map(({ job, seconds }) => [job.name, seconds])) }),
  );
  return outcomes;
}
