import { readdirSync, readFileSync } from 'node:fs';

/** Linux counts CPU time in ticks of 1/100 s (`getconf CLK_TCK`). */
const MS_PER_TICK = 10;

/**
 * Fields of /proc/<pid>/stat after the command name (which may hold spaces), counted from 0 there:
 * in proc(5)'s numbering from 1, minflt is 10, majflt 12, utime 14 and stime 15.
 */
const MINOR_FAULTS = 7;
const MAJOR_FAULTS = 9;
const USER_TICKS = 11;
const SYSTEM_TICKS = 12;

function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU time a process has used (user + system, all its threads, ended ones too), in milliseconds. */
export function processCpuMs(pid: number): number {
  const fields = statFields(`/proc/${pid}/stat`);
  return (Number(fields[USER_TICKS]) + Number(fields[SYSTEM_TICKS])) * MS_PER_TICK;
}

export const COUNTERS = [
  'main thread user',
  'main thread system',
  'other threads user',
  'other threads system',
  'minor page faults',
  'major page faults',
  'voluntary switches',
  'involuntary switches',
] as const;
export type Counter = (typeof COUNTERS)[number];
export type ProcCounters = Record<Counter, number>;

/** Every counter at zero. */
export function zeroCounters(): ProcCounters {
  return Object.fromEntries(COUNTERS.map((name) => [name, 0])) as ProcCounters;
}

/**
 * What a process has used so far, from /proc: CPU time in milliseconds, split by the main thread
 * (JavaScript, V8 and Node's native code on the request path) and the others (V8's garbage
 * collection and compiler helpers, libuv's pool), and by user and system time; page faults; and
 * context switches. Costs in time that an instruction count of the request path does not show.
 */
export function procCounters(pid: number): ProcCounters {
  // The process's own line counts threads that have ended; the main thread is the one whose id is
  // the process's (Node names every thread "node").
  // The main thread first: the process's line, read after it, holds at least as much.
  const main = statFields(`/proc/${pid}/task/${pid}/stat`);
  const all = statFields(`/proc/${pid}/stat`);
  const ms = (fields: string[], index: number) => Number(fields[index]) * MS_PER_TICK;
  const counters: ProcCounters = {
    'main thread user': ms(main, USER_TICKS),
    'main thread system': ms(main, SYSTEM_TICKS),
    'other threads user': ms(all, USER_TICKS) - ms(main, USER_TICKS),
    'other threads system': ms(all, SYSTEM_TICKS) - ms(main, SYSTEM_TICKS),
    'minor page faults': Number(all[MINOR_FAULTS]),
    'major page faults': Number(all[MAJOR_FAULTS]),
    'voluntary switches': 0,
    'involuntary switches': 0,
  };
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
    } catch {
      continue; // the thread ended between listing and reading
    }
    const switches = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    counters['voluntary switches'] += switches('voluntary_ctxt_switches');
    counters['involuntary switches'] += switches('nonvoluntary_ctxt_switches');
  }
  return counters;
}

/** The counters of CPU time (the rest are counts of events). */
export const CPU_COUNTERS: ReadonlySet<Counter> = new Set(COUNTERS.slice(0, 4));

/** Each counter's growth from `before` to `after`, per response (CPU time in microseconds). */
export function perResponse(before: ProcCounters, after: ProcCounters, responses: number): ProcCounters {
  return Object.fromEntries(
    COUNTERS.map((name) => {
      const scale = CPU_COUNTERS.has(name) ? 1000 : 1;
      return [name, ((after[name] - before[name]) * scale) / responses];
    }),
  ) as ProcCounters;
}
