import { cpus, release, totalmem } from 'node:os';

/** The server under test, and the one it is compared with (the baseline, or itself with a feature off). */
export type Role = 'project' | 'baseline';

/** A server's figures for one scenario: one round's, or the medians over rounds (unexpected summed). */
export interface Figures {
  rps: number;
  p99Ms: number;
  /** Server CPU time (user + system, all threads) per response, in microseconds. */
  cpuUs: number;
  /** Responses whose status is not the scenario's, and socket errors. */
  unexpected: number;
}

/** One scenario measured in one round, on both servers. */
export interface RoundRun extends Record<Role, Figures> {
  table: string;
  scenario: string;
}

/** One life of each server: its start, and its peak memory over all its load. */
export type ServerLives = Record<Role, { startupMs: number; peakRssMb: number }>;

export interface SummaryRow extends RoundRun {
  /** project / baseline, each the median of the ratios within a round: a slow moment moves both sides of one. */
  x: Record<'rps' | 'p99' | 'cpu', number>;
}

export interface TargetCheck {
  line: string;
  pass: boolean;
}

/** What a comparison must meet: a limit left out is not checked. */
export interface Limits {
  minRpsRatio: number;
  maxP99Ratio?: number;
  /** The project's p99 on the larger table over its p99 on the smaller. */
  maxScaleP99Ratio?: number;
}

export const TARGETS = {
  minRpsRatio: 0.9,
  maxP99Ratio: 1.2,
  maxScaleP99Ratio: 1.2,
  maxPeakRssMb: 150,
  maxStartupMs: 500,
};

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length % 2 === 1) return sorted[middle] ?? NaN;
  return ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}

export function summarise(runs: RoundRun[]): SummaryRow[] {
  const keys = [...new Set(runs.map((run) => `${run.table}\t${run.scenario}`))];
  return keys.map((key) => {
    const [table = '', scenario = ''] = key.split('\t');
    const mine = runs.filter((run) => run.table === table && run.scenario === scenario);
    const medians = (role: Role): Figures => ({
      rps: median(mine.map((run) => run[role].rps)),
      p99Ms: median(mine.map((run) => run[role].p99Ms)),
      cpuUs: median(mine.map((run) => run[role].cpuUs)),
      unexpected: mine.reduce((sum, run) => sum + run[role].unexpected, 0),
    });
    const medianRatio = (pick: (figures: Figures) => number) =>
      median(mine.map((run) => pick(run.project) / pick(run.baseline)));
    const x = { rps: medianRatio((f) => f.rps), p99: medianRatio((f) => f.p99Ms), cpu: medianRatio((f) => f.cpuUs) };
    return { table, scenario, project: medians('project'), baseline: medians('baseline'), x };
  });
}

export const ratio = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(2)}x`);
export const ms = (value: number) => value.toFixed(2);
export const check = (target: string, subject: string, value: string, pass: boolean): TargetCheck => ({
  line: `${target}  ${subject}: ${value}`,
  pass,
});

/** Throughput and p99 against the other server, p99 growth with the table, and every answer as expected. */
export function comparisonChecks(rows: SummaryRow[], limits: Limits, names: Record<Role, string>): TargetCheck[] {
  const { minRpsRatio: minRps, maxP99Ratio: maxP99, maxScaleP99Ratio: maxGrowth } = limits;
  const small = rows[0]?.table;
  return [
    ...rows.flatMap(({ table, scenario, x }) => [
      check(`throughput >= ${minRps}x ${names.baseline}`, `${scenario} @${table}`, ratio(x.rps), x.rps >= minRps),
      ...(maxP99 === undefined
        ? []
        : [check(`p99 <= ${maxP99}x ${names.baseline}`, `${scenario} @${table}`, ratio(x.p99), x.p99 <= maxP99)]),
    ]),
    ...rows.flatMap((row) => {
      const reference = rows.find((other) => other.table === small && other.scenario === row.scenario);
      if (maxGrowth === undefined || row.table === small || reference === undefined) return [];
      const growth = row.project.p99Ms / reference.project.p99Ms;
      const theirs = ratio(row.baseline.p99Ms / reference.baseline.p99Ms);
      const value = `${ms(row.project.p99Ms)} vs ${ms(reference.project.p99Ms)} ms: ${ratio(growth)} (${names.baseline} ${theirs})`;
      const target = `p99 @${row.table} <= ${maxGrowth}x p99 @${small}`;
      return [check(target, `${row.scenario} (${names.project})`, value, growth <= maxGrowth)];
    }),
    check(
      'every response has the expected status, no socket errors',
      `${names.project} and ${names.baseline}`,
      `${rows.reduce((n, row) => n + row.project.unexpected + row.baseline.unexpected, 0)} unexpected or failed`,
      rows.every((row) => row.project.unexpected + row.baseline.unexpected === 0),
    ),
  ];
}

/** A server's median start and highest peak RSS over its lives. */
function lifeOf(lives: ServerLives[], role: Role) {
  const peakRssMb = Math.max(...lives.map((life) => life[role].peakRssMb));
  return { starts: lives.length, startupMs: median(lives.map((life) => life[role].startupMs)), peakRssMb };
}

/** The project server's peak memory over all its lives, and its median start. */
export function serverChecks(lives: ServerLives[]): TargetCheck[] {
  const { starts, startupMs, peakRssMb } = lifeOf(lives, 'project');
  const { maxPeakRssMb, maxStartupMs } = TARGETS;
  const startup = `${startupMs.toFixed(0)} ms over ${starts} starts`;
  return [
    check(`peak RSS < ${maxPeakRssMb} MB`, 'project server', `${peakRssMb.toFixed(1)} MB`, peakRssMb < maxPeakRssMb),
    check(`first 200 <= ${maxStartupMs} ms after spawn (median)`, 'project server', startup, startupMs <= maxStartupMs),
  ];
}

export function livesLine(lives: ServerLives[], names: Record<Role, string>): string {
  const of = (role: Role) => {
    const { starts, startupMs, peakRssMb } = lifeOf(lives, role);
    return `${names[role]} ${startupMs.toFixed(0)} ms to the first 200 (median of ${starts}), peak RSS ${peakRssMb.toFixed(1)} MB`;
  };
  return `Servers: ${of('project')}; ${of('baseline')}.`;
}

export function machine(): string {
  const memoryGb = Math.round(totalmem() / 1024 ** 3);
  return `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}, ${memoryGb} GiB, Linux ${release()}, Node ${process.version}`;
}

/** A Markdown table, ready for BENCHMARKS.md: the first `left` columns left-aligned, the rest right-aligned. */
export function textTable(header: string[], rows: string[][], left = 3): string {
  const alignment = header.map((_, column) => (column < left ? '---' : '---:'));
  return [header, alignment, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

export function verdicts(checks: TargetCheck[]): string[] {
  const failed = checks.filter((one) => !one.pass).length;
  return [
    ...checks.map((one) => `${one.pass ? 'PASS' : 'FAIL'}  ${one.line}`),
    '',
    failed === 0
      ? `All ${checks.length} targets met.`
      : `${failed} of ${checks.length} targets NOT met (see FAIL above).`,
  ];
}

const count = (value: number) => Math.round(value).toLocaleString('en-US');

/** The results table's columns after the part: a heading, and its cell of a summary row. */
const COLUMNS: [string, (row: SummaryRow) => string][] = [
  ['table', (row) => row.table],
  ['scenario', (row) => row.scenario],
  ['req/s (x)', (row) => `${count(row.project.rps)} (${ratio(row.x.rps)})`],
  ['p99 ms (x)', (row) => `${ms(row.project.p99Ms)} (${ratio(row.x.p99)})`],
  ['CPU µs/resp (x)', (row) => `${count(row.project.cpuUs)} (${ratio(row.x.cpu)})`],
];

/** Each part's medians and ratios, a row per table and scenario: the results table of BENCHMARKS.md. */
export function resultsTable(parts: { name: string; rows: SummaryRow[] }[]): string {
  const rows = parts.flatMap(({ name, rows }) => rows.map((row) => [name, ...COLUMNS.map(([, cell]) => cell(row))]));
  return textTable(['part', ...COLUMNS.map(([heading]) => heading)], rows);
}
