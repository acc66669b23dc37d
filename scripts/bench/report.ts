import { cpus, release, totalmem } from 'node:os';
import type { ScenarioMeasurement } from './measure.js';

/** The server under test, and the one it is compared with (the hand-written baseline, or itself with a feature off). */
export type Role = 'project' | 'baseline';
export type Names = Record<Role, string>;
const ROLES: readonly Role[] = ['project', 'baseline'];

/** One scenario measured once on one server. */
export interface ScenarioRun extends Omit<ScenarioMeasurement, 'scenario'> {
  table: string;
  round: number;
  server: Role;
  scenario: string;
}

/** One life of a server process: its start and its peak memory over all its load. */
export interface ServerLife {
  table: string;
  server: Role;
  startupMs: number;
  peakRssMb: number;
}

export interface Soak {
  table: string;
  warmupSeconds: number;
  seconds: number;
  afterWarmupMb: number;
  afterSoakMb: number;
}

interface Medians {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerRequest: number;
  errors: number;
  non2xx: number;
  unexpected: number;
}

export interface SummaryRow {
  table: string;
  scenario: string;
  project: Medians;
  baseline: Medians;
  /**
   * project / baseline, each the median over rounds of the ratio within a round (the two servers
   * were loaded in turn, a second at a time), so a slow minute of a shared machine moves both sides
   * of one ratio: throughput (higher is better), p99 and CPU per request (lower is better).
   */
  rpsRatio: number;
  p99Ratio: number;
  cpuRatio: number;
  /** The lowest and highest throughput ratio of a round: how far one round's pair can be trusted. */
  rpsRatioRange: [number, number];
}

export interface TargetCheck {
  target: string;
  subject: string;
  value: string;
  pass: boolean;
}

/** What a comparison must meet; a limit left out is not checked. */
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
  /** RSS moves by a few MB as V8 sizes its heap; growth beyond this over the soak is a leak. */
  soakNoiseMb: 10,
  maxStartupMs: 500,
};

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? NaN)
    : ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}

function mediansOf(runs: ScenarioRun[]): Medians {
  const sum = (pick: (run: ScenarioRun) => number) => runs.reduce((total, run) => total + pick(run), 0);
  return {
    rps: median(runs.map((run) => run.measurement.rps)),
    p50Ms: median(runs.map((run) => run.measurement.p50Ms)),
    p99Ms: median(runs.map((run) => run.measurement.p99Ms)),
    cpuUsPerRequest: median(runs.map((run) => run.cpuUsPerRequest)),
    errors: sum((run) => run.measurement.errors),
    non2xx: sum((run) => run.measurement.non2xx),
    unexpected: sum((run) => run.unexpected),
  };
}

/** project / baseline in each round (both servers were loaded in turn), round by round. */
function pairedRatios(runs: ScenarioRun[], pick: (run: ScenarioRun) => number): number[] {
  const ratios = [...new Set(runs.map((run) => run.round))].map((round) => {
    const [project, baseline] = ROLES.map((server) => runs.find((run) => run.round === round && run.server === server));
    return project === undefined || baseline === undefined ? Number.NaN : pick(project) / pick(baseline);
  });
  return ratios.filter((ratio) => !Number.isNaN(ratio));
}

export function summarise(runs: ScenarioRun[]): SummaryRow[] {
  const keys = [...new Set(runs.map((run) => `${run.table}\t${run.scenario}`))];
  return keys.map((key) => {
    const [table = '', scenario = ''] = key.split('\t');
    const mine = runs.filter((run) => run.table === table && run.scenario === scenario);
    const rpsRatios = pairedRatios(mine, (run) => run.measurement.rps);
    return {
      table,
      scenario,
      project: mediansOf(mine.filter((run) => run.server === 'project')),
      baseline: mediansOf(mine.filter((run) => run.server === 'baseline')),
      rpsRatio: median(rpsRatios),
      p99Ratio: median(pairedRatios(mine, (run) => run.measurement.p99Ms)),
      cpuRatio: median(pairedRatios(mine, (run) => run.cpuUsPerRequest)),
      rpsRatioRange: [Math.min(...rpsRatios), Math.max(...rpsRatios)],
    };
  });
}

export const ratio = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(2)}x`);
export const ms = (value: number) => value.toFixed(2);
const count = (value: number) => Math.round(value).toLocaleString('en-US');

/** Throughput and p99 against the reference, p99 growth with the table, and that every answer was as expected. */
export function comparisonChecks(rows: SummaryRow[], limits: Limits, names: Names): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const row of rows) {
    const subject = `${row.scenario} @${row.table}`;
    checks.push({
      target: `throughput >= ${limits.minRpsRatio}x ${names.baseline}`,
      subject,
      value: ratio(row.rpsRatio),
      pass: row.rpsRatio >= limits.minRpsRatio,
    });
    if (limits.maxP99Ratio !== undefined)
      checks.push({
        target: `p99 <= ${limits.maxP99Ratio}x ${names.baseline}`,
        subject,
        value: ratio(row.p99Ratio),
        pass: row.p99Ratio <= limits.maxP99Ratio,
      });
  }
  const [small, ...large] = [...new Set(rows.map((row) => row.table))];
  const maxGrowth = limits.maxScaleP99Ratio;
  for (const row of maxGrowth === undefined ? [] : rows.filter((candidate) => large.includes(candidate.table))) {
    const reference = rows.find((candidate) => candidate.table === small && candidate.scenario === row.scenario);
    if (reference === undefined || maxGrowth === undefined) continue;
    const growth = row.project.p99Ms / reference.project.p99Ms;
    checks.push({
      target: `p99 @${row.table} <= ${maxGrowth}x p99 @${small}`,
      subject: `${row.scenario} (${names.project})`,
      value: `${ms(row.project.p99Ms)} vs ${ms(reference.project.p99Ms)} ms: ${ratio(growth)} (${names.baseline} ${ratio(row.baseline.p99Ms / reference.baseline.p99Ms)})`,
      pass: growth <= maxGrowth,
    });
  }
  const unexpected = rows.reduce((total, row) => total + row.project.unexpected + row.baseline.unexpected, 0);
  const errors = rows.reduce((total, row) => total + row.project.errors + row.baseline.errors, 0);
  checks.push({
    target: 'every response has the expected status, no socket errors',
    subject: `${names.project} and ${names.baseline}`,
    value: `${unexpected} unexpected, ${errors} errors`,
    pass: unexpected === 0 && errors === 0,
  });
  return checks;
}

/** The project server's memory, its growth over the soak, and its start. */
export function serverChecks(lives: ServerLife[], soak: Soak | undefined): TargetCheck[] {
  const project = lives.filter((life) => life.server === 'project');
  const peak = Math.max(...project.map((life) => life.peakRssMb));
  const startups = project.map((life) => life.startupMs);
  const checks: TargetCheck[] = [
    {
      target: `peak RSS < ${TARGETS.maxPeakRssMb} MB`,
      subject: 'project server',
      value: `${peak.toFixed(1)} MB`,
      pass: peak < TARGETS.maxPeakRssMb,
    },
    {
      target: `first 200 <= ${TARGETS.maxStartupMs} ms after spawn (median)`,
      subject: 'project server',
      value: `median ${median(startups).toFixed(0)} ms, max ${Math.max(...startups).toFixed(0)} ms over ${startups.length} starts`,
      pass: median(startups) <= TARGETS.maxStartupMs,
    },
  ];
  if (soak !== undefined) {
    const growth = soak.afterSoakMb - soak.afterWarmupMb;
    checks.push({
      target: `RSS growth over a ${soak.seconds} s soak @${soak.table} <= ${TARGETS.soakNoiseMb} MB`,
      subject: 'project server',
      value: `${soak.afterWarmupMb.toFixed(1)} -> ${soak.afterSoakMb.toFixed(1)} MB (${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB)`,
      pass: growth <= TARGETS.soakNoiseMb,
    });
  }
  return checks;
}

export function machine() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    kernel: release(),
  };
}

/** A text table: the first `left` columns left-aligned, the rest right-aligned. */
export function textTable(header: string[], rows: string[][], left = 3): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column < left ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)))
      .join('  ');
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

/** Each scenario's medians on both servers and the ratios; x = project / baseline, median of the per-round ratios. */
export function scenarioTable(rows: SummaryRow[], names: Names): string {
  return textTable(
    [
      'table',
      'scenario',
      'server',
      'req/s',
      'p50 ms',
      'p99 ms',
      'CPU us/req',
      'non-2xx',
      'x req/s',
      'rounds',
      'x p99',
      'x CPU',
    ],
    rows.flatMap((row) =>
      ROLES.map((server) => {
        const m = row[server];
        const ratios =
          server === 'project'
            ? [
                ratio(row.rpsRatio),
                `${row.rpsRatioRange[0].toFixed(2)}-${row.rpsRatioRange[1].toFixed(2)}`,
                ratio(row.p99Ratio),
                ratio(row.cpuRatio),
              ]
            : ['', '', '', ''];
        const name = server === 'project' ? [row.table, row.scenario] : ['', ''];
        return [
          ...name,
          names[server],
          count(m.rps),
          ms(m.p50Ms),
          ms(m.p99Ms),
          count(m.cpuUsPerRequest),
          count(m.non2xx),
          ...ratios,
        ];
      }),
    ),
  );
}

export function livesTable(lives: ServerLife[], names: Names): string {
  return textTable(
    ['table', 'server', 'starts', 'first 200 ms (median)', 'peak RSS MB (max)'],
    [...new Map(lives.map((life) => [`${life.table}\t${life.server}`, life])).values()].map(({ table, server }) => {
      const mine = lives.filter((life) => life.table === table && life.server === server);
      return [
        table,
        names[server],
        String(mine.length),
        median(mine.map((life) => life.startupMs)).toFixed(0),
        Math.max(...mine.map((life) => life.peakRssMb)).toFixed(1),
      ];
    }),
    2,
  );
}

export function soakLine(soak: Soak | undefined): string {
  return soak === undefined
    ? 'Soak: skipped (BENCH_SOAK=0)'
    : `Soak (project, mixed load on the ${soak.table} table): RSS ${soak.afterWarmupMb.toFixed(1)} MB after ${soak.warmupSeconds} s of warm-up, ` +
        `${soak.afterSoakMb.toFixed(1)} MB after ${soak.seconds} s more`;
}

export function verdicts(checks: TargetCheck[]): string[] {
  const failed = checks.filter((check) => !check.pass).length;
  return [
    ...checks.map((check) => `${check.pass ? 'PASS' : 'FAIL'}  ${check.target}  ${check.subject}: ${check.value}`),
    '',
    failed === 0
      ? `All ${checks.length} targets met.`
      : `${failed} of ${checks.length} targets NOT met (see FAIL above).`,
  ];
}
