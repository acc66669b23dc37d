import { cpus, release, totalmem } from 'node:os';
import type { Measurement } from './load.js';

/** The server under test, and the one it is compared with (the baseline, or itself with a feature off). */
export type Role = 'project' | 'baseline';
const ROLES: readonly Role[] = ['project', 'baseline'];

/** One scenario measured once on one server. */
export interface ScenarioRun {
  table: string;
  scenario: string;
  round: number;
  server: Role;
  measurement: Measurement;
  /** Server CPU time (user + system, all threads) per response, in microseconds. */
  cpuUsPerRequest: number;
  /** Responses whose status is not the scenario's. */
  unexpected: number;
}

/** One life of a server process: its start, and its peak memory over all its load. */
export interface ServerLife {
  server: Role;
  startupMs: number;
  peakRssMb: number;
}

/** Each server's medians over rounds (errors and unexpected summed), and the ratios project / baseline. */
export interface SummaryRow {
  table: string;
  scenario: string;
  project: Record<'rps' | 'p50Ms' | 'p99Ms' | 'cpuUs' | 'errors' | 'unexpected', number>;
  baseline: SummaryRow['project'];
  /** Each the median of the ratios within a round: a slow moment of the machine moves both sides of one. */
  x: Record<'rps' | 'p99' | 'cpu', number>;
  /** The lowest and highest throughput ratio of a single round: how far one round can be trusted. */
  rpsRange: [number, number];
}

export interface TargetCheck {
  target: string;
  subject: string;
  value: string;
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

export function summarise(runs: ScenarioRun[]): SummaryRow[] {
  const keys = [...new Set(runs.map((run) => `${run.table}\t${run.scenario}`))];
  return keys.map((key) => {
    const [table = '', scenario = ''] = key.split('\t');
    const mine = runs.filter((run) => run.table === table && run.scenario === scenario);
    const medians = (server: Role) => {
      const own = mine.filter((run) => run.server === server);
      const of = (pick: (m: Measurement) => number) => median(own.map((run) => pick(run.measurement)));
      const sum = (pick: (run: ScenarioRun) => number) => own.reduce((total, run) => total + pick(run), 0);
      const [errors, unexpected] = [sum((run) => run.measurement.errors), sum((run) => run.unexpected)];
      const cpuUs = median(own.map((run) => run.cpuUsPerRequest));
      return { rps: of((m) => m.rps), p50Ms: of((m) => m.p50Ms), p99Ms: of((m) => m.p99Ms), cpuUs, errors, unexpected };
    };
    const ratios = (pick: (run: ScenarioRun) => number) =>
      [...new Set(mine.map((run) => run.round))].flatMap((round) => {
        const [project, baseline] = ROLES.map((server) => mine.find((r) => r.round === round && r.server === server));
        return project === undefined || baseline === undefined ? [] : [pick(project) / pick(baseline)];
      });
    const rps = ratios((run) => run.measurement.rps);
    const [p99, cpu] = [ratios((run) => run.measurement.p99Ms), ratios((run) => run.cpuUsPerRequest)];
    const x = { rps: median(rps), p99: median(p99), cpu: median(cpu) };
    return {
      table,
      scenario,
      project: medians('project'),
      baseline: medians('baseline'),
      x,
      rpsRange: [Math.min(...rps), Math.max(...rps)],
    };
  });
}

export const ratio = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(2)}x`);
export const ms = (value: number) => value.toFixed(2);
const check = (target: string, subject: string, value: string, pass: boolean) => ({ target, subject, value, pass });

/** Throughput and p99 against the other server, p99 growth with the table, and every answer as expected. */
export function comparisonChecks(rows: SummaryRow[], limits: Limits, names: Record<Role, string>): TargetCheck[] {
  const { minRpsRatio: minRps, maxP99Ratio: maxP99, maxScaleP99Ratio: maxGrowth } = limits;
  const checks = rows.flatMap(({ table, scenario, x }) => [
    check(`throughput >= ${minRps}x ${names.baseline}`, `${scenario} @${table}`, ratio(x.rps), x.rps >= minRps),
    ...(maxP99 === undefined
      ? []
      : [check(`p99 <= ${maxP99}x ${names.baseline}`, `${scenario} @${table}`, ratio(x.p99), x.p99 <= maxP99)]),
  ]);
  const small = rows[0]?.table;
  const growthChecks = rows.flatMap((row) => {
    const reference = rows.find((other) => other.table === small && other.scenario === row.scenario);
    if (maxGrowth === undefined || row.table === small || reference === undefined) return [];
    const growth = row.project.p99Ms / reference.project.p99Ms;
    const theirs = ratio(row.baseline.p99Ms / reference.baseline.p99Ms);
    const value = `${ms(row.project.p99Ms)} vs ${ms(reference.project.p99Ms)} ms: ${ratio(growth)} (${names.baseline} ${theirs})`;
    const target = `p99 @${row.table} <= ${maxGrowth}x p99 @${small}`;
    return [check(target, `${row.scenario} (${names.project})`, value, growth <= maxGrowth)];
  });
  const sum = (pick: (m: SummaryRow['project']) => number) =>
    rows.reduce((n, row) => n + pick(row.project) + pick(row.baseline), 0);
  const [unexpected, errors] = [sum((m) => m.unexpected), sum((m) => m.errors)];
  const everyAnswer = check(
    'every response has the expected status, no socket errors',
    `${names.project} and ${names.baseline}`,
    `${unexpected} unexpected, ${errors} errors`,
    unexpected + errors === 0,
  );
  return [...checks, ...growthChecks, everyAnswer];
}

/** A server's median start and highest peak RSS over its lives. */
function lifeOf(lives: ServerLife[], server: Role) {
  const mine = lives.filter((life) => life.server === server);
  const peakRssMb = Math.max(...mine.map((life) => life.peakRssMb));
  return { starts: mine.length, startupMs: median(mine.map((life) => life.startupMs)), peakRssMb };
}

/** The project server's peak memory over all its lives, and its median start. */
export function serverChecks(lives: ServerLife[]): TargetCheck[] {
  const { starts, startupMs, peakRssMb } = lifeOf(lives, 'project');
  const { maxPeakRssMb, maxStartupMs } = TARGETS;
  const startup = `${startupMs.toFixed(0)} ms over ${starts} starts`;
  return [
    check(`peak RSS < ${maxPeakRssMb} MB`, 'project server', `${peakRssMb.toFixed(1)} MB`, peakRssMb < maxPeakRssMb),
    check(`first 200 <= ${maxStartupMs} ms after spawn (median)`, 'project server', startup, startupMs <= maxStartupMs),
  ];
}

export function livesLine(lives: ServerLife[], names: Record<Role, string>): string {
  const of = (server: Role) => {
    const { starts, startupMs, peakRssMb } = lifeOf(lives, server);
    return `${names[server]} ${startupMs.toFixed(0)} ms to the first 200 (median of ${starts}), peak RSS ${peakRssMb.toFixed(1)} MB`;
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
    ...checks.map((one) => `${one.pass ? 'PASS' : 'FAIL'}  ${one.target}  ${one.subject}: ${one.value}`),
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
  ['req/s', (row) => count(row.project.rps)],
  ['x req/s', (row) => ratio(row.x.rps)],
  ['rounds', (row) => row.rpsRange.map(ratio).join('-')],
  ['p50 ms', (row) => ms(row.project.p50Ms)],
  ['p99 ms', (row) => ms(row.project.p99Ms)],
  ['x p99', (row) => ratio(row.x.p99)],
  ['CPU us/resp', (row) => count(row.project.cpuUs)],
  ['x CPU', (row) => ratio(row.x.cpu)],
];

/** Each part's medians and ratios, a row per table and scenario: the results table of BENCHMARKS.md. */
export function resultsTable(parts: { name: string; rows: SummaryRow[] }[]): string {
  const rows = parts.flatMap(({ name, rows }) => rows.map((row) => [name, ...COLUMNS.map(([, cell]) => cell(row))]));
  return textTable(['part', ...COLUMNS.map(([heading]) => heading)], rows);
}
