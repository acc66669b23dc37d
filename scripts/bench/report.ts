import { cpus, loadavg, release, totalmem } from 'node:os';

/** The server under test, and the one it is compared with (a reference, or itself another way). */
export type Role = 'project' | 'reference';

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
  scenario: string;
}

export interface SummaryRow extends RoundRun {
  /** project / reference, each the median of the ratios within a round: a slow moment moves both sides of one. */
  x: Record<'rps' | 'p99' | 'cpu', number>;
}

export interface TargetCheck {
  line: string;
  pass: boolean;
}

/** One part of the report: its lines, its rows of the results table and its target checks. */
export interface Part {
  name: string;
  lines: string[];
  rows: SummaryRow[];
  checks: TargetCheck[];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length % 2 === 1) return sorted[middle] ?? NaN;
  return ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}

export function summarise(runs: RoundRun[]): SummaryRow[] {
  return [...new Set(runs.map((run) => run.scenario))].map((scenario) => {
    const mine = runs.filter((run) => run.scenario === scenario);
    const medians = (role: Role): Figures => ({
      rps: median(mine.map((run) => run[role].rps)),
      p99Ms: median(mine.map((run) => run[role].p99Ms)),
      cpuUs: median(mine.map((run) => run[role].cpuUs)),
      unexpected: mine.reduce((sum, run) => sum + run[role].unexpected, 0),
    });
    const medianRatio = (pick: (figures: Figures) => number) =>
      median(mine.map((run) => pick(run.project) / pick(run.reference)));
    const x = { rps: medianRatio((f) => f.rps), p99: medianRatio((f) => f.p99Ms), cpu: medianRatio((f) => f.cpuUs) };
    return { scenario, project: medians('project'), reference: medians('reference'), x };
  });
}

export const ratio = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(2)}x`);
export const ms = (value: number) => value.toFixed(2);
export const count = (value: number) => Math.round(value).toLocaleString('en-US');
export const check = (target: string, subject: string, value: string, pass: boolean): TargetCheck => ({
  line: `${target}  ${subject}: ${value}`,
  pass,
});

/** Every answer of both servers as expected. */
function expectedAnswers(rows: SummaryRow[], servers: string): TargetCheck {
  const unexpected = rows.reduce((n, row) => n + row.project.unexpected + row.reference.unexpected, 0);
  return check(
    'every response has the expected status, no socket errors',
    servers,
    `${unexpected} unexpected or failed`,
    unexpected === 0,
  );
}

/** Throughput against the reference, and every answer as expected. */
export function comparisonChecks(rows: SummaryRow[], minRpsRatio: number, reference: string): TargetCheck[] {
  return [
    ...rows.map(({ scenario, x }) =>
      check(`throughput >= ${minRpsRatio}x ${reference}`, scenario, ratio(x.rps), x.rps >= minRpsRatio),
    ),
    expectedAnswers(rows, `project and ${reference}`),
  ];
}

/**
 * v1 (the project role) against v2 (the reference): CPU per response, the figure a loaded machine
 * moves least, within `maxCpuRatio` in every scenario, and every answer as expected.
 */
export function versionChecks(rows: SummaryRow[], maxCpuRatio: number): TargetCheck[] {
  return [
    ...rows.map(({ scenario, x }) =>
      check(
        `CPU per response, v1 through the changes <= ${maxCpuRatio}x v2`,
        scenario,
        ratio(x.cpu),
        x.cpu <= maxCpuRatio,
      ),
    ),
    expectedAnswers(rows, 'v1 and v2'),
  ];
}

export function machine(): string {
  const memoryGb = Math.round(totalmem() / 1024 ** 3);
  const load = loadavg()
    .map((n) => n.toFixed(1))
    .join(' ');
  return `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}, ${memoryGb} GiB, Linux ${release()}, Node ${process.version}; load average ${load}`;
}

/** A Markdown table, ready for BENCHMARKS.md: the first `left` columns left-aligned, the rest right-aligned. */
export function textTable(header: string[], rows: string[][], left = 2): string {
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

/** Each comparison's medians and ratios, a row per scenario: the results table of BENCHMARKS.md. */
export function resultsTable(parts: { name: string; rows: SummaryRow[] }[]): string {
  const rows = parts.flatMap(({ name, rows }) =>
    rows.map((row) => [
      name,
      row.scenario,
      `${count(row.project.rps)} (${ratio(row.x.rps)})`,
      `${ms(row.project.p99Ms)} (${ratio(row.x.p99)})`,
      `${count(row.project.cpuUs)} (${ratio(row.x.cpu)})`,
    ]),
  );
  return textTable(['against', 'scenario', 'req/s (x)', 'p99 ms (x)', 'CPU µs/resp (x)'], rows);
}
