import t from 'tap';
import {
  comparisonChecks,
  resultsTable,
  type Role,
  type ScenarioRun,
  type ServerLife,
  serverChecks,
  summarise,
  TARGETS,
  verdicts,
} from '../scripts/bench/report.js';

// The benchmark's verdicts (PASS/FAIL per target) are what BENCHMARKS.md quotes; these tests hold
// the arithmetic behind them to what the report says it does. No timing is measured here.

const NAMES = { project: 'project', baseline: 'baseline' };

function run(server: Role, round: number, rps: number, p99Ms: number, table = '10k'): ScenarioRun {
  return {
    table,
    round,
    server,
    scenario: 'list-20',
    unexpected: 0,
    cpuUsPerRequest: 1_000_000 / rps,
    measurement: {
      rps,
      p50Ms: p99Ms / 2,
      p99Ms,
      errors: 0,
      statuses: { '200': rps },
      responses: rps,
      seconds: 1,
    },
  };
}

const life = (startupMs: number, peakRssMb = 100): ServerLife => ({
  server: 'project',
  startupMs,
  peakRssMb,
});

t.test('ratios are the median of the ratios within each round, so a slow round moves both sides', async (t) => {
  // Round 2: the machine was busy while the project ran; round 3: busy for both servers.
  const [row] = summarise([
    run('project', 1, 1000, 10),
    run('baseline', 1, 1000, 10),
    run('project', 2, 600, 20),
    run('baseline', 2, 1000, 10),
    run('project', 3, 700, 20),
    run('baseline', 3, 650, 25),
  ]);
  t.equal(row?.x.rps, 1, 'median of 1.00, 0.60 and 1.08 (medians alone would give 700 / 1000)');
  t.equal(row?.x.p99, 1, 'median of 1.0, 2.0 and 0.8');
  t.same(row?.rpsRange, [0.6, 700 / 650], 'and how far single rounds strayed');
  t.equal(row?.x.cpu, 1, 'CPU per response: median of 1.00, 1.67 and 0.93');
  t.equal(row?.project.rps, 700, 'the table shows each server’s own median');
  t.equal(row?.baseline.rps, 1000);
});

t.test('each target fails when it is missed and passes when it is met', async (t) => {
  const rows = summarise([
    run('project', 1, 850, 13),
    run('baseline', 1, 1000, 10),
    run('project', 1, 1000, 16, '1M'),
    run('baseline', 1, 1000, 10, '1M'),
  ]);
  const checks = [...comparisonChecks(rows, TARGETS, NAMES), ...serverChecks([life(450), life(520, 151), life(480)])];
  t.same(Object.fromEntries(checks.map((check) => [`${check.target} ${check.subject}`, check.pass])), {
    'throughput >= 0.9x baseline list-20 @10k': false,
    'p99 <= 1.2x baseline list-20 @10k': false,
    'throughput >= 0.9x baseline list-20 @1M': true,
    'p99 <= 1.2x baseline list-20 @1M': false,
    'p99 @1M <= 1.2x p99 @10k list-20 (project)': false,
    'every response has the expected status, no socket errors project and baseline': true,
    'peak RSS < 150 MB project server': false,
    'first 200 <= 500 ms after spawn (median) project server': true,
  });
  const report = verdicts(checks).join('\n');
  t.match(report, /FAIL {2}throughput >= 0\.9x baseline {2}list-20 @10k: 0\.85x/);
  t.match(report, /targets NOT met/);
});

t.test('a limit left out is not checked: the metrics comparison has throughput only', async (t) => {
  const rows = summarise([run('project', 1, 980, 30), run('baseline', 1, 1000, 10)]);
  const checks = comparisonChecks(rows, { minRpsRatio: 0.97 }, { project: 'project', baseline: 'no metrics' });
  t.same(
    checks.map((check) => [check.target, check.pass]),
    [
      ['throughput >= 0.97x no metrics', true],
      ['every response has the expected status, no socket errors', true],
    ],
  );
});

t.test('the results BENCHMARKS.md shows come from the same medians and ratios as the report', async (t) => {
  const rows = summarise([run('project', 1, 900, 12), run('baseline', 1, 1000, 10)]);
  const [header, alignment, row] = resultsTable([
    { name: 'PostgreSQL', rows },
    { name: 'SQLite', rows: [] },
  ]).split('\n');
  t.match(header, /^\| part \| table \| scenario \| req\/s \| x req\/s \| rounds \| p50 ms \| p99 ms \| x p99 \|/);
  t.equal(alignment, '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  t.equal(row, '| PostgreSQL | 10k | list-20 | 900 | 0.90x | 0.90x-0.90x | 6.00 | 12.00 | 1.20x | 1,111 | 1.11x |');
});
