import t from 'tap';
import {
  comparisonChecks,
  type Figures,
  resultsTable,
  type RoundRun,
  summarise,
  verdicts,
  versionChecks,
} from '../scripts/bench/report.js';

// The bench's verdicts (PASS/FAIL per target) are what BENCHMARKS.md quotes; these tests hold the
// arithmetic behind them to what the report says it does. No timing is measured here.

const figures = (rps: number, p99Ms: number, cpuUs = 100, unexpected = 0): Figures => ({
  rps,
  p99Ms,
  cpuUs,
  unexpected,
});

function run(project: Figures, reference: Figures): RoundRun {
  return { scenario: 'list-20', project, reference };
}

t.test('ratios are the median of the ratios within each round, so a slow round moves both sides', async (t) => {
  // Round 2: the machine was busy while the project ran; round 3: busy for both servers.
  const [row] = summarise([
    run(figures(1000, 10), figures(1000, 10)),
    run(figures(600, 20), figures(1000, 10)),
    run(figures(700, 20), figures(650, 25)),
  ]);
  t.equal(row?.x.rps, 1, 'median of 1.00, 0.60 and 1.08 (medians alone would give 700 / 1000)');
  t.equal(row?.x.p99, 1, 'median of 1.0, 2.0 and 0.8');
  t.equal(row?.project.rps, 700, 'the table shows each server’s own median');
});

t.test('a target fails when missed, and any unexpected answer fails the comparison', async (t) => {
  const rows = summarise([
    run(figures(790, 13, 120), figures(1000, 10)),
    run(figures(800, 12), figures(1000, 10, 90, 3)),
  ]);
  t.same(verdicts(comparisonChecks(rows, 0.8, 'bare')), [
    'FAIL  throughput >= 0.8x bare  list-20: 0.80x',
    'FAIL  every response has the expected status, no socket errors  project and bare: 3 unexpected or failed',
    '',
    '2 of 2 targets NOT met (see FAIL above).',
  ]);
  const [, , row] = resultsTable([{ name: 'bare SQLite', rows }]).split('\n');
  t.equal(row, '| bare SQLite | list-20 | 795 (0.80x) | 12.50 (1.25x) | 110 (1.16x) |');
});

t.test('v1 against v2: CPU per response within the ratio in every scenario, each answer as expected', async (t) => {
  const rows = summarise([
    { scenario: 'list-20', project: figures(900, 10, 105), reference: figures(1000, 10, 100) },
    { scenario: 'create', project: figures(900, 10, 115), reference: figures(1000, 10, 100) },
    { scenario: 'create', project: figures(900, 10, 108), reference: figures(1000, 10, 100, 1) },
  ]);
  t.same(verdicts(versionChecks(rows, 1.1)), [
    'PASS  CPU per response, v1 through the changes <= 1.1x v2  list-20: 1.05x',
    'FAIL  CPU per response, v1 through the changes <= 1.1x v2  create: 1.11x',
    'FAIL  every response has the expected status, no socket errors  v1 and v2: 1 unexpected or failed',
    '',
    '2 of 3 targets NOT met (see FAIL above).',
  ]);
});
