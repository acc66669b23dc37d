import { readdirSync, readFileSync } from 'node:fs';

/** Linux counts CPU time in ticks of 1/100 s (`getconf CLK_TCK`). */
const MS_PER_TICK = 10;

/**
 * What a process has used so far, from /proc, summed over its threads: CPU time (ms) split by the main
 * thread (JavaScript, V8 and Node's native code on the request path) and the others (V8's garbage
 * collection and compiler helpers, libuv's pool), and by user and system time; page faults; and
 * context switches. Costs in time that an instruction count of the request path does not show.
 */
export type Counter = (typeof COUNTERS)[number];
export type ProcCounters = Record<Counter, number>;

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

export function procCounters(pid: number): ProcCounters {
  const counters = Object.fromEntries(COUNTERS.map((name) => [name, 0])) as ProcCounters;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    let status: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
    } catch {
      continue; // the thread ended between listing and reading
    }
    // After the command name (which may hold spaces): minflt is field 10, majflt 12, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Node names every thread "node": the main thread is the one whose id is the process's.
    const thread = tid === String(pid) ? 'main thread' : 'other threads';
    counters[`${thread} user`] += Number(fields[11]) * MS_PER_TICK;
    counters[`${thread} system`] += Number(fields[12]) * MS_PER_TICK;
    counters['minor page faults'] += Number(fields[7]);
    counters['major page faults'] += Number(fields[9]);
    const switches = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    counters['voluntary switches'] += switches('voluntary_ctxt_switches');
    counters['involuntary switches'] += switches('nonvoluntary_ctxt_switches');
  }
  return counters;
}

const CPU_COUNTERS = new Set<string>(COUNTERS.slice(0, 4));

/** Each counter's growth from `before` to `after`, per response (CPU time in microseconds). */
export function perResponse(before: ProcCounters, after: ProcCounters, responses: number): ProcCounters {
  return Object.fromEntries(
    COUNTERS.map((name) => {
      const scale = CPU_COUNTERS.has(name) ? 1000 : 1;
      return [name, ((after[name] - before[name]) * scale) / responses];
    }),
  ) as ProcCounters;
}
