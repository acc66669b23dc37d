import t from 'tap';
import {
  comparisonChecks,
  type Figures,
  resultsTable,
  type RoundRun,
  serverChecks,
  summarise,
  TARGETS,
  verdicts,
} from '../scripts/bench/report.js';

// The benchmark's verdicts (PASS/FAIL per target) are what BENCHMARKS.md quotes; these tests hold
// the arithmetic behind them to what the report says it does. No timing is measured here.

const NAMES = { project: 'project', baseline: 'baseline' };

const figures = (rps: number, p99Ms: number, cpuUs = 100, unexpected = 0): Figures => {
  return { rps, p99Ms, cpuUs, unexpected };
};

type Measured = [rps: number, p99Ms: number, cpuUs?: number];

/** One round of list-20: the project's and the baseline's throughput, p99 and CPU per response. */
function run(project: Measured, baseline: Measured, table = '10k'): RoundRun {
  return { table, scenario: 'list-20', project: figures(...project), baseline: figures(...baseline) };
}

const life = (startupMs: number, peakRssMb = 100) => ({
  project: { startupMs, peakRssMb },
  baseline: { startupMs: 1000, peakRssMb: 1000 },
});

t.test('ratios are the median of the ratios within each round, so a slow round moves both sides', async (t) => {
  // Round 2: the machine was busy while the project ran; round 3: busy for both servers.
  const [row] = summarise([run([1000, 10], [1000, 10]), run([600, 20], [1000, 10]), run([700, 20], [650, 25])]);
  t.equal(row?.x.rps, 1, 'median of 1.00, 0.60 and 1.08 (medians alone would give 700 / 1000)');
  t.equal(row?.x.p99, 1, 'median of 1.0, 2.0 and 0.8');
  t.equal(row?.project.rps, 700, 'the table shows each server’s own median');
  t.equal(row?.baseline.rps, 1000);
});

t.test('each target fails when it is missed and passes when it is met', async (t) => {
  const rows = summarise([run([850, 13], [1000, 10]), run([1000, 16], [1000, 10], '1M')]);
  const checks = [...comparisonChecks(rows, TARGETS, NAMES), ...serverChecks([life(450), life(520, 151), life(480)])];
  t.same(verdicts(checks), [
    'FAIL  throughput >= 0.9x baseline  list-20 @10k: 0.85x',
    'FAIL  p99 <= 1.2x baseline  list-20 @10k: 1.30x',
    'PASS  throughput >= 0.9x baseline  list-20 @1M: 1.00x',
    'FAIL  p99 <= 1.2x baseline  list-20 @1M: 1.60x',
    'FAIL  p99 @1M <= 1.2x p99 @10k  list-20 (project): 16.00 vs 13.00 ms: 1.23x (baseline 1.00x)',
    'PASS  every response has the expected status, no socket errors  project and baseline: 0 unexpected or failed',
    'FAIL  peak RSS < 150 MB  project server: 151.0 MB',
    'PASS  first 200 <= 500 ms after spawn (median)  project server: 480 ms over 3 starts',
    '',
    '5 of 8 targets NOT met (see FAIL above).',
  ]);
});

t.test('a limit left out is not checked: the metrics comparison has throughput only', async (t) => {
  const rows = summarise([run([980, 30], [1000, 10])]);
  const checks = comparisonChecks(rows, { minRpsRatio: 0.97 }, { project: 'project', baseline: 'no metrics' });
  t.same(verdicts(checks), [
    'PASS  throughput >= 0.97x no metrics  list-20 @10k: 0.98x',
    'PASS  every response has the expected status, no socket errors  project and no metrics: 0 unexpected or failed',
    '',
    'All 2 targets met.',
  ]);
});

t.test('an unexpected answer on either server, in any round, fails the comparison', async (t) => {
  const rounds = [run([1000, 10], [1000, 10]), { ...run([1000, 10], [1000, 10]), baseline: figures(1000, 10, 100, 3) }];
  const [, , answers] = comparisonChecks(summarise(rounds), TARGETS, NAMES);
  t.same(answers, {
    line: 'every response has the expected status, no socket errors  project and baseline: 3 unexpected or failed',
    pass: false,
  });
});

t.test('the results BENCHMARKS.md shows come from the same medians and ratios as the report', async (t) => {
  const rows = summarise([run([900, 12, 110], [1000, 10, 100])]);
  const [header, alignment, row] = resultsTable([
    { name: 'PostgreSQL', rows },
    { name: 'SQLite', rows: [] },
  ]).split('\n');
  t.match(header, /^\| part \| table \| scenario \| req\/s \(x\) \| p99 ms \(x\) \| CPU µs\/resp \(x\) \|$/);
  t.equal(alignment, '| --- | --- | --- | ---: | ---: | ---: |');
  t.equal(row, '| PostgreSQL | 10k | list-20 | 900 (0.90x) | 12.00 (1.20x) | 110 (1.10x) |');
});
